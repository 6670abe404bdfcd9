//! The error type of the IR: every message names the tensor, node or value it is about.

/// An IR-level error. Messages are complete sentences fragments meant for a one-line report.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Invalid(String),
    #[error("tensor of dtype {actual} read as {requested}")]
    DTypeMismatch { actual: String, requested: String },
    #[error("io error on {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Shorthand for an [`Error::Invalid`] built with `format!`.
#[macro_export]
macro_rules! invalid {
    ($($arg:tt)*) => { $crate::Error::Invalid(format!($($arg)*)) };
}
