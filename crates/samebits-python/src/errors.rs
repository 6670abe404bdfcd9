//! Library errors as Python exceptions, each carrying the message the CLI prints for it:
//! `FileNotFoundError` when a named file is missing, `ValueError` when the caller's arguments or
//! inputs do not fit (unknown input name, wrong dtype or shape, an option out of range, a corrupt
//! file), [`ReproducibilityError`] when the options ask for a promise they cannot keep, and
//! `RuntimeError` for everything else the engine refuses.

use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyValueError};
use pyo3::{PyErr, create_exception};
use samebits_llm::LlmError;
use samebits_ops::OpError;
use samebits_runtime::RuntimeError;
use std::path::Path;

create_exception!(
    samebits,
    ReproducibilityError,
    PyRuntimeError,
    "The options ask for a reproducibility promise that samebits cannot keep with them (for \
     example `requires_reproducibility=True` with an operation set other than `reproducible`)."
);

/// `errno` of a missing file, as Python's `FileNotFoundError` carries it.
const ENOENT: i32 = 2;

/// A `FileNotFoundError` with the library's `message`, and its `filename` when known.
pub fn file_not_found(path: Option<&Path>, message: String) -> PyErr {
    match path {
        Some(path) => PyFileNotFoundError::new_err((ENOENT, message, path.display().to_string())),
        None => PyFileNotFoundError::new_err((ENOENT, message)),
    }
}

/// True when `error` or one of its sources is an I/O error saying a file does not exist.
fn is_missing_file(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound)
        {
            return true;
        }
        next = e.source();
    }
    false
}

/// A runtime error (compiling, running, writing a receipt) as a Python exception. `path` is the
/// file the call was given: when it does not exist the error is a `FileNotFoundError`.
pub fn runtime_error(error: RuntimeError, path: Option<&Path>) -> PyErr {
    let message = error.to_string();
    if is_missing_file(&error) {
        return match &error {
            RuntimeError::Io { path, .. } => file_not_found(Some(Path::new(path)), message),
            _ => file_not_found(path, message),
        };
    }
    if let Some(path) = path.filter(|p| !p.exists()) {
        return file_not_found(Some(path), message);
    }
    match error {
        RuntimeError::Usage(_) | RuntimeError::BadFile { .. } => PyValueError::new_err(message),
        // The plan's only errors not located at a node are about the values fed to it: their
        // count, and each input's dtype and shape against the model's declaration.
        RuntimeError::Op(OpError::Invalid(_)) => PyValueError::new_err(message),
        _ => PyRuntimeError::new_err(message),
    }
}

/// A language-model error (loading, generating, embedding) as a Python exception; `path` as in
/// [`runtime_error`].
pub fn llm_error(error: LlmError, path: Option<&Path>) -> PyErr {
    match error {
        LlmError::Runtime(error) => runtime_error(error, path),
        error => {
            let message = error.to_string();
            match path.filter(|p| !p.exists()) {
                Some(path) => file_not_found(Some(path), message),
                None if is_missing_file(&error) => file_not_found(None, message),
                None => match error {
                    LlmError::Usage(_) | LlmError::Receipt { .. } => PyValueError::new_err(message),
                    _ => PyRuntimeError::new_err(message),
                },
            }
        }
    }
}

/// A bad argument (`device`, `operation_set`, a count out of range) as a `ValueError`.
pub fn bad_argument(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}
