//! samebits LLM text generation on llama-family GGUF models (SmolLM2 and kin).
//!
//! - [`weights`]: GGUF tensors as graph initializers (quantized matrices stay raw blocks over the
//!   memory map).
//! - [`model`]: the decoder as a samebits IR graph of standard ONNX ops plus
//!   `samebits::MatMulGguf` / `samebits::GatherGguf`, compiled once into a [`samebits_ops::Plan`]
//!   with symbolic sequence and cache lengths; [`Llm::forward`] runs it over new tokens and a
//!   [`KvCache`].
//! - [`sampling`]: greedy and temperature / top-k / top-p sampling with a counter-based RNG
//!   (docs/contract.md, section `sampling`).
//! - [`generate`]: prompt → tokens, prefill, decode, streaming text.
//! - [`receipt`]: generation receipts and their verification by one prefill pass.

mod error;
pub mod generate;
pub mod model;
pub mod receipt;
pub mod sampling;
pub mod weights;

pub use error::{LlmError, Result};
pub use generate::{GenerateOptions, Generation, generate, prompt_tokens};
pub use model::{KvCache, Llm};
pub use sampling::SamplingOptions;
