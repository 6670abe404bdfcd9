//! Generation receipts: the record of one `samebits generate`, enough for anyone to re-run it and
//! check every generated token and the bits of every step's logits.
//!
//! JSON with the format version, engine, operation set, model (path relative to the receipt and
//! [`model_sha256`]: a GGUF file's sha256, or a checkpoint folder's), prompt, chat flag, options, the prompt's and the generated token ids, the sha256 of
//! each step's logits (the f32 row that chose the step's token, little-endian bytes, NaNs as the
//! canonical quiet NaN) and their
//! chain `h_i = sha256(h_{i-1} || sha256(logits_i))` from `h_{-1}` = 32 zero bytes (raw 32-byte
//! digests concatenated; the receipt writes hex). [`verify`] recomputes all positions in ONE
//! prefill over prompt + generated tokens (so it also checks that prefill and decode agree bit
//! for bit), then checks each step's hash and that its token follows from its logits.

use crate::checkpoint::model_sha256;
use crate::sampling::{SamplingOptions, sample};
use crate::{GenerateOptions, Generation, Llm, LlmError, Result, chat_tokens, prompt_tokens};
use samebits_ir::DType;
use samebits_ops::OperationSet;
use samebits_runtime::Device;
use samebits_runtime::hashing::{canonical_nan_bytes, hex};
use samebits_runtime::receipt::{FileRecord, portable_path};
use samebits_tokenizer::ChatMessage;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

pub const FORMAT: &str = "samebits-generation-receipt/1";

/// The sha256 of each step's logits and their running chain.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogitsChain {
    /// Hex sha256 of each step's logits, in step order.
    pub steps: Vec<String>,
    chain: [u8; 32],
}

impl LogitsChain {
    /// Adds one step's logits.
    pub fn push(&mut self, logits: &[f32]) {
        let bytes: Vec<u8> = logits.iter().flat_map(|v| v.to_le_bytes()).collect();
        let step: [u8; 32] = Sha256::digest(canonical_nan_bytes(DType::F32, &bytes)).into();
        let mut h = Sha256::new();
        h.update(self.chain);
        h.update(step);
        self.chain = h.finalize().into();
        self.steps.push(hex(&step));
    }

    /// Hex of the last chain value (`h_{-1}`, zeros, when empty).
    pub fn digest(&self) -> String {
        hex(&self.chain)
    }
}

/// The options a generation ran with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReceiptOptions {
    pub max_tokens: usize,
    pub temperature: f32,
    pub top_k: usize,
    pub top_p: f32,
    pub seed: u64,
    pub operation_set: OperationSet,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GenerationReceipt {
    pub format: String,
    pub engine: String,
    pub device: String,
    pub model: FileRecord,
    pub prompt: String,
    pub chat: bool,
    /// A conversation (`samebits serve`'s chat requests): when present the prompt is the chat
    /// template's rendering of these messages with the assistant's turn opened, and `prompt` is
    /// empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<ChatMessage>>,
    pub options: ReceiptOptions,
    pub prompt_tokens: Vec<u32>,
    pub tokens: Vec<u32>,
    pub step_logits_sha256: Vec<String>,
    pub logits_digest: String,
    /// Pipeline stages the generation ran in (`--n-partitions`); the bits do not depend on it.
    #[serde(default = "one_partition")]
    pub n_partitions: usize,
}

fn one_partition() -> usize {
    1
}

impl GenerationReceipt {
    /// The receipt of `generation`; `receipt_path` is where it will be written (the model path is
    /// stored relative to it).
    pub fn new(
        llm: &Llm,
        prompt: &str,
        options: &GenerateOptions,
        generation: &Generation,
        receipt_path: &Path,
    ) -> Result<GenerationReceipt> {
        let model = FileRecord {
            path: portable_path(&llm.path, receipt_dir(receipt_path)),
            sha256: model_sha256(&llm.path)?,
        };
        Ok(GenerationReceipt::with_model(
            llm, model, prompt, options, generation,
        ))
    }

    /// The receipt of `generation` with the model recorded as `model` (a server hashes its
    /// model once, not per request).
    pub fn with_model(
        llm: &Llm,
        model: FileRecord,
        prompt: &str,
        options: &GenerateOptions,
        generation: &Generation,
    ) -> GenerationReceipt {
        let s = &options.sampling;
        GenerationReceipt {
            format: FORMAT.into(),
            engine: samebits_runtime::ENGINE.into(),
            device: llm.device_description(),
            model,
            prompt: prompt.into(),
            chat: options.chat,
            messages: None,
            options: ReceiptOptions {
                max_tokens: options.max_tokens,
                temperature: s.temperature,
                top_k: s.top_k,
                top_p: s.top_p,
                seed: s.seed,
                operation_set: llm.operation_set,
            },
            prompt_tokens: generation.prompt_tokens.clone(),
            tokens: generation.tokens.clone(),
            step_logits_sha256: generation.logits.steps.clone(),
            logits_digest: generation.logits.digest(),
            n_partitions: 1,
        }
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).expect("receipt serialises");
        std::fs::write(path, text + "\n").map_err(|e| unusable(path, format!("cannot write: {e}")))
    }

    pub fn read(path: &Path) -> Result<GenerationReceipt> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| unusable(path, format!("cannot read: {e}")))?;
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| unusable(path, format!("not JSON: {e}")))?;
        let receipt: GenerationReceipt = serde_json::from_value(unwrap_response(value))
            .map_err(|e| unusable(path, format!("not a samebits generation receipt: {e}")))?;
        if receipt.format != FORMAT {
            return Err(unusable(
                path,
                format!("receipt format {:?} is not {FORMAT:?}", receipt.format),
            ));
        }
        if receipt.step_logits_sha256.len() != receipt.tokens.len() {
            return Err(unusable(
                path,
                format!(
                    "{} logits hashes for {} tokens",
                    receipt.step_logits_sha256.len(),
                    receipt.tokens.len()
                ),
            ));
        }
        Ok(receipt)
    }

    fn sampling(&self) -> SamplingOptions {
        SamplingOptions {
            temperature: self.options.temperature,
            top_k: self.options.top_k,
            top_p: self.options.top_p,
            seed: self.options.seed,
        }
    }
}

/// True when the JSON text is a generation receipt (as opposed to a run receipt), or a
/// `samebits serve` response that carries one.
pub fn is_generation_receipt(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .map(unwrap_response)
        .and_then(|v| v.get("format")?.as_str().map(|f| f == FORMAT))
        .unwrap_or(false)
}

/// The key under which `samebits serve` puts a response's receipt.
pub const RESPONSE_RECEIPT_KEY: &str = "samebits_receipt";

/// A server response saved whole stands for the receipt it carries.
fn unwrap_response(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(mut map) if map.contains_key(RESPONSE_RECEIPT_KEY) => map
            .remove(RESPONSE_RECEIPT_KEY)
            .expect("the key is present"),
        other => other,
    }
}

fn receipt_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

fn unusable(path: &Path, message: String) -> LlmError {
    LlmError::Receipt {
        path: path.to_path_buf(),
        message,
    }
}

/// The first disagreement between a receipt and the re-run.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// The generation step (`None` for the prompt's tokens or the final digest).
    pub step: Option<usize>,
    pub message: String,
}

/// The outcome of a completed verification.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerationCheck {
    /// Steps whose logits hash and token matched, in order, before any mismatch.
    pub steps_matched: usize,
    pub first_mismatch: Option<Mismatch>,
}

/// Re-runs the receipt at `path` on the CPU: one prefill over prompt + generated tokens, then per
/// step the logits hash and the token sampled from them. `Err` means the receipt or model is
/// unusable (missing, corrupt, another sha256); `Ok` with a mismatch means the bits differ.
pub fn verify(path: &Path) -> Result<GenerationCheck> {
    verify_on(path, Device::Cpu)
}

/// [`verify`] on `device`; the bits are compared whatever device made the receipt.
pub fn verify_on(path: &Path, device: Device) -> Result<GenerationCheck> {
    verify_model_on(path, None, device)
}

/// [`verify_on`] with the model read from `model` instead of the receipt's path (a receipt
/// made on another machine); its sha256 must still be the receipt's.
pub fn verify_model_on(
    path: &Path,
    model: Option<&Path>,
    device: Device,
) -> Result<GenerationCheck> {
    let (receipt, model_path) = read_checked(path, model)?;
    let llm = Llm::load_on(&model_path, receipt.options.operation_set, device)?;
    check(&receipt, &llm, &mut |sequence| {
        llm.forward(sequence, &mut llm.new_cache())
    })
}

/// The receipt at `path` and its model's path (`model`, or the receipt's own, relative to the
/// receipt's folder), after checking the model's sha256.
pub fn read_checked(path: &Path, model: Option<&Path>) -> Result<(GenerationReceipt, PathBuf)> {
    let receipt = GenerationReceipt::read(path)?;
    let model_path: PathBuf = match model {
        Some(model) => model.to_path_buf(),
        None => receipt_dir(path).join(&receipt.model.path),
    };
    let actual = model_sha256(&model_path)?;
    if actual != receipt.model.sha256 {
        return Err(unusable(
            &model_path,
            format!(
                "model sha256 is {actual}, the receipt records {}",
                receipt.model.sha256
            ),
        ));
    }
    Ok((receipt, model_path))
}

/// Checks `receipt` against `llm`'s tokenizer and the logits `forward` computes: every row of
/// a token sequence run from an empty cache (one prefill, however `forward` runs it).
pub fn check(
    receipt: &GenerationReceipt,
    llm: &Llm,
    forward: &mut dyn FnMut(&[u32]) -> Result<Vec<f32>>,
) -> Result<GenerationCheck> {
    let mismatch = |step: Option<usize>, message: String| GenerationCheck {
        steps_matched: step.unwrap_or(0),
        first_mismatch: Some(Mismatch { step, message }),
    };
    let prompt = match &receipt.messages {
        Some(messages) => chat_tokens(llm, messages)?,
        None => prompt_tokens(llm, &receipt.prompt, receipt.chat)?,
    };
    if prompt != receipt.prompt_tokens {
        return Ok(mismatch(
            None,
            format!(
                "the prompt tokenizes to {prompt:?}, the receipt records {:?}",
                receipt.prompt_tokens
            ),
        ));
    }
    let n = receipt.tokens.len();
    let mut chain = LogitsChain::default();
    if n > 0 {
        let mut sequence = prompt.clone();
        sequence.extend_from_slice(&receipt.tokens[..n - 1]);
        let logits = forward(&sequence)?;
        let vocab = llm.vocab_size();
        let sampling = receipt.sampling();
        let eos = llm.tokenizer.eos_id();
        for (step, &token) in receipt.tokens.iter().enumerate() {
            let row = &logits[(prompt.len() - 1 + step) * vocab..][..vocab];
            chain.push(row);
            let (expected, got) = (&receipt.step_logits_sha256[step], &chain.steps[step]);
            if expected != got {
                return Ok(mismatch(
                    Some(step),
                    format!("logits sha256 is {got}, the receipt records {expected}"),
                ));
            }
            let sampled = sample(row, &sampling, step as u64);
            if sampled != token {
                return Ok(mismatch(
                    Some(step),
                    format!("the logits choose token {sampled}, the receipt records {token}"),
                ));
            }
            if Some(token) == eos && step + 1 < n {
                return Ok(mismatch(
                    Some(step),
                    "generation continues past the end-of-sequence token".into(),
                ));
            }
        }
    }
    if chain.digest() != receipt.logits_digest {
        return Ok(GenerationCheck {
            steps_matched: n,
            first_mismatch: Some(Mismatch {
                step: None,
                message: format!(
                    "the logits chain digest is {}, the receipt records {}",
                    chain.digest(),
                    receipt.logits_digest
                ),
            }),
        });
    }
    Ok(GenerationCheck {
        steps_matched: n,
        first_mismatch: None,
    })
}
