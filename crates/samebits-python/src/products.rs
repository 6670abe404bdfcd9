//! `gemm`: the canonical matrix product `op(a) op(b) (+ c)` that `samebits.gemm` and
//! `samebits.torch` (forward, dX, dW and the bias gradient) compute. Each product is a
//! one-node samebits graph, an ONNX Gemm with `transA` / `transB` and an optional bias row,
//! compiled by `samebits_runtime::compile` in the reproducible operation set for the device
//! asked for, so the CPU and the GPU run the engine's own `gemm` kernels (docs/contract.md,
//! sections `gemm` and `gemm-epilogue`: every output the canonical dot product, then `+ c`).
//! Compiled products are kept for the process, one per (shapes, transposes, bias, device), so a
//! training loop compiles each of its products once.

use crate::errors::{bad_argument, runtime_error};
use crate::options;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use samebits_ir::{
    Attribute, DType, Graph, Model, Node, Shape, Tensor, Value, ValueInfo, ValueType,
};
use samebits_ops::RunOptions;
use samebits_runtime::{CompileOptions, Device, Executor, tensor_file};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// What a compiled product depends on: operand shapes, transposes, bias length, device.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ProductKey {
    a: [usize; 2],
    b: [usize; 2],
    trans_a: bool,
    trans_b: bool,
    bias: Option<usize>,
    device: Device,
}

impl ProductKey {
    /// The one-node graph `y = Gemm(a, b[, c])` of this key's shapes.
    fn model(&self) -> Model {
        let input = |name: &str, dims: &[usize]| ValueInfo {
            name: name.to_string(),
            ty: Some(ValueType::tensor(DType::F32, Some(Shape::known(dims)))),
        };
        let mut inputs = vec![input("a", &self.a), input("b", &self.b)];
        let mut node_inputs = vec!["a".to_string(), "b".to_string()];
        if let Some(n) = self.bias {
            inputs.push(input("c", &[n]));
            node_inputs.push("c".to_string());
        }
        let node = Node {
            name: "product".to_string(),
            op_type: "Gemm".to_string(),
            domain: String::new(),
            inputs: node_inputs,
            outputs: vec!["y".to_string()],
            attributes: [
                ("transA".to_string(), Attribute::Int(self.trans_a.into())),
                ("transB".to_string(), Attribute::Int(self.trans_b.into())),
            ]
            .into(),
        };
        Model {
            graph: Graph {
                name: "samebits_gemm".to_string(),
                inputs,
                outputs: vec![ValueInfo {
                    name: "y".to_string(),
                    ty: None,
                }],
                nodes: vec![node],
                ..Graph::default()
            },
            opset_imports: [(String::new(), 13)].into(),
            ir_version: 8,
            producer: samebits_runtime::ENGINE.to_string(),
            metadata: BTreeMap::new(),
        }
    }
}

/// The product of `key`, compiled on first use. What is kept is the plan bound to its device:
/// the compiled model is dropped at once, and with it its temporary artifacts folder, which a
/// model kept for the process would leave behind at exit.
fn compiled(key: &ProductKey) -> samebits_runtime::Result<Arc<Executor>> {
    static PRODUCTS: OnceLock<Mutex<HashMap<ProductKey, Arc<Executor>>>> = OnceLock::new();
    let products = PRODUCTS.get_or_init(Default::default);
    let lock = || products.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(product) = lock().get(key) {
        return Ok(Arc::clone(product));
    }
    let options = CompileOptions {
        device: key.device,
        ..CompileOptions::default()
    };
    let product =
        Arc::new(samebits_runtime::compile(key.model(), &options)?.executor_on(key.device)?);
    Ok(Arc::clone(lock().entry(key.clone()).or_insert(product)))
}

/// The float32 matrix of argument `name` (`.npy` bytes).
fn matrix(name: &str, npy: &[u8]) -> PyResult<Tensor> {
    let tensor = tensor_file::parse_npy(npy).map_err(|m| bad_argument(format!("{name}: {m}")))?;
    if tensor.dtype() != DType::F32 {
        return Err(bad_argument(format!(
            "{name} has dtype {}; gemm takes float32 only",
            tensor.dtype().name()
        )));
    }
    Ok(tensor)
}

/// `[rows, cols]` of a 2-D operand, or an error naming it.
fn dims2(name: &str, tensor: &Tensor) -> PyResult<[usize; 2]> {
    match *tensor.shape() {
        [rows, cols] => Ok([rows, cols]),
        ref shape => Err(bad_argument(format!(
            "{name} has shape {shape:?}; gemm takes 2-D matrices"
        ))),
    }
}

/// `op(a) op(b) (+ c)` on float32 `.npy` operands (see `samebits.gemm`); returns `.npy` bytes.
#[pyfunction]
#[pyo3(signature = (a, b, c=None, trans_a=false, trans_b=false, device="cpu"))]
pub fn gemm<'py>(
    py: Python<'py>,
    a: &[u8],
    b: &[u8],
    c: Option<&[u8]>,
    trans_a: bool,
    trans_b: bool,
    device: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let device = options::device(device)?;
    let (a, b) = (matrix("a", a)?, matrix("b", b)?);
    let c = c.map(|c| matrix("c", c)).transpose()?;
    let (a_dims, b_dims) = (dims2("a", &a)?, dims2("b", &b)?);
    let [m, k] = if trans_a {
        [a_dims[1], a_dims[0]]
    } else {
        a_dims
    };
    let [kb, n] = if trans_b {
        [b_dims[1], b_dims[0]]
    } else {
        b_dims
    };
    if k != kb {
        let flag = |set: bool| if set { "True" } else { "False" };
        return Err(bad_argument(format!(
            "a has shape {a_dims:?} (trans_a={}) and b {b_dims:?} (trans_b={}): op(a) is \
             {m}x{k} and op(b) {kb}x{n}, their inner dims differ",
            flag(trans_a),
            flag(trans_b)
        )));
    }
    let bias = match &c {
        Some(c) if c.shape() != [n] => {
            return Err(bad_argument(format!(
                "c has shape {:?}; the bias of a {m}x{n} product has shape [{n}]",
                c.shape()
            )));
        }
        Some(_) => Some(n),
        None => None,
    };
    let key = ProductKey {
        a: a_dims,
        b: b_dims,
        trans_a,
        trans_b,
        bias,
        device,
    };
    // In the order of the graph's inputs (`ProductKey::model`).
    let inputs = [Some(a), Some(b), c]
        .into_iter()
        .flatten()
        .map(Value::Tensor)
        .collect();
    let outputs = py
        .detach(|| compiled(&key)?.run(inputs, RunOptions::default()))
        .map_err(|e| runtime_error(e, None))?;
    let y = outputs
        .first()
        .and_then(|value| value.as_tensor().ok())
        .ok_or_else(|| PyRuntimeError::new_err("gemm: the product returned no tensor"))?;
    let npy =
        tensor_file::npy_bytes(y).map_err(|m| PyRuntimeError::new_err(format!("gemm: {m}")))?;
    Ok(PyBytes::new(py, &npy))
}
