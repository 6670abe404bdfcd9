//! Quantization family: rounding half to even, saturation, per-tensor / per-axis / blocked
//! parameters, the division precision, DynamicQuantizeLinear, and error cases. Expected values
//! are computed by hand from the formulas in docs/contract.md, "Quantization" (the
//! DynamicQuantizeLinear case is the example of the ONNX operator documentation).
mod common;
use common::*;
use half::f16;
use samebits_ir::{Attribute, Tensor, Value};
use samebits_ops::OpError;

fn run(
    op: &str,
    inputs: &[Option<Tensor>],
    attrs: &[(&str, Attribute)],
) -> Result<Tensor, OpError> {
    let inputs: Vec<Option<Value>> = inputs.iter().map(|t| t.clone().map(Value::from)).collect();
    Ok(run_node_opset(op, 21, &inputs, attrs, 1)?
        .remove(0)
        .into_tensor()?)
}

fn quantize(
    x: Tensor,
    scale: Tensor,
    zp: Option<Tensor>,
    attrs: &[(&str, Attribute)],
) -> Result<Tensor, OpError> {
    run("QuantizeLinear", &[Some(x), Some(scale), zp], attrs)
}

fn dequantize(
    x: Tensor,
    scale: Tensor,
    zp: Option<Tensor>,
    attrs: &[(&str, Attribute)],
) -> Result<Tensor, OpError> {
    run("DequantizeLinear", &[Some(x), Some(scale), zp], attrs)
}

fn t<T: samebits_ir::Element>(shape: &[usize], data: &[T]) -> Tensor {
    Tensor::from_vec(shape.to_vec(), data.to_vec()).unwrap()
}

#[test]
fn quantize_rounds_half_to_even_and_saturates() {
    // x / 2 = [0, 1, 1.5, 500, -127, -500]; rounded [0, 1, 2, 500, -127, -500]; + 128; clamped.
    let x = f32s(&[6], &[0., 2., 3., 1000., -254., -1000.]);
    let y = quantize(x, f32s(&[], &[2.]), Some(t::<u8>(&[], &[128])), &[]).unwrap();
    assert_eq!(y.as_slice::<u8>().unwrap(), &[128, 129, 130, 255, 1, 0]);
    // Ties: 0.5, 1.5, 2.5, -0.5, -1.5 round to 0, 2, 2, 0, -2.
    let x = f32s(&[5], &[1., 3., 5., -1., -3.]);
    let y = quantize(x, f32s(&[1], &[2.]), Some(t::<i8>(&[1], &[0])), &[]).unwrap();
    assert_eq!(y.as_slice::<i8>().unwrap(), &[0, 2, 2, 0, -2]);
    // NaN rounds to 0 (so gives the zero point), infinities saturate; no zero point means uint8.
    let x = f32s(&[3], &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY]);
    let y = quantize(x.clone(), f32s(&[], &[1.]), Some(t::<i8>(&[], &[5])), &[]).unwrap();
    assert_eq!(y.as_slice::<i8>().unwrap(), &[5, 127, -128]);
    let y = quantize(x, f32s(&[], &[1.]), None, &[]).unwrap();
    assert_eq!(y.as_slice::<u8>().unwrap(), &[0, 255, 0]);
}

#[test]
fn quantize_per_axis_and_blocked() {
    // Column j uses scale [1, 2, 4][j] and zero point [0, 1, -1][j].
    let x = f32s(&[2, 3], &[4., 4., 4., -8., 8., -8.]);
    let y = quantize(
        x,
        f32s(&[3], &[1., 2., 4.]),
        Some(t::<i8>(&[3], &[0, 1, -1])),
        &[],
    )
    .unwrap();
    assert_eq!(y.as_slice::<i8>().unwrap(), &[4, 3, 0, -8, 5, -3]);
    // Blocks of 2 along axis 1: row 0 scales [1, 2], row 1 scales [4, 8].
    let x = f32s(&[2, 4], &[1., 2., 4., 8., 8., 16., 32., 64.]);
    let block = [("block_size", Attribute::Int(2))];
    let y = quantize(x, f32s(&[2, 2], &[1., 2., 4., 8.]), None, &block).unwrap();
    assert_eq!(y.as_slice::<u8>().unwrap(), &[1, 2, 2, 4, 2, 4, 4, 8]);
    // A last, partial block: 3 elements in blocks of 2.
    let y = quantize(
        f32s(&[1, 3], &[5., 6., 70.]),
        f32s(&[1, 2], &[1., 10.]),
        None,
        &block,
    )
    .unwrap();
    assert_eq!(y.as_slice::<u8>().unwrap(), &[5, 6, 7]);
    // Per-axis along axis 0 with output_dtype instead of a zero point.
    let y = quantize(
        f32s(&[2, 2], &[300., 300., 300., 300.]),
        f32s(&[2], &[1., 10.]),
        None,
        &[
            ("axis", Attribute::Int(0)),
            ("output_dtype", Attribute::Int(5)),
        ],
    )
    .unwrap();
    assert_eq!(y.as_slice::<i16>().unwrap(), &[300, 300, 30, 30]);
}

#[test]
fn quantize_divides_in_the_precision_of_the_scale() {
    // 1538 / 3 = 512.667: in f16 (spacing 0.5) the quotient is 512.5, which rounds to 512; in
    // f32 it stays 512.667 and rounds to 513.
    let x = t(&[1], &[f16::from_f32(1538.)]);
    let scale = t(&[], &[f16::from_f32(3.)]);
    let zp = Some(t::<i16>(&[], &[0]));
    let y = quantize(x.clone(), scale.clone(), zp.clone(), &[]).unwrap();
    assert_eq!(y.as_slice::<i16>().unwrap(), &[512]);
    let y = quantize(x, scale, zp, &[("precision", Attribute::Int(1))]).unwrap();
    assert_eq!(y.as_slice::<i16>().unwrap(), &[513]);
}

#[test]
fn quantize_errors_name_the_problem() {
    let x = || f32s(&[2, 2], &[1., 2., 3., 4.]);
    let e = quantize(
        x(),
        f32s(&[], &[1.]),
        Some(t::<i8>(&[], &[0])),
        &[("output_dtype", Attribute::Int(2))],
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("zero point has dtype i8, attribute \"output_dtype\" says u8"),
        "{e}"
    );
    let e = quantize(
        x(),
        f32s(&[], &[1.]),
        None,
        // 14 is ONNX's COMPLEX64: no quantized type.
        &[("output_dtype", Attribute::Int(14))],
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("= 14 is not a quantized dtype"),
        "{e}"
    );
    let e = quantize(x(), f32s(&[], &[1.]), Some(t::<i32>(&[], &[0])), &[]).unwrap_err();
    assert!(e.to_string().contains("cannot quantize to i32"), "{e}");
    let e = quantize(x(), f32s(&[3], &[1., 1., 1.]), None, &[]).unwrap_err();
    assert!(
        e.to_string()
            .contains("neither a scalar nor a vector of the 2 elements of axis 1"),
        "{e}"
    );
    let e = quantize(
        x(),
        f32s(&[2], &[1., 1.]),
        None,
        &[("axis", Attribute::Int(2))],
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("attribute \"axis\": axis 2 is out of range"),
        "{e}"
    );
    let e = quantize(
        x(),
        f32s(&[2, 1], &[1.; 2]),
        None,
        &[("block_size", Attribute::Int(1))],
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("blocked scale must have shape [2, 2]"),
        "{e}"
    );
    let e = quantize(x(), f32s(&[2], &[1., 1.]), Some(t::<u8>(&[1], &[0])), &[]).unwrap_err();
    assert!(
        e.to_string()
            .contains("zero point of shape [1] does not match"),
        "{e}"
    );
}

#[test]
fn dequantize_subtracts_the_zero_point_then_scales() {
    let y = dequantize(
        t::<u8>(&[4], &[0, 3, 128, 255]),
        f32s(&[], &[2.]),
        Some(t::<u8>(&[], &[128])),
        &[],
    )
    .unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), &[-256., -250., 0., 254.]);
    // Per-axis along axis 0: row 0 (x - 1) * 0.5, row 1 (x + 1) * 4.
    let y = dequantize(
        t::<i8>(&[2, 2], &[3, 1, -1, 1]),
        f32s(&[2], &[0.5, 4.]),
        Some(t::<i8>(&[2], &[1, -1])),
        &[("axis", Attribute::Int(0))],
    )
    .unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), &[1., 0., 0., 8.]);
    // int32: 2^24 + 1 rounds to 2^24 when converted to f32 (ties to even), then * 0.5.
    let y = dequantize(
        t::<i32>(&[2], &[16_777_217, -3]),
        f32s(&[], &[0.5]),
        None,
        &[],
    )
    .unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), &[8_388_608., -1.5]);
    // The result takes the scale's dtype, or output_dtype.
    let y = dequantize(
        t::<i16>(&[2], &[1, -2]),
        t(&[], &[f16::from_f32(0.25)]),
        None,
        &[],
    )
    .unwrap();
    assert_eq!(
        y.as_slice::<f16>().unwrap(),
        &[f16::from_f32(0.25), f16::from_f32(-0.5)]
    );
    let y = dequantize(
        t::<u16>(&[1], &[3]),
        f32s(&[], &[2.]),
        None,
        &[("output_dtype", Attribute::Int(10))],
    )
    .unwrap();
    assert_eq!(y.as_slice::<f16>().unwrap(), &[f16::from_f32(6.)]);
}

#[test]
fn dequantize_errors_name_the_problem() {
    let e = dequantize(
        t::<u8>(&[1], &[1]),
        f32s(&[], &[1.]),
        Some(t::<i8>(&[], &[0])),
        &[],
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("input 2 (x_zero_point) has dtype i8, x has u8"),
        "{e}"
    );
    let e = dequantize(f32s(&[1], &[1.]), f32s(&[], &[1.]), None, &[]).unwrap_err();
    assert!(e.is_unsupported(), "{e}");
    let e = dequantize(t::<u8>(&[1], &[1]), t::<i32>(&[], &[1]), None, &[]).unwrap_err();
    assert!(
        e.to_string()
            .contains("input 1 (x_scale) must be float32, float16 or bfloat16"),
        "{e}"
    );
}

#[test]
fn dynamic_quantize_linear_matches_the_onnx_example() {
    // min -3, max 2: scale = 5 / 255, zero point = round(3 / scale) = 153.
    let x = f32s(&[6], &[0., 2., -3., -2.5, 1.34, 0.5]);
    let out = run_node_opset("DynamicQuantizeLinear", 21, &[Some(x.into())], &[], 3).unwrap();
    assert_eq!(
        tensor(&out[0]).as_slice::<u8>().unwrap(),
        &[153, 255, 0, 26, 221, 179]
    );
    assert_eq!(tensor(&out[1]).as_slice::<f32>().unwrap(), &[5f32 / 255.]);
    assert_eq!(tensor(&out[2]).as_slice::<u8>().unwrap(), &[153]);
    // All positive: the range is widened to include 0, so the zero point is 0.
    let x = f32s(&[2], &[1., 255.]);
    let out = run_node_opset("DynamicQuantizeLinear", 21, &[Some(x.into())], &[], 3).unwrap();
    assert_eq!(tensor(&out[0]).as_slice::<u8>().unwrap(), &[1, 255]);
    assert_eq!(tensor(&out[2]).as_slice::<u8>().unwrap(), &[0]);
    let e = run_node_opset(
        "DynamicQuantizeLinear",
        21,
        &[Some(i64s(&[1], &[1]).into())],
        &[],
        3,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("input 0 (x) must be float32, got i64"),
        "{e}"
    );
}
