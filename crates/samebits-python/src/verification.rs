//! `verify`: re-runs a receipt of any kind with `samebits_bindings::verify` and returns its
//! report as a [`Verification`]: `match`, `differ` (with the first differing step or output)
//! or `unusable` (with why), as `samebits verify` exits 0, 1 or 2.

use crate::errors::{file_not_found, runtime_error};
use crate::options;
use pyo3::prelude::*;
use samebits_runtime::RuntimeError;
use std::path::PathBuf;

/// The outcome of re-running a receipt.
#[pyclass(frozen, get_all, module = "samebits._native")]
pub struct Verification {
    /// `"match"`, `"differ"` or `"unusable"`.
    status: &'static str,
    /// `"run"`, `"generation"` or `"embedding"`.
    kind: &'static str,
    /// One line: what matched, the first difference, or why the receipt is unusable.
    message: String,
    /// Generation receipts: the first step whose logits or token differ.
    step: Option<usize>,
    /// Generation receipts: the steps that matched before the first difference.
    steps_matched: Option<usize>,
    /// Run receipts: the first output whose hash differs (or is missing); embedding receipts:
    /// `"embeddings"` or `"text I"` (token ids).
    output: Option<String>,
    /// Run receipts: `(name, expected sha256, actual sha256 or None)` of every output.
    outputs: Vec<(String, String, Option<String>)>,
}

#[pymethods]
impl Verification {
    fn __bool__(&self) -> bool {
        self.status == "match"
    }

    fn __repr__(&self) -> String {
        format!(
            "Verification(status={:?}, kind={:?}, message={:?})",
            self.status, self.kind, self.message
        )
    }
}

/// Re-runs the receipt at `receipt_path` (see `samebits.verify`).
#[pyfunction]
#[pyo3(signature = (receipt_path, device="cpu"))]
pub fn verify(py: Python<'_>, receipt_path: PathBuf, device: &str) -> PyResult<Verification> {
    let device = options::device(device)?;
    let report = py
        .detach(|| samebits_bindings::verify(&receipt_path, device))
        .map_err(|e| {
            let message = format!("cannot read {}: {e}", receipt_path.display());
            match e.kind() {
                std::io::ErrorKind::NotFound => file_not_found(Some(&receipt_path), message),
                _ => runtime_error(RuntimeError::io(&receipt_path, e), None),
            }
        })?;
    Ok(Verification {
        status: report.status.name(),
        kind: report.kind,
        message: report.message,
        step: report.step,
        steps_matched: report.steps_matched,
        output: report.output,
        outputs: report.outputs,
    })
}
