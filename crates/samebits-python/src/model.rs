//! `compile` and [`Model`]: an ONNX model compiled by `samebits_runtime::compile`, run on named
//! tensors that cross the language boundary as `.npy` bytes (parsed and written by
//! `samebits_runtime::tensor_file`, so NumPy's dtypes map to samebits' in one place), and the
//! receipt of a run, the same one `samebits run --receipt` writes
//! (`samebits_bindings::run_receipt`).

use crate::errors::{ReproducibilityError, bad_argument, runtime_error};
use crate::options;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use samebits_ir::{Dim, Value, ValueType};
use samebits_runtime::{CompileOptions, CompiledModel, RuntimeError, tensor_file};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// An ONNX model compiled for one device and operation set.
#[pyclass(frozen, module = "samebits._native")]
pub struct Model {
    compiled: CompiledModel,
    path: PathBuf,
}

/// A declared graph input or output: name, dtype name (`f32`, ...; `None` when undeclared) and
/// shape (ints for known dims, strings for symbolic ones; `None` when even the rank is unknown).
type TensorDescription = (String, Option<String>, Option<Vec<DimDescription>>);

/// One dim of a [`TensorDescription`].
#[derive(IntoPyObject)]
enum DimDescription {
    Known(usize),
    Symbol(String),
}

fn describe(name: &str, ty: Option<&ValueType>) -> TensorDescription {
    let Some(ValueType::Tensor { dtype, shape }) = ty else {
        return (name.to_string(), None, None);
    };
    let dims = shape.as_ref().map(|shape| {
        shape
            .0
            .iter()
            .map(|d| match d {
                Dim::Known(n) => DimDescription::Known(*n),
                Dim::Symbol(s) => DimDescription::Symbol(s.clone()),
            })
            .collect()
    });
    (name.to_string(), Some(dtype.name().to_string()), dims)
}

/// Compiles the ONNX model at `path` (see `samebits.compile`).
#[pyfunction]
#[pyo3(signature = (path, artifacts_dir=None, colocate_tensors=false,
                    requires_reproducibility=true, operation_set=None, device="cpu"))]
pub fn compile(
    py: Python<'_>,
    path: PathBuf,
    artifacts_dir: Option<PathBuf>,
    colocate_tensors: bool,
    requires_reproducibility: bool,
    operation_set: Option<&str>,
    device: &str,
) -> PyResult<Model> {
    let options = CompileOptions {
        artifacts_dir,
        colocate_tensors,
        requires_reproducibility,
        operation_set: operation_set.map(options::operation_set).transpose()?,
        device: options::device(device)?,
    };
    options
        .resolved_operation_set()
        .map_err(|e| ReproducibilityError::new_err(e.to_string()))?;
    let compiled = py
        .detach(|| samebits_runtime::compile(path.as_path(), &options))
        .map_err(|e| runtime_error(e, Some(&path)))?;
    Ok(Model { compiled, path })
}

#[pymethods]
impl Model {
    /// The model file this was compiled from.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The operation set the model was compiled for.
    #[getter]
    fn operation_set(&self) -> &'static str {
        self.compiled.operation_set.name()
    }

    /// Where the model runs, as receipts record it (`cpu`, `cuda:0 (<GPU name>)`).
    #[getter]
    fn device(&self) -> String {
        self.compiled.device_description()
    }

    /// The inputs a run needs, in order: `(name, dtype, shape)`.
    #[getter]
    fn inputs(&self) -> Vec<TensorDescription> {
        let graph = &self.compiled.model.graph;
        self.compiled
            .input_names()
            .iter()
            .map(|name| describe(name, graph.value_type(name).as_ref()))
            .collect()
    }

    /// The outputs a run returns, in order: `(name, dtype, shape)`.
    #[getter]
    fn outputs(&self) -> Vec<TensorDescription> {
        let graph = &self.compiled.model.graph;
        self.compiled
            .output_names()
            .iter()
            .map(|name| describe(name, graph.value_type(name).as_ref()))
            .collect()
    }

    /// Runs on `{name: .npy bytes}` and returns `[(output name, .npy bytes)]` in output order.
    /// With `receipt`, writes the run's receipt there and each input beside it
    /// (`samebits_bindings::run_receipt`).
    #[pyo3(signature = (inputs, receipt=None))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        inputs: BTreeMap<String, Bound<'py, PyBytes>>,
        receipt: Option<PathBuf>,
    ) -> PyResult<Vec<(String, Bound<'py, PyBytes>)>> {
        let mut values = BTreeMap::new();
        for (name, npy) in &inputs {
            let tensor = tensor_file::parse_npy(npy.as_bytes())
                .map_err(|m| bad_argument(format!("input \"{name}\": {m}")))?;
            values.insert(name.clone(), Value::Tensor(tensor));
        }
        let outputs = py
            .detach(|| self.compiled.run(&values))
            .map_err(|e| runtime_error(e, None))?;
        let mut encoded = Vec::with_capacity(outputs.len());
        for (name, value) in &outputs {
            let tensor = value.as_tensor().map_err(|_| {
                runtime_error(
                    RuntimeError::Usage(format!(
                        "output \"{name}\" is a {}, not a tensor",
                        value.kind()
                    )),
                    None,
                )
            })?;
            let npy = tensor_file::npy_bytes(tensor)
                .map_err(|m| bad_argument(format!("output \"{name}\": {m}")))?;
            encoded.push((name.clone(), PyBytes::new(py, &npy)));
        }
        if let Some(path) = receipt {
            py.detach(|| samebits_bindings::run_receipt(&self.compiled, &values, &outputs, &path))
                .map_err(|e| runtime_error(e, None))?;
        }
        Ok(encoded)
    }

    fn __repr__(&self) -> String {
        format!(
            "Model({:?}, operation_set={:?}, device={:?})",
            self.path.display().to_string(),
            self.compiled.operation_set.name(),
            self.compiled.device_description()
        )
    }
}
