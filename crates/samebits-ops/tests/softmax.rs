//! Softmax family and the log-sum-exp reductions: the contract formulas evaluated by hand with
//! samebits-math's exp and log, opset axis semantics, batch/thread invariance of a row, errors.
mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};

fn run_opset(op: &str, opset: i64, x: Tensor, attrs: &[(&str, Attribute)]) -> Vec<f32> {
    let out = run_node_opset(op, opset, &[Some(Value::from(x))], attrs, 1).unwrap();
    out[0]
        .as_tensor()
        .unwrap()
        .as_slice::<f32>()
        .unwrap()
        .to_vec()
}

/// Contract section `softmax`, written out for one row.
fn softmax_by_hand(x: &[f32]) -> Vec<f32> {
    let m = x.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    let e: Vec<f32> = x.iter().map(|&v| samebits_math::exp(v - m)).collect();
    let s = samebits_kernels::canonical_sum(&e);
    e.iter().map(|&v| v / s).collect()
}

#[test]
fn softmax_and_log_softmax_follow_the_contract_formula() {
    let x: Vec<f32> = (0..100).map(|i| (i as f32 * 0.37).sin() * 4.0).collect();
    let y = run_opset("Softmax", 13, f32s(&[1, 100], &x), &[]);
    assert_eq!(y, softmax_by_hand(&x));
    let m = x.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    let e: Vec<f32> = x.iter().map(|&v| samebits_math::exp(v - m)).collect();
    let log_s = samebits_math::log(samebits_kernels::canonical_sum(&e));
    let expect: Vec<f32> = x.iter().map(|&v| (v - m) - log_s).collect();
    assert_eq!(
        run_opset("LogSoftmax", 13, f32s(&[1, 100], &x), &[]),
        expect
    );
}

#[test]
fn axis_semantics_before_and_from_opset_13() {
    let x: Vec<f32> = (0..8).map(|i| i as f32 * 0.5).collect();
    let axis1 = [("axis", Attribute::Int(1))];
    // Opset 11: rows are x[n, :, :] flattened (4 elements each).
    let old = run_opset("Softmax", 11, f32s(&[2, 2, 2], &x), &axis1);
    assert_eq!(&old[..4], &softmax_by_hand(&x[..4])[..]);
    // Opset 13: along axis 1 only: pairs (x[n, 0, k], x[n, 1, k]).
    let new = run_opset("Softmax", 13, f32s(&[2, 2, 2], &x), &axis1);
    let pair = softmax_by_hand(&[x[0], x[2]]);
    assert_eq!((new[0], new[2]), (pair[0], pair[1]));
}

#[test]
fn hardmax_marks_the_first_maximum() {
    let y = run_opset(
        "Hardmax",
        13,
        f32s(&[2, 3], &[1., 3., 3., 0., f32::NAN, 2.]),
        &[],
    );
    assert_eq!(y, vec![0., 1., 0., 0., 1., 0.]);
}

#[test]
fn softmax_row_is_independent_of_batch_and_threads() {
    let len = 257;
    let data: Vec<f32> = (0..64 * len)
        .map(|i| ((i * 31 % 97) as f32 - 48.0) * 0.1)
        .collect();
    let run = |rows: usize| {
        run_opset("Softmax", 13, f32s(&[rows, len], &data[..rows * len]), &[])[..len].to_vec()
    };
    assert_eq!(run(1), run(64));
    let pool = |n| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
    };
    assert_eq!(pool(1).install(|| run(64)), pool(2).install(|| run(64)));
}

#[test]
fn log_sum_exp_subtracts_the_max_and_handles_infinities() {
    let lse = |x: &[f32]| run_opset("ReduceLogSumExp", 18, f32s(&[x.len()], x), &[])[0];
    // Without the max subtracted, exp(1000) would overflow.
    assert_eq!(lse(&[1000., 1000.]), samebits_math::log(2.0) + 1000.0);
    assert_eq!(lse(&[f32::INFINITY, 0.]), f32::INFINITY);
    assert_eq!(lse(&[f32::NEG_INFINITY; 2]), f32::NEG_INFINITY);
    let ls = run_opset("ReduceLogSum", 18, f32s(&[2], &[1., 2.]), &[])[0];
    assert_eq!(ls, samebits_math::log(3.0));
}

#[test]
fn bad_axis_is_named() {
    let e = run1(
        "Softmax",
        &[f32s(&[2, 2], &[0.; 4])],
        &[("axis", Attribute::Int(2))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("axis"), "{e}");
    let e = run1(
        "Softmax",
        &[Tensor::from_vec(vec![2], vec![1i32, 2]).unwrap()],
        &[],
    )
    .unwrap_err();
    assert!(e.is_unsupported(), "{e}");
}
