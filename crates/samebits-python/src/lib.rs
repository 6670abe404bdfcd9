//! `samebits._native`, the extension module under the Python package `samebits`
//! (`python/samebits/__init__.py` adds the NumPy side): [`model`] compiles and runs ONNX models
//! and writes run receipts, [`products`] computes the canonical matrix products of
//! `samebits.gemm` and `samebits.torch`, [`generation`] generates text (at once or as a stream) with
//! generation receipts, [`embedding`] embeds sentences, [`verification`] re-runs any receipt,
//! and [`errors`] turns the libraries' errors into Python exceptions. Every call that runs a
//! model releases the GIL while it runs.

mod embedding;
mod errors;
mod generation;
mod model;
mod options;
mod products;
mod verification;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("ENGINE", samebits_runtime::ENGINE)?;
    m.add(
        "ReproducibilityError",
        py.get_type::<errors::ReproducibilityError>(),
    )?;
    m.add_class::<model::Model>()?;
    m.add_class::<generation::Generation>()?;
    m.add_class::<generation::GenerationStream>()?;
    m.add_class::<verification::Verification>()?;
    m.add_function(wrap_pyfunction!(model::compile, m)?)?;
    m.add_function(wrap_pyfunction!(generation::generate, m)?)?;
    m.add_function(wrap_pyfunction!(generation::generate_stream, m)?)?;
    m.add_function(wrap_pyfunction!(verification::verify, m)?)?;
    m.add_function(wrap_pyfunction!(embedding::embed, m)?)?;
    m.add_function(wrap_pyfunction!(products::gemm, m)?)?;
    Ok(())
}
