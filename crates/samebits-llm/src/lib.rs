//! samebits LLM text generation on llama-family models (SmolLM2 and kin) from GGUF files or
//! Hugging Face checkpoint folders, and sentence embeddings with BERT encoders.
//!
//! - [`weights`]: the decoder's tensors as graph initializers, from a GGUF file or a checkpoint
//!   (quantized matrices stay raw blocks over the memory map).
//! - [`checkpoint`]: Hugging Face checkpoint folders (config.json, memory-mapped safetensors).
//! - [`hf`]: Llama / Mistral / Qwen2 checkpoints as the same decoder a GGUF file gives.
//! - [`embed`]: BERT sentence embeddings (mean pooling, optional L2 normalisation) as an ONNX-op
//!   graph, and their receipts.
//! - [`model`]: the decoder as a samebits IR graph of standard ONNX ops plus
//!   `samebits::MatMulGguf` / `samebits::GatherGguf`, compiled once into a [`samebits_ops::Plan`]
//!   with symbolic sequence and cache lengths; [`Llm::forward`] runs it over new tokens and a
//!   [`KvCache`].
//! - `batched`: [`Llm::forward_last_batch`], several sequences' new tokens in one pass, each
//!   sequence's logits the bits it gets alone (the server's continuous batching).
//! - [`sampling`]: greedy and temperature / top-k / top-p sampling with a counter-based RNG
//!   (docs/contract.md, section `sampling`).
//! - [`generate`]: prompt → tokens, prefill, decode, streaming text.
//! - [`receipt`]: generation receipts and their verification by one prefill pass.

mod batched;
pub mod checkpoint;
pub mod embed;
mod error;
pub mod generate;
pub mod hf;
pub mod model;
pub mod receipt;
pub mod sampling;
pub mod weights;

pub use embed::Embedder;
pub use error::{LlmError, Result};
pub use generate::{GenerateOptions, Generation, Sequence, chat_tokens, generate, prompt_tokens};
pub use model::{DecoderStage, KvCache, Layers, Llm, layer_bytes};
pub use sampling::SamplingOptions;
