//! [`LlmError`]: what loading, running, generating and verifying can fail with.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error(transparent)]
    Gguf(#[from] samebits_gguf::Error),
    #[error(transparent)]
    Tokenizer(#[from] samebits_tokenizer::Error),
    #[error(transparent)]
    Op(#[from] samebits_ops::OpError),
    #[error(transparent)]
    Ir(#[from] samebits_ir::Error),
    #[error(transparent)]
    Runtime(#[from] samebits_runtime::RuntimeError),
    /// A model this crate cannot run (missing tensor, unsupported layout).
    #[error("{model}: {message}")]
    Model { model: String, message: String },
    /// A bad option value; the message names the option.
    #[error("{0}")]
    Usage(String),
    /// A receipt that cannot be read or used; the message says why.
    #[error("{}: {message}", path.display())]
    Receipt { path: PathBuf, message: String },
}

pub type Result<T, E = LlmError> = std::result::Result<T, E>;
