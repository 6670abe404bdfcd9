//! `embed`: sentence embeddings with `samebits_llm::Embedder`, returned as `.npy` bytes (and
//! optionally the embedding receipt `samebits embed --receipt` writes).

use crate::errors::{bad_argument, llm_error};
use crate::options;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use samebits_llm::Embedder;
use samebits_llm::embed::EmbeddingReceipt;
use samebits_runtime::tensor_file;
use std::path::PathBuf;

/// Embeds `texts` with the encoder folder at `model_path` (see `samebits.embed`).
#[pyfunction]
#[pyo3(signature = (model_path, texts, normalize=None, operation_set="reproducible",
                    receipt=None))]
pub fn embed<'py>(
    py: Python<'py>,
    model_path: PathBuf,
    texts: Vec<String>,
    normalize: Option<bool>,
    operation_set: &str,
    receipt: Option<PathBuf>,
) -> PyResult<Bound<'py, PyBytes>> {
    let operation_set = options::operation_set(operation_set)?;
    let embedder = py
        .detach(|| Embedder::load(&model_path, operation_set))
        .map_err(|e| llm_error(e, Some(&model_path)))?;
    if let Some(normalize) = normalize.filter(|&n| n != embedder.normalize) {
        return Err(bad_argument(format!(
            "normalize={}: {} {} its embeddings (its modules.json decides, and receipts \
             re-embed with it)",
            if normalize { "True" } else { "False" },
            model_path.display(),
            if embedder.normalize {
                "L2-normalises"
            } else {
                "does not normalise"
            }
        )));
    }
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let npy = py
        .detach(|| {
            let embeddings = embedder.embed(&texts)?;
            if let Some(path) = &receipt {
                EmbeddingReceipt::new(&embedder, &texts, &embeddings, path)?.write(path)?;
            }
            tensor_file::npy_bytes(&embeddings).map_err(samebits_llm::LlmError::Usage)
        })
        .map_err(|e| llm_error(e, None))?;
    Ok(PyBytes::new(py, &npy))
}
