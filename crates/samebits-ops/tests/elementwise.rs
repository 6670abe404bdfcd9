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
