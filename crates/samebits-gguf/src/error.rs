//! The error type of the GGUF crate. Every message names the file and the header field, metadata
//! key or tensor it is about, so that one line in a log says what is wrong where.

/// An error reading a GGUF file or dequantizing its tensors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{file}: {error}")]
    Io { file: String, error: std::io::Error },
    /// The bytes do not follow the GGUF format; `at` names the field, key or tensor.
    #[error("{file}: {at}: {message}")]
    Malformed {
        file: String,
        at: String,
        message: String,
    },
    #[error("{file}: metadata key `{key}` is missing")]
    MissingKey { file: String, key: String },
    #[error("{file}: metadata key `{key}` holds {found}, expected {expected}")]
    WrongType {
        file: String,
        key: String,
        expected: String,
        found: String,
    },
    #[error("{file}: tensor `{tensor}`: {message}")]
    Tensor {
        file: String,
        tensor: String,
        message: String,
    },
    /// A dequantization call got buffers that do not fit its ggml type.
    #[error(transparent)]
    Quant(#[from] samebits_ggml::QuantError),
    #[error(transparent)]
    Ir(#[from] samebits_ir::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
