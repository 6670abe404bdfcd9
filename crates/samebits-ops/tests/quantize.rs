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

/// QLinearMatMul of `a` and `b` with scales `(a_s, b_s, y_s)` of one dtype and zero points.
fn qlinear_matmul(
    a: Tensor,
    a_zp: Tensor,
    b: Tensor,
    b_zp: Tensor,
    scales: [Tensor; 3],
    y_zp: Tensor,
) -> Result<Tensor, OpError> {
    let [a_s, b_s, y_s] = scales;
    run(
        "QLinearMatMul",
        &[
            Some(a),
            Some(a_s),
            Some(a_zp),
            Some(b),
            Some(b_s),
            Some(b_zp),
            Some(y_s),
            Some(y_zp),
        ],
        &[],
    )
}

fn f32_scales(a: f32, b: f32, y: f32) -> [Tensor; 3] {
    [t(&[], &[a]), t(&[], &[b]), t(&[], &[y])]
}

#[test]
fn qlinear_matmul_requantizes_exact_integer_products() {
    // A - 1 = [[1, 3], [2, 0]], B - 2 = [[1, -1], [2, 5]]: C = [[7, 14], [2, -2]].
    // M = (0.5 * 0.25) / 0.25 = 0.5: C * M = [[3.5, 7], [1, -1]] -> [[4, 7], [1, -1]] + 100.
    let y = qlinear_matmul(
        t(&[2, 2], &[2u8, 4, 3, 1]),
        t(&[], &[1u8]),
        t(&[2, 2], &[3u8, 1, 4, 7]),
        t(&[], &[2u8]),
        f32_scales(0.5, 0.25, 0.25),
        t(&[], &[100u8]),
    )
    .unwrap();
    assert_eq!(y.as_slice::<u8>().unwrap(), [104, 107, 101, 99]);
    // Ties round to even (2.5 -> 2), and the result saturates to the output type.
    let y = qlinear_matmul(
        t(&[1, 2], &[5i8, 127]),
        t(&[], &[0i8]),
        t(&[2, 2], &[1i8, 0, 0, 127]),
        t(&[], &[0i8]),
        f32_scales(1.0, 1.0, 2.0),
        t(&[], &[0i8]),
    )
    .unwrap();
    assert_eq!(y.as_slice::<i8>().unwrap(), [2, 127]);
}

#[test]
fn qlinear_matmul_multiplier_is_rounded_to_the_scales_precision() {
    // a_s = b_s = 1 + 2^-8: the product 1 + 2^-7 + 2^-16 rounds to 1 + 2^-7 in f16 but is
    // exact in f32, so C = 64 gives 64.5 (ties to even: 64) in f16 and 64.5 + 2^-10 (65) in f32.
    let s = 1.0 + 2f32.powi(-8);
    let run_with = |scales: [Tensor; 3]| {
        qlinear_matmul(
            t(&[1, 1], &[8u8]),
            t(&[], &[0u8]),
            t(&[1, 1], &[8u8]),
            t(&[], &[0u8]),
            scales,
            t(&[], &[0u8]),
        )
        .unwrap()
    };
    let half = |v: f32| t(&[], &[f16::from_f32(v)]);
    assert_eq!(
        run_with([half(s), half(s), half(1.0)])
            .as_slice::<u8>()
            .unwrap(),
        [64]
    );
    assert_eq!(
        run_with(f32_scales(s, s, 1.0)).as_slice::<u8>().unwrap(),
        [65]
    );
}

#[test]
fn qlinear_matmul_bits_do_not_depend_on_threads_or_batch() {
    const BATCH: usize = 3;
    let (m, k, n) = (5, 70, 4);
    let bytes = |len: usize, seed: u64| -> Vec<i8> {
        pseudo_random(len, seed)
            .iter()
            .map(|v| (v * 127.0) as i8)
            .collect()
    };
    let a = bytes(BATCH * m * k, 1);
    let b = bytes(BATCH * k * n, 2);
    // Per-row scales and zero points of A, per-column ones of B.
    let scales = |y: f32| {
        [
            t(&[m], &[0.02f32, 0.03, 0.05, 0.07, 0.11]),
            t(&[n], &[0.013f32, 0.017, 0.019, 0.023]),
            t(&[], &[y]),
        ]
    };
    let run_batch = |a: &[i8], b: &[i8], batch: usize| {
        qlinear_matmul(
            t(&[batch, m, k], a),
            t(&[m], &[0i8, 1, -2, 3, -4]),
            t(&[batch, k, n], b),
            t(&[n], &[5i8, -6, 7, -8]),
            scales(0.37),
            t(&[], &[-3i8]),
        )
        .unwrap()
    };
    let one = with_threads(1, || run_batch(&a, &b, BATCH));
    let four = with_threads(4, || run_batch(&a, &b, BATCH));
    let one = one.as_slice::<i8>().unwrap().to_vec();
    assert_eq!(one, four.as_slice::<i8>().unwrap());
    assert!(
        one.iter().any(|&v| v != one[0]),
        "all outputs equal: {one:?}"
    );
    for i in 0..BATCH {
        let alone = run_batch(&a[i * m * k..][..m * k], &b[i * k * n..][..k * n], 1);
        assert_eq!(&one[i * m * n..][..m * n], alone.as_slice::<i8>().unwrap());
    }
}

#[test]
fn qlinear_matmul_errors_name_the_input() {
    let err = qlinear_matmul(
        t(&[1, 2], &[1u8, 2]),
        t(&[3], &[0u8, 0, 0]),
        t(&[2, 1], &[1u8, 2]),
        t(&[], &[0u8]),
        f32_scales(1.0, 1.0, 1.0),
        t(&[], &[0u8]),
    )
    .unwrap_err();
    assert!(err.to_string().contains("zero point of A"), "{err}");
    let err = qlinear_matmul(
        t(&[1, 2], &[1u8, 2]),
        t(&[], &[0u8]),
        t(&[2, 1], &[1u8, 2]),
        t(&[], &[0u8]),
        [
            t(&[], &[1.0f32]),
            t(&[], &[1.0f32]),
            t(&[2], &[1.0f32, 2.0]),
        ],
        t(&[], &[0u8]),
    )
    .unwrap_err();
    assert!(err.to_string().contains("y_scale"), "{err}");
}
