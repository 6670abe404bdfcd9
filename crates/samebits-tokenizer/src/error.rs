//! The error type of the tokenizer crate: a vocabulary or chat template that cannot be built or
//! used, or metadata that cannot be read.

/// An error building or using a tokenizer or a chat template.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("chat template: {0}")]
    ChatTemplate(String),
    /// The GGUF metadata holding the vocabulary or the template could not be read.
    #[error(transparent)]
    Gguf(#[from] samebits_gguf::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
