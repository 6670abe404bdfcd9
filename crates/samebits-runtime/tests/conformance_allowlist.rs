//! The ONNX conformance allowlist (`conformance/node.allowlist`, one case per line, written by
//! `samebits conformance --write-allowlist`): every listed case of ONNX 1.22's node tests must
//! still pass in the reproducible operation set. A regression fails CI.

use rayon::prelude::*;
use samebits_ops::OperationSet;
use samebits_runtime::conformance::run_case;
use samebits_testdata::{ONNX_NODE_TESTS, cached};
use std::path::PathBuf;

#[test]
fn every_allowlisted_node_case_passes() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let list = std::fs::read_to_string(root.join("conformance/node.allowlist")).unwrap();
    let Some(dir) = cached(ONNX_NODE_TESTS) else {
        return;
    };
    let cases: Vec<&str> = list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert!(
        cases.len() > 1000,
        "allowlist unexpectedly short: {}",
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
        "{} allowlisted cases regressed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
