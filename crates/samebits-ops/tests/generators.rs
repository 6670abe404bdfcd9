//! Generators family. Expected values are the ONNX documentation examples (noted) or follow
//! from the definitions by hand; float Range follows docs/contract.md ("Range").
mod common;
use common::*;
use samebits_ir::{Attribute, DType, Tensor};

#[test]
fn constant_takes_exactly_one_value_attribute() {
    let y = run1(
        "Constant",
        &[],
        &[("value_ints", Attribute::Ints(vec![1, 2]))],
    )
    .unwrap();
    assert_eq!(y.as_slice::<i64>().unwrap(), &[1, 2]);
    let s = run1(
        "Constant",
        &[],
        &[("value_string", Attribute::String("hi".into()))],
    )
    .unwrap();
    assert_eq!(
        (s.shape(), s.as_strings().unwrap()),
        (&[][..], &["hi".to_string()][..])
    );
    let t = run1(
        "Constant",
        &[],
        &[("value", Attribute::Tensor(f32s(&[2], &[1., 2.])))],
    )
    .unwrap();
    assert_eq!(t.as_slice::<f32>().unwrap(), &[1., 2.]);
    let e = run1(
        "Constant",
        &[],
        &[
            ("value_int", Attribute::Int(1)),
            ("value_float", Attribute::Float(1.0)),
        ],
    )
    .unwrap_err();
    assert!(e.to_string().contains("exactly one"), "{e}");
}

#[test]
fn constant_of_shape_repeats_its_value() {
    let v = Tensor::from_vec(vec![1], vec![5i32]).unwrap();
    let y = run1(
        "ConstantOfShape",
        &[i64s(&[2], &[2, 3])],
        &[("value", Attribute::Tensor(v))],
    )
    .unwrap();
    assert_eq!(
        (y.shape(), y.as_slice::<i32>().unwrap()),
        (&[2, 3][..], &[5; 6][..])
    );
    let z = run1("ConstantOfShape", &[i64s(&[1], &[2])], &[]).unwrap();
    assert_eq!(z.as_slice::<f32>().unwrap(), &[0., 0.]);
    let s = run1("ConstantOfShape", &[i64s(&[0], &[])], &[]).unwrap();
    assert_eq!(s.shape(), &[] as &[usize]);
    assert!(run1("ConstantOfShape", &[i64s(&[1], &[-1])], &[]).is_err());
    assert!(run1("ConstantOfShape", &[i64s(&[2], &[1 << 40, 1 << 40])], &[]).is_err());
}

#[test]
fn range_counts_with_ceil_and_computes_floats_from_the_index() {
    // ONNX doc examples.
    let r = run1(
        "Range",
        &[i64s(&[], &[3]), i64s(&[], &[9]), i64s(&[], &[3])],
        &[],
    )
    .unwrap();
    assert_eq!(r.as_slice::<i64>().unwrap(), &[3, 6]);
    // ONNX node test range_int32_type_negative_delta: ceil((6 - 10) / -3) = 2.
    let i32s = |v: i32| Tensor::from_vec(vec![], vec![v]).unwrap();
    let r = run1("Range", &[i32s(10), i32s(6), i32s(-3)], &[]).unwrap();
    assert_eq!(r.as_slice::<i32>().unwrap(), &[10, 7]);
    // f16: computed in f32, rounded once at the store.
    let h = |v: f32| Tensor::scalar(half::f16::from_f32(v));
    let r = run1("Range", &[h(1.0), h(1.3), h(0.1)], &[]).unwrap();
    let d = half::f16::from_f32(0.1).to_f32();
    let want: Vec<half::f16> = (0..3)
        .map(|i| half::f16::from_f32(1.0 + i as f32 * d))
        .collect();
    assert_eq!(r.as_slice::<half::f16>().unwrap(), &want[..]);
    let r = run1(
        "Range",
        &[i64s(&[], &[10]), i64s(&[], &[4]), i64s(&[], &[-2])],
        &[],
    )
    .unwrap();
    assert_eq!(r.as_slice::<i64>().unwrap(), &[10, 8, 6]);
    let r = run1(
        "Range",
        &[i64s(&[], &[1]), i64s(&[], &[5]), i64s(&[], &[-1])],
        &[],
    )
    .unwrap();
    assert_eq!(r.shape(), &[0]);
    // ceil((2 - 1) / 0.3) = 4 elements, each 1 + i * 0.3 in f32 (two roundings, no FMA).
    let r = run1(
        "Range",
        &[f32s(&[], &[1.]), f32s(&[], &[2.]), f32s(&[], &[0.3])],
        &[],
    )
    .unwrap();
    let want: Vec<f32> = (0..4).map(|i| 1.0f32 + i as f32 * 0.3f32).collect();
    assert_eq!(r.as_slice::<f32>().unwrap(), &want[..]);
    let e = run1(
        "Range",
        &[i64s(&[], &[0]), i64s(&[], &[1]), i64s(&[], &[0])],
        &[],
    )
    .unwrap_err();
    assert!(e.to_string().contains("delta"), "{e}");
    let e = run1(
        "Range",
        &[f32s(&[], &[0.]), f32s(&[], &[1e30]), f32s(&[], &[1e-30])],
        &[],
    )
    .unwrap_err();
    assert!(e.to_string().contains("too many"), "{e}");
}

#[test]
fn eye_like_marks_the_k_diagonal() {
    let x = f32s(&[2, 3], &[0.; 6]);
    let y = run1(
        "EyeLike",
        std::slice::from_ref(&x),
        &[("k", Attribute::Int(1)), ("dtype", Attribute::Int(6))],
    )
    .unwrap();
    assert_eq!(y.dtype(), DType::I32);
    assert_eq!(y.as_slice::<i32>().unwrap(), &[0, 1, 0, 0, 0, 1]);
    let y = run1("EyeLike", &[x], &[]).unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), &[1., 0., 0., 0., 1., 0.]);
    assert!(run1("EyeLike", &[f32s(&[2], &[0., 0.])], &[]).is_err());
}
