//! Loads every ONNX node conformance case (`onnx/backend/test/data/node/*`, 1,765 cases from the
//! onnx 1.22.0 wheel that scripts/setup.sh unpacks): each model and each of its
//! `test_data_set_0/*.pb` files must load, except the cases listed in
//! `node_suite_unsupported.txt`, which must fail with a clear unsupported error (a default-domain
//! opset below 7).

use samebits_onnx::{OnnxError, load_model, read_value_pb};
use samebits_testdata::{ONNX_NODE_TESTS, cached};
use std::path::{Path, PathBuf};

/// The cases expected to fail, one name per line (`#` starts a comment).
fn known_unsupported() -> Vec<&'static str> {
    include_str!("node_suite_unsupported.txt")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// Loads one case: its model, then every test-data file against the declared types.
fn load_case(case: &Path) -> Result<usize, OnnxError> {
    let model = load_model(&case.join("model.onnx"))?;
    let inputs: Vec<_> = model.graph.runtime_inputs().collect();
    let mut files = 0;
    let data_dir = case.join("test_data_set_0");
    let mut entries: Vec<_> = std::fs::read_dir(&data_dir)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    for path in entries {
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let (declared, index) = if let Some(k) = stem.strip_prefix("input_") {
            (&inputs, k)
        } else if let Some(k) = stem.strip_prefix("output_") {
            (&model.graph.outputs.iter().collect(), k)
        } else {
            continue;
        };
        let index: usize = index.parse().expect("test-data file index");
        let ty = declared.get(index).and_then(|v| v.ty.as_ref());
        read_value_pb(&path, ty)?;
        files += 1;
    }
    Ok(files)
}

#[test]
fn every_node_case_loads_except_known_unsupported() {
    let Some(dir) = cached(ONNX_NODE_TESTS) else {
        return;
    };
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    cases.sort();
    assert_eq!(
        cases.len(),
        1765,
        "the onnx 1.22.0 wheel holds 1,765 node cases"
    );
    let (mut loaded, mut files) = (0, 0);
    let mut unexpected = Vec::new();
    let mut failed_as_expected = Vec::new();
    let known = known_unsupported();
    for case in &cases {
        let name = case.file_name().unwrap().to_str().unwrap();
        match (load_case(case), known.contains(&name)) {
            (Ok(n), false) => {
                loaded += 1;
                files += n;
            }
            (Err(e), true) if e.is_unsupported() => failed_as_expected.push(name),
            (Err(e), _) => unexpected.push(format!("{name}: {e}")),
            (Ok(_), true) => unexpected.push(format!("{name}: loads but is listed as unsupported")),
        }
    }
    eprintln!(
        "node suite: {loaded} of {} models loaded with {files} test-data files; {} known \
         unsupported",
        cases.len(),
        failed_as_expected.len()
    );
    assert!(
        unexpected.is_empty(),
        "{} unexpected results:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
    assert_eq!(failed_as_expected.len(), known.len());
}
