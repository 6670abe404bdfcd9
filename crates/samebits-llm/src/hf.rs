//! Hugging Face decoder checkpoints of the Llama family (`model_type` `llama`, `mistral`,
//! `qwen2`, `qwen3`, `phi3`; SmolLM2 is `llama`; Phi-3's fused `qkv_proj` and `gate_up_proj` are
//! sliced into the separate matrices at load): `config.json`, safetensors weights (F32, F16 or BF16, possibly
//! sharded), `tokenizer.json` and, when present, `tokenizer_config.json` (special tokens, chat
//! template). [`load_decoder`] turns such a folder into the same [`Llm`] graph a GGUF file gives.
//!
//! Hyper-parameters, from `config.json`: `hidden_size`, `intermediate_size`,
//! `num_hidden_layers`, `num_attention_heads`, `num_key_value_heads` (default: the head count),
//! `rms_norm_eps`, `rope_theta` (default 10000), `max_position_embeddings`, `vocab_size`,
//! `tie_word_embeddings` (default false), `head_dim` (default `hidden_size /
//! num_attention_heads`; Qwen3's differs). Qwen3's per-head `q_norm` / `k_norm` scales are read
//! when the checkpoint has them; `rope_scaling` of type `llama3` (Llama 3.1 / 3.2) becomes the
//! per-pair divisors GGUF files carry as `rope_freqs.weight`. Refused with a message naming the
//! field: another `rope_scaling` type, a `hidden_act` other than `silu`, `mlp_bias`, `partial_rotary_factor` other
//! than 1, an odd `head_dim`, `use_sliding_window`. Mistral's and Phi-3's `sliding_window` caps the
//! context at the window, so that every position the model runs sees all earlier tokens, as a
//! sliding window of that size does.
//!
//! Weights stay in the memory-mapped safetensors files as the weight ops' F32 / F16 / BF16 blocks
//! (converted to f32 exactly per element when read, docs/contract.md section `llm-weights`).
//! Biases (Qwen2's Q/K/V, Llama's `attention_bias`) and norm scales are widened to f32 at load.
//!
//! Q/K row order, the one place it is handled: Hugging Face stores `q_proj` / `k_proj` (and their
//! biases) in the order of its `rotate_half` rotary embedding, which pairs feature `j` with
//! `j + d/2` within each head of `d` features; GGUF files store them permuted so that the pairs
//! are adjacent, `(2j, 2j + 1)`, and the graph applies RotaryEmbedding with `interleaved = 1`.
//! [`adjacent_rotary_rows`] permutes the HF rows into GGUF's order at load (a copy of those two
//! matrices per layer), so both sources give the same graph, the same bits, and each attention
//! score is the same canonical dot product over the head's features in the same order.

use crate::checkpoint::{Checkpoint, read_json};
use crate::model::Layers;
use crate::model::LoadSource;
use crate::weights::{MatrixWeight, WeightSource, fused_rows, rotary_heads};
use crate::{Llm, LlmError, Result};
use samebits_gguf::{DecoderVariant, LocalLayers, ModelConfig};
use samebits_ir::Tensor;
use samebits_ops::OperationSet;
use samebits_runtime::Device;
use samebits_tokenizer::TextTokenizer;
use std::path::Path;

/// `model_type` values whose checkpoints follow the Llama layout.
const FAMILIES: &[&str] = &[
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "phi3",
    "gemma2",
    "gemma3_text",
];

/// Loads the decoder checkpoint in `dir` and compiles its graph for `operation_set`.
pub fn load_decoder(dir: &Path, operation_set: OperationSet, device: Device) -> Result<Llm> {
    load_decoder_layers(dir, operation_set, Layers::All(device))
}

/// [`load_decoder`] building only the stages `layers` asks for.
pub fn load_decoder_layers(dir: &Path, operation_set: OperationSet, layers: Layers) -> Result<Llm> {
    let checkpoint = Checkpoint::open(dir)?;
    let config = decoder_config(&checkpoint)?;
    let tokenizer_config_path = dir.join("tokenizer_config.json");
    let tokenizer_config = match tokenizer_config_path.exists() {
        true => read_json(&tokenizer_config_path)?,
        false => serde_json::Value::Null,
    };
    let tokenizer =
        TextTokenizer::from_tokenizer_json(&dir.join("tokenizer.json"), &tokenizer_config)?;
    let chat_template = tokenizer_config["chat_template"].as_str().map(String::from);
    let weights = HfWeights {
        checkpoint: &checkpoint,
        config: &config,
    };
    let source = LoadSource {
        path: dir,
        config: config.clone(),
        tokenizer,
        chat_template,
    };
    Llm::build_layers(source, &weights, operation_set, layers)
}

/// The [`ModelConfig`] of a decoder checkpoint's `config.json` (module doc).
pub fn decoder_config(ck: &Checkpoint) -> Result<ModelConfig> {
    let bad =
        |key: &str, message: String| ck.error(format!("config.json: field `{key}`: {message}"));
    let architecture = ck.str_field("model_type")?.to_string();
    if !FAMILIES.contains(&architecture.as_str()) {
        return Err(bad(
            "model_type",
            format!(
                "`{architecture}` is not supported (only {})",
                FAMILIES.join(", ")
            ),
        ));
    }
    let gemma2 = architecture == "gemma2";
    let gemma = gemma2 || architecture == "gemma3_text";
    // Gemma names its activation `hidden_activation`.
    let (act_key, wanted) = match gemma {
        true => ("hidden_activation", "gelu_pytorch_tanh"),
        false => ("hidden_act", "silu"),
    };
    let hidden_act = match ck.field(act_key).filter(|v| !v.is_null()) {
        Some(_) => ck.str_field(act_key)?,
        None => wanted,
    };
    if hidden_act != wanted {
        return Err(bad(
            act_key,
            format!("`{hidden_act}` is not supported (only {wanted})"),
        ));
    }
    // Soft-capping: Gemma 2's (a positive cap; 0 or null for none), nobody else's.
    let mut caps = [None, None];
    for (key, cap) in ["attn_logit_softcapping", "final_logit_softcapping"]
        .into_iter()
        .zip(&mut caps)
    {
        let Some(value) = ck.field(key).filter(|v| !v.is_null()) else {
            continue;
        };
        match value.as_f64() {
            Some(c) if gemma2 && c.is_finite() && c >= 0.0 => *cap = (c > 0.0).then_some(c as f32),
            _ => {
                return Err(bad(
                    key,
                    format!("{value} is not supported (Gemma 2's positive caps only)"),
                ));
            }
        }
    }
    let flag = |key: &str| ck.field(key).and_then(|v| v.as_bool()).unwrap_or(false);
    for key in ["mlp_bias", "use_sliding_window"] {
        if flag(key) {
            return Err(bad(key, "true is not supported".into()));
        }
    }
    if let Some(factor) = ck.field("partial_rotary_factor")
        && factor.as_f64() != Some(1.0)
    {
        return Err(bad(
            "partial_rotary_factor",
            format!("{factor} is not supported (only 1)"),
        ));
    }
    let embedding_length = ck.usize_field("hidden_size")?;
    let head_count = ck.usize_field("num_attention_heads")?;
    let head_dim = match ck.field("head_dim").filter(|v| !v.is_null()) {
        Some(_) => ck.usize_field("head_dim")?,
        None if head_count > 0 && embedding_length.is_multiple_of(head_count) => {
            embedding_length / head_count
        }
        None => {
            return Err(bad(
                "num_attention_heads",
                format!("{head_count} heads do not divide hidden_size {embedding_length}"),
            ));
        }
    };
    if head_dim == 0 || !head_dim.is_multiple_of(2) {
        return Err(bad(
            "head_dim",
            format!("head size {head_dim}: expected an even, nonzero count"),
        ));
    }
    let rope_freq_base = match ck.field("rope_theta") {
        Some(_) => ck.f32_field("rope_theta")?,
        None => 10000.0,
    };
    let rope_freq_divisors = match ck.field("rope_scaling").filter(|v| !v.is_null()) {
        None => None,
        Some(scaling) => Some(
            rope_divisors(scaling, rope_freq_base, head_dim)
                .map_err(|m| bad("rope_scaling", format!("{scaling}: {m}")))?,
        ),
    };
    let variant = match gemma {
        false => DecoderVariant::default(),
        true => {
            // Gemma 2 alternates local and global layers; Gemma 3 has one global in six.
            let pattern = match ck.field("sliding_window_pattern") {
                Some(_) if !gemma2 => ck.usize_field("sliding_window_pattern")?,
                _ if gemma2 => 2,
                _ => 6,
            };
            if pattern == 0 {
                return Err(bad("sliding_window_pattern", "a pattern of 0".into()));
            }
            if let Some(types) = ck.field("layer_types").and_then(|v| v.as_array()) {
                let expected = |i: usize| match (i + 1).is_multiple_of(pattern) {
                    true => "full_attention",
                    false => "sliding_attention",
                };
                if let Some(i) = (0..types.len()).find(|&i| types[i].as_str() != Some(expected(i)))
                {
                    return Err(bad(
                        "layer_types",
                        format!(
                            "layer {i} is not {} (one global layer in {pattern})",
                            expected(i)
                        ),
                    ));
                }
            }
            let scalar = match ck.field("query_pre_attn_scalar") {
                Some(_) => ck.f32_field("query_pre_attn_scalar")?,
                None => head_dim as f32,
            };
            let scale =
                (scalar != head_dim as f32).then(|| (1.0 / f64::from(scalar).sqrt()) as f32);
            let mut v = match gemma2 {
                true => DecoderVariant::gemma2(
                    embedding_length,
                    scale,
                    rope_freq_base,
                    caps[0],
                    caps[1],
                ),
                false => DecoderVariant::gemma3(embedding_length, scale),
            };
            let local_base = match ck.field("rope_local_base_freq") {
                Some(_) => ck.f32_field("rope_local_base_freq")?,
                None if gemma2 => rope_freq_base,
                None => 10_000.0,
            };
            v.local_layers = Some(LocalLayers {
                pattern,
                rope_freq_base: local_base,
            });
            v
        }
    };
    let head_count_kv = match ck.field("num_key_value_heads") {
        Some(_) => ck.usize_field("num_key_value_heads")?,
        None => head_count,
    };
    if head_count_kv == 0 || !head_count.is_multiple_of(head_count_kv) {
        return Err(bad(
            "num_key_value_heads",
            format!("{head_count_kv} KV heads do not divide {head_count} query heads"),
        ));
    }
    // `head_dim` comes from config.json: the Q projection must hold that many rows per head (per
    // Q head plus two per KV head when fused), which bounds it by the checkpoint before rotary
    // tables and caches are sized from it.
    let q_rows = [
        ("model.layers.0.self_attn.q_proj.weight", head_count),
        (
            "model.layers.0.self_attn.qkv_proj.weight",
            head_count.saturating_add(head_count_kv.saturating_mul(2)),
        ),
    ]
    .into_iter()
    .find(|(name, _)| ck.contains(name));
    if let Some((name, per)) = q_rows {
        let rows = ck.shape(name)?.first().copied();
        if rows != per.checked_mul(head_dim) {
            return Err(bad(
                "head_dim",
                format!(
                    "{head_dim} features per head, but {name} has {rows:?} rows for {per} heads"
                ),
            ));
        }
    }
    let mut context_length = ck.usize_field("max_position_embeddings")?;
    if matches!(
        architecture.as_str(),
        "mistral" | "phi3" | "gemma2" | "gemma3_text"
    ) && ck.field("sliding_window").is_some_and(|w| !w.is_null())
    {
        context_length = context_length.min(ck.usize_field("sliding_window")?);
    }
    Ok(ModelConfig {
        block_count: ck.usize_field("num_hidden_layers")?,
        feed_forward_length: ck.usize_field("intermediate_size")?,
        rope_freq_base,
        rope_freq_divisors,
        rms_norm_eps: ck.f32_field("rms_norm_eps")?,
        vocab_size: ck.usize_field("vocab_size")?,
        // Gemma ties its embeddings unless the config says otherwise.
        tied_embeddings: ck
            .field("tie_word_embeddings")
            .and_then(|v| v.as_bool())
            .unwrap_or(gemma),
        // Checkpoints keep Hugging Face's order; `HfWeights` permutes Q / K as it reads them.
        qk_rows_half_split: true,
        variant,
        architecture,
        embedding_length,
        head_count,
        head_count_kv,
        head_dim,
        rope_dimension_count: head_dim,
        context_length,
    })
}

/// A checkpoint's tensors under GGUF names.
struct HfWeights<'a> {
    checkpoint: &'a Checkpoint,
    config: &'a ModelConfig,
}

impl HfWeights<'_> {
    /// The heads whose rows the tensor `gguf_name` holds in rotary order ([`rotary_heads`]).
    fn rotary_heads(&self, gguf_name: &str) -> Option<usize> {
        rotary_heads(gguf_name.split('.').nth(2)?, self.config)
    }

    /// For a checkpoint that fuses projections (Phi-3): the fused tensor holding the matrix
    /// `gguf_name` and its rows `(first, count)` ([`fused_rows`]), else `None`.
    fn fused_slice(&self, gguf_name: &str) -> Option<(String, usize, usize)> {
        let mut parts = gguf_name.split('.');
        let (Some("blk"), Some(layer), Some(part)) = (parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let (fused, first, count) = fused_rows(part, self.config)?;
        let module = match fused {
            "attn_qkv" => "self_attn.qkv_proj",
            _ => "mlp.gate_up_proj",
        };
        let fused = format!("model.layers.{layer}.{module}.weight");
        self.checkpoint
            .contains(&fused)
            .then_some((fused, first, count))
    }

    fn hf_name(&self, gguf_name: &str) -> Result<String> {
        hf_tensor_name(gguf_name, self.config.variant.post_norms).ok_or_else(|| {
            self.checkpoint
                .error(format!("no checkpoint tensor for {gguf_name}"))
        })
    }
}

impl WeightSource for HfWeights<'_> {
    /// The matrix `name`; Phi-3's `attn_q` / `attn_k` / `attn_v` are row ranges of its fused
    /// `qkv_proj`, `ffn_gate` / `ffn_up` the halves of `gate_up_proj` (a copy of those rows).
    fn matrix(&self, name: &str) -> Result<MatrixWeight> {
        let (hf, range) = match self.fused_slice(name) {
            Some((fused, first, count)) => (fused, Some((first, count))),
            None => (self.hf_name(name)?, None),
        };
        let shape = self.checkpoint.shape(&hf)?.to_vec();
        let [all_rows, cols] = shape[..] else {
            return Err(self.checkpoint.error(format!(
                "tensor {hf} has shape {shape:?}, expected a matrix"
            )));
        };
        let (ggml_type, mut bytes) = self.checkpoint.raw(&hf)?;
        let row_bytes = bytes.bytes()?.len() / all_rows.max(1);
        let rows = match range {
            None => all_rows,
            Some((first, count)) => {
                let slice = bytes
                    .bytes()?
                    .get(first * row_bytes..(first + count) * row_bytes)
                    .ok_or_else(|| {
                        self.checkpoint.error(format!(
                            "tensor {hf} has {all_rows} rows, {name} needs rows {first}..{}",
                            first + count
                        ))
                    })?
                    .to_vec();
                bytes = Tensor::from_vec(vec![slice.len()], slice)?;
                count
            }
        };
        let blocks = match self.rotary_heads(name) {
            None => bytes,
            Some(heads) => {
                let permuted = adjacent_rotary_rows(bytes.bytes()?, heads, rows, row_bytes)
                    .map_err(|m| self.checkpoint.error(format!("tensor {hf}: {m}")))?;
                Tensor::from_vec(vec![permuted.len()], permuted)?
            }
        };
        Ok(MatrixWeight {
            blocks,
            ggml_type,
            rows,
            cols,
        })
    }

    fn optional_vector(&self, name: &str) -> Result<Option<Tensor>> {
        let hf = self.hf_name(name)?;
        if !self.checkpoint.contains(&hf) {
            return Ok(None);
        }
        let mut v = self.checkpoint.f32(&hf)?;
        // Gemma's RMSNorm multiplies by `1 + w` (one f32 rounding, as GGUF converters store it).
        if self.config.variant.post_norms && name.ends_with("norm.weight") {
            let shifted: Vec<f32> = v.as_slice::<f32>()?.iter().map(|w| 1.0 + w).collect();
            v = Tensor::from_vec(v.shape().to_vec(), shifted)?;
        }
        let Some(heads) = self.rotary_heads(name) else {
            return Ok(Some(v));
        };
        let permuted = adjacent_rotary_rows(v.bytes()?, heads, v.numel(), 4)
            .map_err(|m| self.checkpoint.error(format!("tensor {hf}: {m}")))?;
        let values: Vec<f32> = permuted
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Ok(Some(Tensor::from_vec(v.shape().to_vec(), values)?))
    }

    fn missing(&self, name: &str) -> LlmError {
        let hf = hf_tensor_name(name, self.config.variant.post_norms)
            .unwrap_or_else(|| name.to_string());
        self.checkpoint.error(format!(
            "tensor {hf} is missing (not a Llama-layout checkpoint?)"
        ))
    }
}

/// The per-pair divisors of a `rope_scaling`: Llama 3.1's (`rope_type` / `type` `llama3`), as
/// llama.cpp's converter writes them into `rope_freqs.weight`: for the inverse frequency
/// `f = base^(-2i/d)` of pair `i` and its wavelength `w = 2π / f`, with `old` the
/// `original_max_position_embeddings`, 1 when `w < old / high_freq_factor`, `factor` when
/// `w > old / low_freq_factor`, else `1 / ((1 - s) / factor + s)` with
/// `s = (old / w - low_freq_factor) / (high_freq_factor - low_freq_factor)`; in float64, each
/// rounded once to f32 (transformers' `_compute_llama3_parameters` gives `f / divisor`).
/// A `rope_scaling` of type `linear` divides every pair's inverse frequency by `factor`.
fn rope_divisors(
    scaling: &serde_json::Value,
    base: f32,
    head_dim: usize,
) -> std::result::Result<Vec<f32>, String> {
    let kind = scaling["rope_type"]
        .as_str()
        .or_else(|| scaling["type"].as_str())
        .unwrap_or("");
    let number = |key: &str| {
        scaling[key]
            .as_f64()
            .filter(|v| v.is_finite() && *v > 0.0)
            .ok_or_else(|| format!("`{key}` must be a positive number"))
    };
    match kind {
        "llama3" => {}
        "linear" => return Ok(vec![number("factor")? as f32; head_dim / 2]),
        _ => {
            return Err(format!(
                "rope type `{kind}` is not supported (only llama3, linear)"
            ));
        }
    }
    let (factor, low, high) = (
        number("factor")?,
        number("low_freq_factor")?,
        number("high_freq_factor")?,
    );
    let old = number("original_max_position_embeddings")?;
    if high <= low {
        return Err("high_freq_factor must exceed low_freq_factor".into());
    }
    Ok((0..head_dim / 2)
        .map(|i| {
            let f = f64::from(base).powf(-((2 * i) as f64) / head_dim as f64);
            let wavelen = 2.0 * std::f64::consts::PI / f;
            let divisor = if wavelen < old / high {
                1.0
            } else if wavelen > old / low {
                factor
            } else {
                let s = (old / wavelen - low) / (high - low);
                1.0 / ((1.0 - s) / factor + s)
            };
            divisor as f32
        })
        .collect())
}

/// The Hugging Face name of the Llama-layout tensor GGUF calls `gguf_name` (with `sandwich`,
/// Gemma's: its `post_attention_layernorm` is the norm of the attention output, and the
/// feed-forward input's norm is `pre_feedforward_layernorm`).
fn hf_tensor_name(gguf_name: &str, sandwich: bool) -> Option<String> {
    let (module, kind) = gguf_name.rsplit_once('.')?;
    let global = match module {
        "token_embd" => Some("model.embed_tokens"),
        "output_norm" => Some("model.norm"),
        "output" => Some("lm_head"),
        _ => None,
    };
    if let Some(module) = global {
        return Some(format!("{module}.{kind}"));
    }
    let rest = gguf_name.strip_prefix("blk.")?;
    let (layer, rest) = rest.split_once('.')?;
    let (part, kind) = rest.split_once('.')?;
    let module = match part {
        "attn_norm" => "input_layernorm",
        "ffn_norm" if sandwich => "pre_feedforward_layernorm",
        "post_attention_norm" if sandwich => "post_attention_layernorm",
        "post_ffw_norm" if sandwich => "post_feedforward_layernorm",
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "attn_q_norm" => "self_attn.q_norm",
        "attn_k_norm" => "self_attn.k_norm",
        "ffn_norm" => "post_attention_layernorm",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        _ => return None,
    };
    Some(format!("model.layers.{layer}.{module}.{kind}"))
}

/// Rows of a Q or K projection (`rows = heads * d`, each `row_bytes` long) from Hugging Face's
/// rotary order into GGUF's: within each head, output row `2j + s` is input row `s * d/2 + j`
/// (`s` = 0, 1; `j` < d/2), the permutation llama.cpp's converter applies.
pub fn adjacent_rotary_rows(
    bytes: &[u8],
    heads: usize,
    rows: usize,
    row_bytes: usize,
) -> std::result::Result<Vec<u8>, String> {
    if heads == 0 || !rows.is_multiple_of(2 * heads) || bytes.len() != rows * row_bytes {
        return Err(format!(
            "{rows} rows of {row_bytes} bytes ({} bytes) do not split into {heads} heads of an \
             even size",
            bytes.len()
        ));
    }
    let d = rows / heads;
    let mut out = Vec::with_capacity(bytes.len());
    for r in 0..rows {
        let row = half_split_row(r, d);
        out.extend_from_slice(&bytes[row * row_bytes..(row + 1) * row_bytes]);
    }
    Ok(out)
}

/// The half-split row that adjacent-order row `r` of heads of `d` rows comes from
/// ([`adjacent_rotary_rows`]): within the head, row `2j + s` is row `s * d/2 + j`.
pub fn half_split_row(r: usize, d: usize) -> usize {
    let (head, i) = (r / d, r % d);
    head * d + (i % 2) * (d / 2) + i / 2
}
