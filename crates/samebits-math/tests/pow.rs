//! `pow` against the CORE-MATH oracle: 10^6 deterministic pairs (`sampling::pow_sample_pairs`),
//! the C99 special-case grid, and exact midpoints (ties to even).

use samebits_math::sampling::{pow_sample_pairs, pow_special_pairs};
use samebits_math::{pow, pow_slice};

fn same(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

fn assert_matches(xs: &[f32], ys: &[f32]) {
    let mut out = vec![0.0f32; xs.len()];
    pow_slice(xs, ys, &mut out);
    let bad: Vec<String> = xs
        .iter()
        .zip(ys)
        .zip(&out)
        .filter(|&((&x, &y), &r)| !same(r, core_math::powf(x, y)) || !same(pow(x, y), r))
        .take(8)
        .map(|((&x, &y), &r)| {
            format!(
                "pow({x:e}, {y:e}) = {r:e}, core-math {:e}",
                core_math::powf(x, y)
            )
        })
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn pow_matches_core_math_on_a_million_pairs() {
    let (xs, ys) = pow_sample_pairs(1_000_000, 1);
    assert_matches(&xs, &ys);
}

#[test]
fn pow_special_cases_follow_c99() {
    let (xs, ys) = pow_special_pairs();
    assert_matches(&xs, &ys);
    assert_eq!(pow(f32::NAN, 0.0), 1.0);
    assert_eq!(pow(1.0, f32::NAN), 1.0);
    assert_eq!(pow(-1.0, f32::INFINITY), 1.0);
    assert_eq!(pow(-0.0, 3.0).to_bits(), (-0.0f32).to_bits());
    assert_eq!(pow(-0.0, -3.0), f32::NEG_INFINITY);
    assert_eq!(pow(-2.0, 0.5).to_bits(), 0x7fc0_0000);
    assert!(
        pow(f32::from_bits(0x7f80_0001), 0.0).is_nan(),
        "signaling NaN"
    );
    assert!(
        pow(1.0, f32::from_bits(0xff80_0001)).is_nan(),
        "signaling NaN"
    );
}

#[test]
fn pow_exact_midpoints_round_to_even() {
    // 4097^2 = 2^24 + 2^13 + 1 and 257^3 need 25 bits: exact ties between two floats.
    let xs = [
        4097.0f32,
        66049.0,
        2f32.powi(-75),
        2f32.powi(75),
        4097.0 * 0.25,
        257.0,
    ];
    let ys = [2.0f32, 1.5, 2.0, -2.0, 2.0, 3.0];
    assert_matches(&xs, &ys);
    assert_eq!(pow(2f32.powi(-75), 2.0), 0.0);
    assert_eq!(pow(4097.0, 2.0), 16_785_408.0);
}

#[test]
#[should_panic(expected = "length mismatch")]
fn pow_slice_lengths_must_match() {
    pow_slice(&[1.0], &[1.0, 2.0], &mut [0.0]);
}
