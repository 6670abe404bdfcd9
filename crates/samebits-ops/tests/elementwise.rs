//! Elementwise family: integer semantics, float special values, broadcasting, Where and Clip.
mod common;
use common::*;
use samebits_ir::{Attribute, Tensor};

#[test]
fn integer_mod_follows_the_divisor_sign_and_fmod_the_dividend() {
    let a = Tensor::from_vec(vec![4], vec![-7i32, 7, -7, 7]).unwrap();
    let b = Tensor::from_vec(vec![4], vec![3i32, -3, -3, 3]).unwrap();
    let m = run1("Mod", &[a.clone(), b.clone()], &[]).unwrap();
    assert_eq!(m.as_slice::<i32>().unwrap(), &[2, -2, -1, 1]);
    let f = run1("Mod", &[a, b], &[("fmod", Attribute::Int(1))]).unwrap();
    assert_eq!(f.as_slice::<i32>().unwrap(), &[-1, 1, -1, 1]);
}

#[test]
fn integer_division_by_zero_is_an_error() {
    let a = Tensor::from_vec(vec![1], vec![1i64]).unwrap();
    let b = Tensor::from_vec(vec![1], vec![0i64]).unwrap();
    let e = run1("Div", &[a, b], &[]).unwrap_err();
    assert!(e.to_string().contains("division by zero"), "{e}");
}

#[test]
fn max_min_propagate_nan_and_order_signed_zeros() {
    let a = f32s(&[3], &[f32::NAN, -0.0, 1.0]);
    let b = f32s(&[3], &[1.0, 0.0, 2.0]);
    let mx = run1("Max", &[a.clone(), b.clone()], &[]).unwrap();
    let mx = mx.as_slice::<f32>().unwrap();
    assert!(mx[0].is_nan());
    assert_eq!(mx[1].to_bits(), 0.0f32.to_bits());
    let mn = run1("Min", &[a, b], &[]).unwrap();
    assert_eq!(
        mn.as_slice::<f32>().unwrap()[1].to_bits(),
        (-0.0f32).to_bits()
    );
}

#[test]
fn mean_divides_the_left_fold_by_the_count() {
    let out = run1(
        "Mean",
        &[
            f32s(&[2], &[1., 2.]),
            f32s(&[1], &[3.]),
            f32s(&[2], &[5., 1.]),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(out.as_slice::<f32>().unwrap(), &[3.0, 2.0]);
}

#[test]
fn where_and_clip_broadcast() {
    let c = Tensor::from_bools(vec![2, 1], vec![true, false]).unwrap();
    let out = run1("Where", &[c, f32s(&[2], &[1., 2.]), f32s(&[1], &[9.])], &[]).unwrap();
    assert_eq!(out.shape(), &[2, 2]);
    assert_eq!(out.as_slice::<f32>().unwrap(), &[1., 2., 9., 9.]);
    let x = f32s(&[4], &[-2., 0.5, 3., f32::NAN]);
    let y = run1("Clip", &[x, f32s(&[], &[0.]), f32s(&[], &[1.])], &[]).unwrap();
    let y = y.as_slice::<f32>().unwrap();
    assert_eq!(&y[..3], &[0., 0.5, 1.]);
    assert!(y[3].is_nan());
}

/// One output of `op_type` at `opset` on `inputs` with `attributes`.
fn run_at(
    op_type: &str,
    opset: i64,
    inputs: &[Tensor],
    attributes: &[(&str, Attribute)],
) -> Result<Tensor, samebits_ops::OpError> {
    let inputs: Vec<Option<samebits_ir::Value>> =
        inputs.iter().cloned().map(|t| Some(t.into())).collect();
    let out = run_node_opset(op_type, opset, &inputs, attributes, 1)?;
    Ok(out.into_iter().next().unwrap().into_tensor()?)
}

// Legacy broadcasting (opsets 1-6, the Add-6 / Mul-6 / Greater-1 / PRelu-6 / Sum-6 definitions
// of the ONNX changelog). Expected values are computed by hand from the spec: with
// broadcast = 1, B's dims line up with A's dims starting at `axis` (default: A's trailing
// dims), and the output has A's shape.

#[test]
fn legacy_broadcast_aligns_b_at_axis_or_at_the_trailing_dims() {
    let bc = ("broadcast", Attribute::Int(1));
    let a = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // axis = 0: B = [10, 20] runs along A's rows (numpy would refuse [2, 3] with [2]).
    let b = f32s(&[2], &[10.0, 20.0]);
    let y = run_at(
        "Sub",
        6,
        &[a.clone(), b.clone()],
        &[bc.clone(), ("axis", Attribute::Int(0))],
    );
    let y = y.unwrap();
    assert_eq!(y.shape(), &[2, 3]);
    assert_eq!(
        y.as_slice::<f32>().unwrap(),
        &[-9.0, -8.0, -7.0, -16.0, -15.0, -14.0]
    );
    // From opset 7 the same inputs broadcast numpy-style, which they cannot.
    assert!(run_at("Sub", 7, &[a.clone(), b], &[]).is_err());
    // No axis: B = [10, 20, 30] matches A's last dim.
    let b = f32s(&[3], &[10.0, 20.0, 30.0]);
    let y = run_at("Add", 6, &[a.clone(), b], std::slice::from_ref(&bc)).unwrap();
    assert_eq!(
        y.as_slice::<f32>().unwrap(),
        &[11.0, 22.0, 33.0, 14.0, 25.0, 36.0]
    );
    // axis = 1 of a rank-3 A: B = [1, 10, 100] scales A[i, j, k] by B[j].
    let a3 = f32s(&[2, 3, 2], &(1..=12).map(|v| v as f32).collect::<Vec<_>>());
    let b = f32s(&[3], &[1.0, 10.0, 100.0]);
    let y = run_at(
        "Mul",
        1,
        &[a3, b],
        &[bc.clone(), ("axis", Attribute::Int(1))],
    )
    .unwrap();
    assert_eq!(y.shape(), &[2, 3, 2]);
    assert_eq!(
        y.as_slice::<f32>().unwrap(),
        &[
            1.0, 2.0, 30.0, 40.0, 500.0, 600.0, 7.0, 8.0, 90.0, 100.0, 1100.0, 1200.0
        ]
    );
    // A one-element B of any rank up to A's applies to every element.
    let y = run_at("Div", 6, &[a, f32s(&[1, 1], &[2.0])], &[bc]).unwrap();
    assert_eq!(
        y.as_slice::<f32>().unwrap(),
        &[0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    );
}

#[test]
fn legacy_broadcast_applies_to_comparisons_and_pow() {
    let bc = ("broadcast", Attribute::Int(1));
    let axis0 = ("axis", Attribute::Int(0));
    // Greater, axis 0: [[1 > 2, 5 > 2], [3 > 4, 2 > 4]].
    let a = i64s(&[2, 2], &[1, 5, 3, 2]);
    let b = i64s(&[2], &[2, 4]);
    let y = run_at("Greater", 6, &[a, b], &[bc.clone(), axis0.clone()]).unwrap();
    assert_eq!(y.as_bools().unwrap(), &[0, 1, 0, 0]);
    // Pow, axis 0: rows squared, then cubed.
    let a = f32s(&[2, 2], &[2.0, 3.0, 2.0, 3.0]);
    let b = f32s(&[2], &[2.0, 3.0]);
    let y = run_at("Pow", 6, &[a, b], &[bc, axis0]).unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), &[4.0, 9.0, 8.0, 27.0]);
}

#[test]
fn legacy_broadcast_errors_name_the_shapes_and_attribute() {
    let a = f32s(&[2, 3], &[0.0; 6]);
    // Without broadcast = 1 the shapes must be equal.
    let e = run_at("Add", 6, &[a.clone(), f32s(&[3], &[0.0; 3])], &[]).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("under_test") && msg.contains("\"broadcast\""),
        "{msg}"
    );
    // B's dims must match A's from `axis` on.
    let e = run_at(
        "Add",
        6,
        &[a.clone(), f32s(&[2], &[0.0; 2])],
        &[
            ("broadcast", Attribute::Int(1)),
            ("axis", Attribute::Int(1)),
        ],
    )
    .unwrap_err();
    assert!(e.to_string().contains("starting at axis 1"), "{e}");
    let e = run_at(
        "Add",
        6,
        &[a.clone(), a],
        &[("broadcast", Attribute::Int(2))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("must be 0 or 1, got 2"), "{e}");
}

#[test]
fn legacy_prelu_slope_is_per_channel_and_sum_needs_equal_shapes() {
    // PRelu-6, X of shape [1, 3, 2] and slope [0.5, 0.25, 2] for channels 0, 1, 2:
    // x < 0 gives slope[c] * x, x >= 0 gives x.
    let x = f32s(&[1, 3, 2], &[-1.0, -1.0, -2.0, 2.0, -4.0, 4.0]);
    let slope = f32s(&[3], &[0.5, 0.25, 2.0]);
    let y = run_at("PRelu", 6, &[x, slope], &[]).unwrap();
    assert_eq!(
        y.as_slice::<f32>().unwrap(),
        &[-0.5, -0.5, -0.5, 2.0, -8.0, 4.0]
    );
    // Sum-6 does not broadcast; Sum-8 does.
    let (a, b) = (f32s(&[2], &[1.0, 2.0]), f32s(&[1], &[10.0]));
    let e = run_at("Sum", 6, &[a.clone(), b.clone()], &[]).unwrap_err();
    assert!(e.to_string().contains("before opset 8"), "{e}");
    let y = run_at("Sum", 8, &[a, b], &[]).unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), &[11.0, 12.0]);
}
