//! `verify`: re-runs a receipt of any kind (run, generation, embedding; told apart as
//! `samebits verify` tells them apart) with the library's verification, and reports what that
//! command reports as a [`Verification`]: `match`, `differ` (with the first differing step or
//! output) or `unusable` (with why).

use crate::errors::{file_not_found, runtime_error};
use crate::options;
use pyo3::prelude::*;
use samebits_llm::embed as embedding_receipt;
use samebits_llm::receipt as generation_receipt;
use samebits_runtime::{Device, RuntimeError, receipt};
use std::path::{Path, PathBuf};

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

impl Verification {
    fn new(kind: &'static str, status: &'static str, message: String) -> Verification {
        Verification {
            status,
            kind,
            message,
            step: None,
            steps_matched: None,
            output: None,
            outputs: Vec::new(),
        }
    }

    fn unusable(kind: &'static str, path: &Path, error: impl std::fmt::Display) -> Verification {
        let message = format!("cannot verify {}: {error}", path.display());
        Verification::new(kind, "unusable", message)
    }
}

/// Re-runs the receipt at `receipt_path` (see `samebits.verify`).
#[pyfunction]
#[pyo3(signature = (receipt_path, device="cpu"))]
pub fn verify(py: Python<'_>, receipt_path: PathBuf, device: &str) -> PyResult<Verification> {
    let device = options::device(device)?;
    let text = std::fs::read_to_string(&receipt_path).map_err(|e| {
        let message = format!("cannot read {}: {e}", receipt_path.display());
        match e.kind() {
            std::io::ErrorKind::NotFound => file_not_found(Some(&receipt_path), message),
            _ => runtime_error(RuntimeError::io(&receipt_path, e), None),
        }
    })?;
    let path = receipt_path.as_path();
    Ok(py.detach(|| {
        if generation_receipt::is_generation_receipt(&text) {
            verify_generation(path, device)
        } else if embedding_receipt::is_embedding_receipt(&text) {
            verify_embedding(path)
        } else {
            verify_run(path, device)
        }
    }))
}

fn verify_run(path: &Path, device: Device) -> Verification {
    let checks = match receipt::verify_on(path, device) {
        Ok(v) => v.checks,
        Err(e) => return Verification::unusable("run", path, e),
    };
    let first = checks.iter().find(|c| !c.matches());
    let mut verification = match first {
        None => Verification::new(
            "run",
            "match",
            format!("verified: all {} outputs are bit-identical", checks.len()),
        ),
        Some(c) => {
            let got = c.actual.as_deref().unwrap_or("nothing (missing)");
            let message = format!(
                "output \"{}\": expected {}, got {got}; NOT verified: outputs differ from the \
                 receipt",
                c.name, c.expected
            );
            let mut differ = Verification::new("run", "differ", message);
            differ.output = Some(c.name.clone());
            differ
        }
    };
    verification.outputs = checks
        .into_iter()
        .map(|c| (c.name, c.expected, c.actual))
        .collect();
    verification
}

fn verify_generation(path: &Path, device: Device) -> Verification {
    let check = match generation_receipt::verify_on(path, device) {
        Ok(check) => check,
        Err(e) => return Verification::unusable("generation", path, e),
    };
    let mut verification = match check.first_mismatch {
        None => Verification::new(
            "generation",
            "match",
            format!(
                "verified: all {} generated tokens and their logits are bit-identical",
                check.steps_matched
            ),
        ),
        Some(m) => {
            let at = m.step.map(|s| format!("step {s}: ")).unwrap_or_default();
            let message = format!(
                "{at}{}; NOT verified: {} steps matched before the first difference",
                m.message, check.steps_matched
            );
            let mut differ = Verification::new("generation", "differ", message);
            differ.step = m.step;
            differ
        }
    };
    verification.steps_matched = Some(check.steps_matched);
    verification
}

fn verify_embedding(path: &Path) -> Verification {
    let check = match embedding_receipt::verify(path) {
        Ok(check) => check,
        Err(e) => return Verification::unusable("embedding", path, e),
    };
    if check.matches() {
        return Verification::new(
            "embedding",
            "match",
            "verified: the embeddings are bit-identical".into(),
        );
    }
    let (output, message) = match check.token_mismatches.first() {
        Some(i) => (
            format!("text {i}"),
            format!("text {i}: token ids differ from the receipt"),
        ),
        None => (
            "embeddings".to_string(),
            format!(
                "embeddings: expected {}, got {}",
                check.expected_sha256, check.sha256
            ),
        ),
    };
    let mut differ = Verification::new(
        "embedding",
        "differ",
        format!("{message}; NOT verified: the embeddings differ from the receipt"),
    );
    differ.output = Some(output);
    differ
}
