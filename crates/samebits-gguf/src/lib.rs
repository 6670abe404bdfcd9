//! GGUF model files for samebits: the container ([`GgufFile`]), its metadata ([`Metadata`]),
//! tensors as IR views or raw quantized blocks, and ggml dequantization ([`dequantize_row`]) with
//! the bit-exact formulas of `docs/gguf.md`.

mod error;
mod metadata;
mod quant;
mod reader;

pub use error::{Error, Result};
pub use metadata::{Metadata, MetadataValue};
pub use quant::{GgmlType, dequantize_row};
pub use reader::{GgufFile, QuantizedTensor, TensorData, TensorInfo};
