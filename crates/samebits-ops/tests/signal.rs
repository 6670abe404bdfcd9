//! Signal family: the window generators, checked against their contract formulas (section
//! `windows`) evaluated by hand with samebits-math, and against the textbook values at the
//! points where the windows are exact (the ends and the middle).
mod common;
use common::*;
use samebits_ir::{Attribute, Tensor};
use std::f32::consts::PI;

fn window(op: &str, size: i64, periodic: i64) -> Vec<f32> {
    run1(
        op,
        &[Tensor::scalar(size)],
        &[("periodic", Attribute::Int(periodic))],
    )
    .unwrap()
    .as_slice::<f32>()
    .unwrap()
    .to_vec()
}

#[test]
fn hann_hamming_blackman() {
    let hann = window("HannWindow", 5, 0);
    // Symmetric, N = 4: sin^2(pi n / 4) = 0, 0.5, 1, 0.5, 0.
    let by_hand: Vec<f32> = (0..5)
        .map(|n| {
            let s = samebits_math::sin((PI * n as f32) / 4.0);
            s * s
        })
        .collect();
    assert_eq!(hann, by_hand);
    assert_eq!((hann[0], hann[2]), (0.0, 1.0));
    // Hamming, periodic N = 4: 25/46 - cos(pi n / 2) * 21/46; n = 0 gives 4/46.
    let hamming = window("HammingWindow", 4, 1);
    assert!((hamming[0] - 4.0 / 46.0).abs() < 1e-7);
    assert!((hamming[2] - 1.0).abs() < 1e-7);
    // Blackman, symmetric N = 4: 0.42 - 0.5 cos(pi n / 2) + 0.08 cos(pi n): 0 at the ends, 1 mid.
    let blackman = window("BlackmanWindow", 5, 0);
    assert!(blackman[0].abs() < 1e-7 && (blackman[2] - 1.0).abs() < 1e-6);
    assert_eq!(window("HannWindow", 0, 1), Vec::<f32>::new());
}

#[test]
fn output_datatype_is_a_cast() {
    let y = run1(
        "HannWindow",
        &[Tensor::scalar(3i64)],
        &[("output_datatype", Attribute::Int(11))],
    )
    .unwrap();
    // Periodic N = 3: sin^2(pi / 3) = 0.75 (rounded in f32), widened to f64.
    let s = samebits_math::sin(PI / 3.0);
    assert_eq!(y.as_slice::<f64>().unwrap()[1], (s * s) as f64);
}
