//! GGUF model files for samebits: the container ([`GgufFile`]), its metadata ([`Metadata`]),
//! tensors as IR views or raw quantized blocks, ggml dequantization ([`dequantize_row`]) and
//! canonical quantized dot products ([`dot_q_f32`], [`matvec_q_f32`]; over row panels packed
//! at load time, [`PanelMatrix`]) with the bit-exact formulas
//! of `docs/gguf.md`, the tokenizer ([`TextTokenizer`]) and chat template ([`ChatTemplate`])
//! stored in the metadata (the tokenizer also from a Hugging Face `tokenizer.json`), and the llama
//! model configuration ([`ModelConfig`]).

mod chat;
mod config;
mod dot;
mod error;
mod metadata;
mod panel;
mod quant;
mod reader;
mod tokenizer;

pub use chat::{ChatMessage, ChatTemplate};
pub use config::ModelConfig;
pub use dot::{dot_q_f32, matvec_q_f32};
pub use error::{Error, Result};
pub use metadata::{Metadata, MetadataValue};
pub use panel::{PANEL_ROWS, PanelMatrix, has_panel_layout, pack_panels, panel_bytes};
pub use quant::{GgmlType, dequantize_row};
pub use reader::{GgufFile, QuantizedTensor, TensorData, TensorInfo};
pub use tokenizer::{IncrementalDecoder, TextTokenizer};
