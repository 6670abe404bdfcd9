//! [`RuntimeError`]: everything the runtime can refuse, each message one line naming the file,
//! node, op or input concerned.

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A file exists but its contents are not what they should be (corrupt .npy, bad receipt).
    #[error("{path}: {message}")]
    BadFile { path: String, message: String },
    /// The model could not be imported.
    #[error(transparent)]
    Import(#[from] samebits_onnx::OnnxError),
    /// A compiler pass failed.
    #[error(transparent)]
    Pass(#[from] samebits_passes::PassError),
    /// Building or running an op failed; the message names the node.
    #[error(transparent)]
    Op(#[from] samebits_ops::OpError),
    /// The GPU could not be opened (or this build has no CUDA) or a device operation failed.
    #[error(transparent)]
    Cuda(crate::cuda::CudaError),
    /// The caller's request does not fit the model (unknown input name, missing input, ...).
    #[error("{0}")]
    Usage(String),
}

impl RuntimeError {
    pub fn io(path: &std::path::Path, source: std::io::Error) -> RuntimeError {
        RuntimeError::Io {
            path: path.display().to_string(),
            source,
        }
    }

    pub fn bad_file(path: &std::path::Path, message: impl Into<String>) -> RuntimeError {
        RuntimeError::BadFile {
            path: path.display().to_string(),
            message: message.into(),
        }
    }
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;
