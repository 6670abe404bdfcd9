//! GGUF model files for samebits: the container ([`GgufFile`]), its metadata ([`Metadata`]),
//! tensors as IR views or raw quantized blocks (dequantized by samebits-ggml's one definition per
//! block format, `docs/gguf.md`), and the llama model configuration ([`ModelConfig`]). The
//! tokenizer and chat template stored in the metadata are read by samebits-tokenizer; the
//! quantized products are samebits-kernels' `quant` module.

mod config;
mod error;
mod metadata;
mod reader;

pub use config::{DecoderVariant, LocalLayers, ModelConfig};
pub use error::{Error, Result};
pub use metadata::{Metadata, MetadataValue};
pub use reader::{GgufFile, QuantizedTensor, TensorData, TensorInfo};
pub use samebits_ggml::GgmlType;
