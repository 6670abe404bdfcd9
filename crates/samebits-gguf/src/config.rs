//! [`ModelConfig`]: the hyper-parameters of a llama-layout decoder, read from GGUF metadata
//! (`<arch>.*` keys of the GGUF specification) and the tensor list.
//!
//! `gemma3` and `gemma2` add what [`DecoderVariant`] lists (scaled embeddings, sandwich norms
//! whose scales the converter already wrote as `1 + w`, a GELU gate, local sliding-window layers;
//! Gemma 2's soft-capped attention scores and logits).
//!
//! Four `general.architecture` values share the llama layout: `llama`, `qwen2` (Q / K / V biases,
//! which the layout allows for every product), `qwen3` (an RMSNorm over each head's query and
//! key features, `attn_q_norm` / `attn_k_norm`, which the layout allows in every layer; a head
//! size `attention.key_length` other than width / heads) and `phi3` (Q, K and V fused into one
//! `attn_qkv` matrix, gate and up into one `ffn_up` of twice the width: the loader slices them;
//! `attention.sliding_window` caps the context, so that every position sees all earlier tokens
//! as the window would). They differ in the row order of the Q and K matrices: llama.cpp's
//! converter permutes a llama model's rows so that rotary embedding rotates adjacent features,
//! and leaves the others in Hugging Face's half-split order
//! ([`ModelConfig::qk_rows_half_split`]), which the loader brings into the adjacent order (only
//! for a rotary embedding over the whole head).
//!
//! Llama 3.1's rope scaling arrives as the tensor `rope_freqs.weight`: one divisor per rotary
//! pair ([`ModelConfig::rope_freq_divisors`]). A file holding a tensor the layout does not use (a
//! norm's bias, a layer past `block_count`), or naming a `rope.scaling.type` other than `none`,
//! is refused with the tensor or key named: ignoring it would give another model's output, not
//! an error.

use crate::{Error, GgufFile, Result};

/// Hyper-parameters of a llama-style decoder.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// `general.architecture` (`llama`).
    pub architecture: String,
    /// `<arch>.block_count`: number of transformer layers.
    pub block_count: usize,
    /// `<arch>.embedding_length`: model width.
    pub embedding_length: usize,
    /// `<arch>.feed_forward_length`: hidden width of the gated MLP.
    pub feed_forward_length: usize,
    /// `<arch>.attention.head_count`.
    pub head_count: usize,
    /// `<arch>.attention.head_count_kv`; equal to `head_count` when absent (no grouped-query).
    pub head_count_kv: usize,
    /// `<arch>.attention.key_length`, else `embedding_length / head_count`.
    pub head_dim: usize,
    /// `<arch>.rope.dimension_count`; `head_dim` when absent.
    pub rope_dimension_count: usize,
    /// `<arch>.rope.freq_base`.
    pub rope_freq_base: f32,
    /// Llama 3.1 rope scaling: pair `i`'s inverse frequency is divided by entry `i`
    /// (`rope_dimension_count / 2` entries, GGUF `rope_freqs.weight`), or `None`.
    pub rope_freq_divisors: Option<Vec<f32>>,
    /// `<arch>.attention.layer_norm_rms_epsilon`.
    pub rms_norm_eps: f32,
    /// `<arch>.context_length`: the trained context, capped at
    /// `<arch>.attention.sliding_window` when the model attends through a window.
    pub context_length: usize,
    /// `<arch>.vocab_size`, else the length of `tokenizer.ggml.tokens`.
    pub vocab_size: usize,
    /// True when the file has no `output.weight`: the output projection is `token_embd.weight`.
    pub tied_embeddings: bool,
    /// True when the Q / K rows (and biases) of each head are in Hugging Face's rotary order
    /// (feature `j` paired with `j + d/2`) rather than GGUF-llama's adjacent pairs (module docs).
    pub qk_rows_half_split: bool,
    /// What the family adds to the llama layer (Gemma 3), nothing for the others.
    pub variant: DecoderVariant,
}

/// The parts of a Gemma 3 decoder the llama layer lacks (all off by default).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DecoderVariant {
    /// The embedding rows are multiplied by this (`sqrt(width)` in f32).
    pub embedding_scale: Option<f32>,
    /// An RMSNorm of the attention output and of the feed-forward output before each residual
    /// add (`post_attention_norm`, `post_ffw_norm`).
    pub post_norms: bool,
    /// The feed-forward gate is GELU (tanh approximation) instead of SiLU.
    pub gelu_gate: bool,
    /// Attention scores are multiplied by this instead of `1 / sqrt(head_dim)`.
    pub attention_scale: Option<f32>,
    /// Local layers: every layer `i` with `(i + 1) % pattern != 0` attends through the sliding
    /// window (which caps the context) with its own rotary base and no rope scaling; the others
    /// are global.
    pub local_layers: Option<LocalLayers>,
    /// Gemma 2: attention scores become `cap * tanh(score / cap)` (ONNX Attention `softcap`).
    pub attention_softcap: Option<f32>,
    /// Gemma 2: logits become `tanh(logit / cap) * cap`.
    pub final_logit_softcap: Option<f32>,
}

/// Gemma 3's local (sliding-window) layers ([`DecoderVariant::local_layers`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocalLayers {
    pub pattern: usize,
    pub rope_freq_base: f32,
}

impl LocalLayers {
    /// Whether layer `i` is local.
    pub fn is_local(&self, i: usize) -> bool {
        !(i + 1).is_multiple_of(self.pattern)
    }
}

impl DecoderVariant {
    /// Gemma 3's decoder: embeddings times `sqrt(width)`, sandwich norms, a GELU gate, local
    /// layers (five of six) with rotary base 10000 (fixed by the architecture, as llama.cpp has
    /// it); attention scores times `attention_scale`, when not `1 / sqrt(head_dim)`.
    pub fn gemma3(width: usize, attention_scale: Option<f32>) -> DecoderVariant {
        DecoderVariant {
            embedding_scale: Some((width as f32).sqrt()),
            post_norms: true,
            gelu_gate: true,
            attention_scale,
            local_layers: Some(LocalLayers {
                pattern: 6,
                rope_freq_base: 10_000.0,
            }),
            attention_softcap: None,
            final_logit_softcap: None,
        }
    }

    /// Gemma 2's decoder: Gemma 3's parts without its head norms, every other layer local (the
    /// first one included) with the model's own rotary base, attention scores and logits
    /// soft-capped.
    pub fn gemma2(
        width: usize,
        attention_scale: Option<f32>,
        rope_freq_base: f32,
        attention_softcap: Option<f32>,
        final_logit_softcap: Option<f32>,
    ) -> DecoderVariant {
        DecoderVariant {
            local_layers: Some(LocalLayers {
                pattern: 2,
                rope_freq_base,
            }),
            attention_softcap,
            final_logit_softcap,
            ..DecoderVariant::gemma3(width, attention_scale)
        }
    }
}

/// Architectures whose metadata and tensors follow the llama layout, with whether their Q / K
/// rows are in the half-split order (module docs).
const LLAMA_LIKE: &[(&str, bool)] = &[
    ("llama", false),
    ("qwen2", true),
    ("qwen3", true),
    ("phi3", true),
    ("gemma3", true),
    ("gemma2", true),
];

/// The products of a layer (each a `.weight` matrix with an optional `.bias`).
const LAYER_PRODUCTS: &[&str] = &[
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
];

/// Whether the llama layout of `block_count` layers reads the tensor `name`.
fn layout_uses(name: &str, block_count: usize) -> bool {
    if matches!(
        name,
        "token_embd.weight"
            | "output_norm.weight"
            | "output.weight"
            | "output.bias"
            | "rope_freqs.weight"
    ) {
        return true;
    }
    let Some((layer, rest)) = name
        .strip_prefix("blk.")
        .and_then(|rest| rest.split_once('.'))
    else {
        return false;
    };
    // Layer numbers as the converter writes them: no sign, no leading zero.
    let in_range = layer
        .parse::<usize>()
        .is_ok_and(|i| i < block_count && i.to_string() == layer);
    let known = match rest.rsplit_once('.') {
        Some((part, "weight")) => {
            LAYER_PRODUCTS.contains(&part)
                || matches!(
                    part,
                    "attn_norm"
                        | "ffn_norm"
                        | "attn_q_norm"
                        | "attn_k_norm"
                        | "attn_qkv"
                        | "post_attention_norm"
                        | "post_ffw_norm"
                )
        }
        Some((part, "bias")) => LAYER_PRODUCTS.contains(&part),
        _ => false,
    };
    in_range && known
}

impl ModelConfig {
    /// Reads the configuration; errors name the missing or mistyped key.
    pub fn from_gguf(file: &GgufFile) -> Result<ModelConfig> {
        let meta = file.metadata();
        let architecture = meta.str("general.architecture")?.to_string();
        let Some(&(_, qk_rows_half_split)) = LLAMA_LIKE.iter().find(|(a, _)| *a == architecture)
        else {
            let known: Vec<&str> = LLAMA_LIKE.iter().map(|(a, _)| *a).collect();
            return Err(Error::Malformed {
                file: file.name().into(),
                at: "metadata key `general.architecture`".into(),
                message: format!(
                    "architecture `{architecture}` is not supported (only {})",
                    known.join(", ")
                ),
            });
        };
        let key = |k: &str| format!("{architecture}.{k}");
        let head_count = meta.usize(&key("attention.head_count"))?;
        let embedding_length = meta.usize(&key("embedding_length"))?;
        let bad = |k: &str, message: String| Error::Malformed {
            file: file.name().into(),
            at: format!("metadata key `{}`", key(k)),
            message,
        };
        if head_count == 0 {
            return Err(bad("attention.head_count", "no heads".into()));
        }
        let head_dim = match meta.get(&key("attention.key_length")) {
            Some(_) => {
                let key_length = meta.usize(&key("attention.key_length"))?;
                let value_length = match meta.get(&key("attention.value_length")) {
                    Some(_) => meta.usize(&key("attention.value_length"))?,
                    None => key_length,
                };
                if key_length == 0 || value_length != key_length {
                    return Err(bad(
                        "attention.key_length",
                        format!(
                            "keys of {key_length} and values of {value_length} features: \
                             expected one nonzero head size"
                        ),
                    ));
                }
                key_length
            }
            None if embedding_length.is_multiple_of(head_count) => embedding_length / head_count,
            None => {
                return Err(bad(
                    "attention.head_count",
                    format!("{head_count} heads do not divide the width {embedding_length}"),
                ));
            }
        };
        let head_count_kv = match meta.get(&key("attention.head_count_kv")) {
            Some(_) => meta.usize(&key("attention.head_count_kv"))?,
            None => head_count,
        };
        if head_count_kv == 0 || !head_count.is_multiple_of(head_count_kv) {
            return Err(bad(
                "attention.head_count_kv",
                format!("{head_count_kv} KV heads do not divide {head_count} query heads"),
            ));
        }
        // The head size is read from metadata: the Q projection's rows must be that many per
        // head (per Q head plus two per KV head for a fused QKV), which bounds it by the file
        // before anything is sized from it (rotary tables, caches).
        let q_rows = [
            ("blk.0.attn_q.weight", head_count),
            (
                "blk.0.attn_qkv.weight",
                head_count.saturating_add(head_count_kv.saturating_mul(2)),
            ),
        ]
        .into_iter()
        .find_map(|(name, per)| Some((name, file.tensor_info(name)?.dims.get(1).copied()?, per)));
        if let Some((name, rows, per)) = q_rows
            && Some(rows) != (per as u64).checked_mul(head_dim as u64)
        {
            return Err(Error::Malformed {
                file: file.name().into(),
                at: format!("tensor `{name}`"),
                message: format!(
                    "{rows} rows, but {per} heads of {head_dim} features need {}",
                    per.saturating_mul(head_dim)
                ),
            });
        }
        let rope_dimension_count = match meta.get(&key("rope.dimension_count")) {
            Some(_) => meta.usize(&key("rope.dimension_count"))?,
            None => head_dim,
        };
        if rope_dimension_count == 0
            || rope_dimension_count > head_dim
            || !rope_dimension_count.is_multiple_of(2)
        {
            return Err(bad(
                "rope.dimension_count",
                format!(
                    "{rope_dimension_count} rotary dimensions: expected an even count from 2 to \
                     the head size {head_dim}"
                ),
            ));
        }
        if qk_rows_half_split && rope_dimension_count != head_dim {
            return Err(bad(
                "rope.dimension_count",
                format!(
                    "{rope_dimension_count} rotary dimensions in heads of {head_dim}: a partial \
                     rotary embedding over half-split rows is not supported"
                ),
            ));
        }
        let vocab_size = match meta.get(&key("vocab_size")) {
            Some(_) => meta.usize(&key("vocab_size"))?,
            None => meta.str_array("tokenizer.ggml.tokens")?.len(),
        };
        if vocab_size == 0 {
            return Err(bad("vocab_size", "the vocabulary is empty".into()));
        }
        let block_count = meta.usize(&key("block_count"))?;
        if let Some(unused) = file
            .tensor_infos()
            .iter()
            .find(|t| !layout_uses(&t.name, block_count))
        {
            return Err(Error::Malformed {
                file: file.name().into(),
                at: format!("tensor `{}`", unused.name),
                message: format!(
                    "not part of the {architecture} layout samebits builds ({block_count} \
                     layers of norms, Q / K / V / output and gate / up / down products): the \
                     model needs a feature samebits lacks"
                ),
            });
        }
        let scaling = match meta.get(&key("rope.scaling.type")) {
            Some(_) => meta.str(&key("rope.scaling.type"))?,
            None => "none",
        };
        let linear_factor = match scaling {
            "none" => None,
            "linear" => {
                let factor = meta.f32(&key("rope.scaling.factor"))?;
                if !(factor.is_finite() && factor > 0.0) {
                    return Err(bad(
                        "rope.scaling.factor",
                        format!("{factor}: expected a positive factor"),
                    ));
                }
                Some(factor)
            }
            other => {
                return Err(bad(
                    "rope.scaling.type",
                    format!(
                        "rope scaling `{other}` is not supported (only none, linear, and llama \
                         3.1's rope_freqs.weight)"
                    ),
                ));
            }
        };
        let rope_freq_divisors = match file.tensor_info("rope_freqs.weight") {
            // Linear scaling divides every inverse frequency by the factor.
            None => linear_factor.map(|f| vec![f; rope_dimension_count / 2]),
            Some(_) if linear_factor.is_some() => {
                return Err(bad(
                    "rope.scaling.type",
                    "linear scaling and rope_freqs.weight together".into(),
                ));
            }
            Some(_) => {
                let t = file.tensor("rope_freqs.weight")?.to_f32()?;
                let divisors = t.as_slice::<f32>().map_err(|e| Error::Malformed {
                    file: file.name().into(),
                    at: "tensor `rope_freqs.weight`".into(),
                    message: e.to_string(),
                })?;
                if divisors.len() != rope_dimension_count / 2
                    || divisors.iter().any(|d| !d.is_finite() || *d <= 0.0)
                {
                    return Err(Error::Malformed {
                        file: file.name().into(),
                        at: "tensor `rope_freqs.weight`".into(),
                        message: format!(
                            "{} divisors: expected {} finite positive ones (one per rotary pair)",
                            divisors.len(),
                            rope_dimension_count / 2
                        ),
                    });
                }
                Some(divisors.to_vec())
            }
        };
        let rope_freq_base = meta.f32(&key("rope.freq_base"))?;
        let mut context_length = meta.usize(&key("context_length"))?;
        if meta.get(&key("attention.sliding_window")).is_some() {
            let window = meta.usize(&key("attention.sliding_window"))?;
            if window == 0 {
                return Err(bad("attention.sliding_window", "a window of 0".into()));
            }
            context_length = context_length.min(window);
        }
        Ok(ModelConfig {
            rope_freq_divisors,
            context_length,
            block_count,
            feed_forward_length: meta.usize(&key("feed_forward_length"))?,
            rope_freq_base,
            rms_norm_eps: meta.f32(&key("attention.layer_norm_rms_epsilon"))?,
            tied_embeddings: file.tensor_info("output.weight").is_none(),
            qk_rows_half_split,
            variant: match architecture.as_str() {
                // llama.cpp's scale for Gemma 2 and 3 (their 27B aside): 1 / sqrt(head_dim).
                "gemma3" => DecoderVariant::gemma3(embedding_length, None),
                "gemma2" => {
                    let cap = |k: &str| -> Result<Option<f32>> {
                        match meta.get(&key(k)) {
                            None => Ok(None),
                            Some(_) => {
                                let cap = meta.f32(&key(k))?;
                                match cap.is_finite() && cap >= 0.0 {
                                    true => Ok((cap > 0.0).then_some(cap)),
                                    false => Err(bad(k, format!("{cap}: expected a cap >= 0"))),
                                }
                            }
                        }
                    };
                    DecoderVariant::gemma2(
                        embedding_length,
                        None,
                        rope_freq_base,
                        cap("attn_logit_softcapping")?,
                        cap("final_logit_softcapping")?,
                    )
                }
                _ => DecoderVariant::default(),
            },
            architecture,
            embedding_length,
            head_count,
            head_count_kv,
            head_dim,
            rope_dimension_count,
            vocab_size,
        })
    }
}
