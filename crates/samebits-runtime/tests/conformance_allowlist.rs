//! The ONNX conformance allowlist (`conformance/node.allowlist`, one case per line, written by
//! `samebits conformance --write-allowlist`): every listed case of ONNX 1.22's node tests must
//! still pass in the reproducible operation set. A regression fails CI.

use rayon::prelude::*;
use samebits_ops::OperationSet;
use samebits_runtime::conformance::run_case;
use std::path::PathBuf;

#[test]
fn every_allowlisted_node_case_passes() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let list = std::fs::read_to_string(root.join("conformance/node.allowlist")).unwrap();
    let cache = std::env::var_os("SAMEBITS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/samebits"));
    let dir = cache.join("onnx-1.22.0/onnx/backend/test/data/node");
    if !dir.is_dir() {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr().lock(),
            "SKIPPED: ONNX node test data not found (run scripts/setup.sh)"
        );
        return;
    }
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
