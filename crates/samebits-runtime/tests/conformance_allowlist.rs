//! The ONNX conformance allowlists (`conformance/<suite>.allowlist`, one case per line, written
//! by `samebits conformance --write-allowlist`): every listed case of ONNX 1.22's node,
//! pytorch-converted, pytorch-operator and simple suites must still pass in the reproducible
//! operation set. A regression fails CI.

use rayon::prelude::*;
use samebits_ops::OperationSet;
use samebits_runtime::conformance::run_case;
use samebits_testdata::{
    ONNX_NODE_TESTS, ONNX_PYTORCH_CONVERTED_TESTS, ONNX_PYTORCH_OPERATOR_TESTS, ONNX_SIMPLE_TESTS,
    cached,
};
use std::path::PathBuf;

/// Runs every case of `conformance/<list>` from the cached `suite` folder and fails naming each
/// one that no longer passes; the list must hold at least `min_cases` names (a truncated file
/// would pass vacuously).
fn every_allowlisted_case_passes(list: &str, suite: &str, min_cases: usize) {
    // Output buffers start as NaN, so a kernel that leaves an element unwritten fails here.
    samebits_ir::poison_taken_buffers();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("conformance").join(list)).unwrap();
    let Some(dir) = cached(suite) else {
        return;
    };
    let cases: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert!(
        cases.len() >= min_cases,
        "{list} unexpectedly short: {} cases",
        cases.len()
    );
    let failures: Vec<String> = cases
        .par_iter()
        .filter_map(|name| {
            let r = run_case(&dir.join(name), OperationSet::Reproducible);
            r.outcome.err().map(|e| format!("{name}: {e}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} cases of {list} regressed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_allowlisted_node_case_passes() {
    every_allowlisted_case_passes("node.allowlist", ONNX_NODE_TESTS, 1000);
}

#[test]
fn every_allowlisted_pytorch_converted_case_passes() {
    every_allowlisted_case_passes(
        "pytorch-converted.allowlist",
        ONNX_PYTORCH_CONVERTED_TESTS,
        70,
    );
}

#[test]
fn every_allowlisted_pytorch_operator_case_passes() {
    every_allowlisted_case_passes(
        "pytorch-operator.allowlist",
        ONNX_PYTORCH_OPERATOR_TESTS,
        30,
    );
}

#[test]
fn every_allowlisted_simple_case_passes() {
    every_allowlisted_case_passes("simple.allowlist", ONNX_SIMPLE_TESTS, 20);
}
