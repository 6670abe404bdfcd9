//! A model's text side for samebits: the tokenizer ([`TextTokenizer`], from GGUF metadata or a
//! Hugging Face `tokenizer.json`), streaming decode ([`IncrementalDecoder`]) and the chat template
//! ([`ChatTemplate`]) stored in the metadata. The GGUF file itself is read by samebits-gguf.

mod chat;
mod error;
mod tokenizer;

pub use chat::{ChatMessage, ChatTemplate};
pub use error::{Error, Result};
pub use tokenizer::{IncrementalDecoder, TextTokenizer, parse_tokenizer_json};
