//! [`verify`]: re-runs a receipt of any kind (run, generation, embedding; told apart as `samebits
//! verify` tells them apart) with the library's verification, and reports what that command
//! reports as one [`Verification`].

use samebits_llm::embed as embedding_receipt;
use samebits_llm::receipt as generation_receipt;
use samebits_runtime::{Device, receipt};
use std::path::Path;

/// How a verification ended, as `samebits verify` exits 0, 1 or 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Match,
    Differ,
    /// The receipt, the model or an input is corrupt, missing or has another hash.
    Unusable,
}

impl Status {
    /// `"match"`, `"differ"` or `"unusable"`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Match => "match",
            Status::Differ => "differ",
            Status::Unusable => "unusable",
        }
    }
}

/// The outcome of re-running a receipt.
#[derive(Clone, Debug, PartialEq)]
pub struct Verification {
    pub status: Status,
    /// `"run"`, `"generation"` or `"embedding"`.
    pub kind: &'static str,
    /// One line: what matched, the first difference, or why the receipt is unusable.
    pub message: String,
    /// Generation receipts: the first step whose logits or token differ.
    pub step: Option<usize>,
    /// Generation receipts: the steps that matched before the first difference.
    pub steps_matched: Option<usize>,
    /// Run receipts: the first output whose hash differs (or is missing); embedding receipts:
    /// `"embeddings"` or `"text I"` (token ids).
    pub output: Option<String>,
    /// Run receipts: `(name, expected sha256, actual sha256 if computed)` of every output.
    pub outputs: Vec<(String, String, Option<String>)>,
}

impl Verification {
    fn new(kind: &'static str, status: Status, message: String) -> Verification {
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
        Verification::new(kind, Status::Unusable, message)
    }
}

/// Re-runs the receipt at `path` on `device` (embedding receipts on the CPU). `Err` only when
/// the receipt file cannot be read; everything after that is in the report.
pub fn verify(path: &Path, device: Device) -> std::io::Result<Verification> {
    let text = std::fs::read_to_string(path)?;
    Ok(if generation_receipt::is_generation_receipt(&text) {
        verify_generation(path, device)
    } else if embedding_receipt::is_embedding_receipt(&text) {
        verify_embedding(path)
    } else {
        verify_run(path, device)
    })
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
            Status::Match,
            format!("verified: all {} outputs are bit-identical", checks.len()),
        ),
        Some(c) => {
            let got = c.actual.as_deref().unwrap_or("nothing (missing)");
            let message = format!(
                "output \"{}\": expected {}, got {got}; NOT verified: outputs differ from the \
                 receipt",
                c.name, c.expected
            );
            let mut differ = Verification::new("run", Status::Differ, message);
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
            Status::Match,
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
            let mut differ = Verification::new("generation", Status::Differ, message);
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
            Status::Match,
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
        Status::Differ,
        format!("{message}; NOT verified: the embeddings differ from the receipt"),
    );
    differ.output = Some(output);
    differ
}
