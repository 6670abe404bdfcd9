//! [`ModelConfig`]: the hyper-parameters of a llama-architecture model, read from GGUF metadata
//! (`<arch>.*` keys of the GGUF specification) and the tensor list.

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
    /// `embedding_length / head_count`.
    pub head_dim: usize,
    /// `<arch>.rope.dimension_count`; `head_dim` when absent.
    pub rope_dimension_count: usize,
    /// `<arch>.rope.freq_base`.
    pub rope_freq_base: f32,
    /// `<arch>.attention.layer_norm_rms_epsilon`.
    pub rms_norm_eps: f32,
    /// `<arch>.context_length`: the trained context.
    pub context_length: usize,
    /// `<arch>.vocab_size`, else the length of `tokenizer.ggml.tokens`.
    pub vocab_size: usize,
    /// True when the file has no `output.weight`: the output projection is `token_embd.weight`.
    pub tied_embeddings: bool,
}

/// Architectures whose metadata and tensors follow the llama layout.
const LLAMA_LIKE: &[&str] = &["llama"];

impl ModelConfig {
    /// Reads the configuration; errors name the missing or mistyped key.
    pub fn from_gguf(file: &GgufFile) -> Result<ModelConfig> {
        let meta = file.metadata();
        let architecture = meta.str("general.architecture")?.to_string();
        if !LLAMA_LIKE.contains(&architecture.as_str()) {
            return Err(Error::Malformed {
                file: file.name().into(),
                at: "metadata key `general.architecture`".into(),
                message: format!("architecture `{architecture}` is not supported (only llama)"),
            });
        }
        let key = |k: &str| format!("{architecture}.{k}");
        let head_count = meta.usize(&key("attention.head_count"))?;
        let embedding_length = meta.usize(&key("embedding_length"))?;
        let bad = |k: &str, message: String| Error::Malformed {
            file: file.name().into(),
            at: format!("metadata key `{}`", key(k)),
            message,
        };
        if head_count == 0 || !embedding_length.is_multiple_of(head_count) {
            return Err(bad(
                "attention.head_count",
                format!("{head_count} heads do not divide the width {embedding_length}"),
            ));
        }
        let head_dim = embedding_length / head_count;
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
        let vocab_size = match meta.get(&key("vocab_size")) {
            Some(_) => meta.usize(&key("vocab_size"))?,
            None => meta.str_array("tokenizer.ggml.tokens")?.len(),
        };
        if vocab_size == 0 {
            return Err(bad("vocab_size", "the vocabulary is empty".into()));
        }
        Ok(ModelConfig {
            block_count: meta.usize(&key("block_count"))?,
            feed_forward_length: meta.usize(&key("feed_forward_length"))?,
            rope_freq_base: meta.f32(&key("rope.freq_base"))?,
            rms_norm_eps: meta.f32(&key("attention.layer_norm_rms_epsilon"))?,
            context_length: meta.usize(&key("context_length"))?,
            tied_embeddings: file.tensor_info("output.weight").is_none(),
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
