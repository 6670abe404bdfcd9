//! A Loop whose scan output grows without end is stopped when the output's running size passes
//! `SAMEBITS_MAX_TENSOR_BYTES`, not after every iteration has been kept (docs/security.md,
//! "Sizes"). Its own test binary: it lowers the process-wide limit to 1 MiB before anything
//! reads it, so the case needs megabytes, not the default 16 GiB.

mod common;
use common::*;
use samebits_ir::Tensor;

#[test]
fn loop_scan_outputs_are_bounded_as_they_grow() {
    // SAFETY: the only test in this binary, run before any thread reads the environment.
    unsafe { std::env::set_var("SAMEBITS_MAX_TENSOR_BYTES", (1u64 << 20).to_string()) };
    // Body: cond stays true, v_out = v_in + 1 is carried and scanned. Each element is 64 KiB
    // (16,384 f32), so the 1 MiB limit is passed at the 17th iteration of 2^30.
    let result = run_node_in_scope(
        "Loop",
        21,
        &[
            Some(i64s(&[], &[1 << 30]).into()),
            Some(Tensor::from_bools(vec![], vec![true]).unwrap().into()),
            Some(f32s(&[1 << 14], &vec![0.0; 1 << 14]).into()),
        ],
        &[("one", f32s(&[1], &[1.0]).into())],
        &[("body", endless_loop_body())],
        2,
    );
    let message = result.expect_err("the Loop ran to its end").to_string();
    assert!(
        message.contains("scan output 0 would exceed 1048576 bytes after 17 iterations"),
        "{message}"
    );
}
