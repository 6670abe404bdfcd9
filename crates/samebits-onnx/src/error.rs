//! [`OnnxError`]: every way an import can fail. A message starts with the file, then where in it
//! the problem lies (graph, node, attribute, initializer), then what is wrong:
//! `model.onnx: initializer "w": external data location "../x.bin" leaves the model folder`.

use std::fmt;

/// Where in a file a problem lies, outermost first: `node If "if0": attribute "then_branch": `.
/// Displays as its parts, each followed by `": "`, so an empty location prints nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location(pub Vec<String>);

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.0 {
            write!(f, "{part}: ")?;
        }
        Ok(())
    }
}

/// What is wrong with an external-data reference.
#[derive(Debug, thiserror::Error)]
pub enum ExternalDataProblem {
    #[error("is an absolute path")]
    Absolute,
    #[error("leaves the model folder")]
    LeavesFolder,
    /// Resolves outside the folder through a link, or to a device or FIFO.
    #[error("{0}")]
    Refused(String),
    #[error("cannot be resolved: the model was given as bytes without a folder")]
    NoModelFolder,
    #[error("names a file that cannot be opened ({path}: {source})")]
    Missing {
        path: String,
        source: std::io::Error,
    },
    #[error("names a file that cannot be memory-mapped ({path}: {source})")]
    Unmappable {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "asks for bytes {offset}..{offset}+{length}, past the end of {path} ({file_len} bytes)"
    )]
    PastEnd {
        path: String,
        offset: u64,
        length: u64,
        file_len: u64,
    },
}

/// An ONNX import error. `file` is the model or test-data file (or a label such as
/// `<model bytes>`); `at` says where in it.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{file}: truncated or malformed protobuf (failed to decode {message}: {source})")]
    Malformed {
        file: String,
        message: &'static str,
        source: prost::DecodeError,
    },
    #[error("{file}: {at}unsupported data type {type_name} (ONNX data type {code})")]
    UnsupportedDataType {
        file: String,
        at: Location,
        type_name: &'static str,
        code: i32,
    },
    #[error("{file}: {at}unsupported: {feature}")]
    Unsupported {
        file: String,
        at: Location,
        feature: String,
    },
    #[error("{file}: {at}external data location \"{location}\" {problem}")]
    ExternalData {
        file: String,
        at: Location,
        location: String,
        problem: ExternalDataProblem,
    },
    #[error("{file}: {at}{reason}")]
    Invalid {
        file: String,
        at: Location,
        reason: String,
    },
}

impl OnnxError {
    /// A malformed-content error; the file and location are filled in on the way out.
    pub(crate) fn invalid(reason: impl Into<String>) -> OnnxError {
        OnnxError::Invalid {
            file: String::new(),
            at: Location::default(),
            reason: reason.into(),
        }
    }

    /// A well-formed model using something this importer does not handle.
    pub(crate) fn unsupported(feature: impl Into<String>) -> OnnxError {
        OnnxError::Unsupported {
            file: String::new(),
            at: Location::default(),
            feature: feature.into(),
        }
    }

    pub(crate) fn external(location: &str, problem: ExternalDataProblem) -> OnnxError {
        OnnxError::ExternalData {
            file: String::new(),
            at: Location::default(),
            location: location.to_string(),
            problem,
        }
    }

    pub(crate) fn malformed(file: &str, message: &'static str, source: prost::DecodeError) -> Self {
        OnnxError::Malformed {
            file: file.to_string(),
            message,
            source,
        }
    }

    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> OnnxError {
        OnnxError::Io {
            path: path.display().to_string(),
            source,
        }
    }

    /// Prepends an enclosing place (`graph "main"`, `node Conv "c1"`) to the location.
    pub(crate) fn within(mut self, outer: impl Into<String>) -> OnnxError {
        if let Some(at) = self.location_mut() {
            at.0.insert(0, outer.into());
        }
        self
    }

    /// Names the file the error is about, unless an inner step already named one.
    pub(crate) fn in_file(mut self, name: &str) -> OnnxError {
        let file = match &mut self {
            OnnxError::Io { .. } => return self,
            OnnxError::Malformed { file, .. }
            | OnnxError::UnsupportedDataType { file, .. }
            | OnnxError::Unsupported { file, .. }
            | OnnxError::ExternalData { file, .. }
            | OnnxError::Invalid { file, .. } => file,
        };
        if file.is_empty() {
            *file = name.to_string();
        }
        self
    }

    fn location_mut(&mut self) -> Option<&mut Location> {
        match self {
            OnnxError::Io { .. } | OnnxError::Malformed { .. } => None,
            OnnxError::UnsupportedDataType { at, .. }
            | OnnxError::Unsupported { at, .. }
            | OnnxError::ExternalData { at, .. }
            | OnnxError::Invalid { at, .. } => Some(at),
        }
    }

    /// True for a well-formed input that uses a data type or feature not handled yet (as opposed
    /// to a broken or unsafe one).
    pub fn is_unsupported(&self) -> bool {
        matches!(
            self,
            OnnxError::UnsupportedDataType { .. } | OnnxError::Unsupported { .. }
        )
    }
}

impl From<samebits_ir::Error> for OnnxError {
    fn from(e: samebits_ir::Error) -> OnnxError {
        OnnxError::invalid(e.to_string())
    }
}

pub type Result<T, E = OnnxError> = std::result::Result<T, E>;
