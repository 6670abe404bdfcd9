//! The ONNX conformance runner: runs ONNX's backend test cases (a folder per case holding
//! `model.onnx` and `test_data_set_N/{input,output}_K.pb`, as in the node/, pytorch-converted/,
//! pytorch-operator/ and simple/ layouts) and compares every output with the reference: floats
//! (float8 and float4 included, by value) with `|actual - expected| <= atol + rtol * |expected|`
//! (rtol 1e-3, atol 1e-7, NaN equal to NaN, infinities equal when their signs are); integers
//! (4- and 2-bit ones included), bools and strings exactly.
//!
//! Each case ends as passed, failed or skipped, with a reason category. Skipped means samebits
//! lacks the feature (an op or a dtype); failed means it ran and disagreed, or broke.
//!
//! [`run_case_on`] with a GPU also runs each passing case there and compares every output bit
//! for bit with the CPU's ([`DeviceOutcome`]), counting the steps that ran on device kernels
//! and those that fell back to the CPU.

use crate::device::Device;
use crate::hashing::sha256_value;
use crate::{CompileOptions, ModelSource, compile};
use samebits_ir::{DType, Model, Tensor, Value, ValueType};
use samebits_ops::OperationSet;
use samebits_ops::RunStats;
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};

pub const RTOL: f64 = 1e-3;
pub const ATOL: f64 = 1e-7;

/// Why a case did not pass.
#[derive(Clone, Debug, PartialEq)]
pub enum Reason {
    /// The registry has no such op (its message names the op).
    UnsupportedOp(String),
    /// A tensor's data type the importer does not decode.
    UnsupportedDtype(String),
    /// An op lacks this value of an attribute (the message names the attribute and value).
    UnsupportedAttribute(String),
    /// An op lacks another form of itself (an input dtype, a variant), or the importer a
    /// model feature (an opset, a map type); the message says which.
    UnsupportedFeature(String),
    LoadError(String),
    ShapeMismatch(String),
    NumericMismatch {
        output: String,
        max_abs_error: f64,
    },
    RuntimeError(String),
}

impl Reason {
    /// The category name used in tables and allowlists.
    pub fn category(&self) -> &'static str {
        match self {
            Reason::UnsupportedOp(_) => "unsupported op",
            Reason::UnsupportedDtype(_) => "unsupported dtype",
            Reason::UnsupportedAttribute(_) => "unsupported attribute value",
            Reason::UnsupportedFeature(_) => "unsupported feature",
            Reason::LoadError(_) => "load error",
            Reason::ShapeMismatch(_) => "shape mismatch",
            Reason::NumericMismatch { .. } => "numeric mismatch",
            Reason::RuntimeError(_) => "runtime error",
        }
    }

    /// Skips are missing features; everything else is a failure.
    pub fn is_skip(&self) -> bool {
        matches!(
            self,
            Reason::UnsupportedOp(_)
                | Reason::UnsupportedDtype(_)
                | Reason::UnsupportedAttribute(_)
                | Reason::UnsupportedFeature(_)
        )
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::NumericMismatch {
                output,
                max_abs_error,
            } => write!(
                f,
                "numeric mismatch: output \"{output}\" max abs error {max_abs_error:.3e}"
            ),
            Reason::UnsupportedOp(m)
            | Reason::UnsupportedDtype(m)
            | Reason::UnsupportedAttribute(m)
            | Reason::UnsupportedFeature(m)
            | Reason::LoadError(m)
            | Reason::ShapeMismatch(m)
            | Reason::RuntimeError(m) => write!(f, "{}: {m}", self.category()),
        }
    }
}

/// The outcome of one case.
#[derive(Clone, Debug)]
pub struct CaseResult {
    pub name: String,
    /// The op types the case's model uses (its main subject first).
    pub ops: Vec<String>,
    pub outcome: Result<(), Reason>,
    /// With a GPU ([`run_case_on`]) and a passing case: its outputs there against the CPU's.
    pub device: Option<DeviceOutcome>,
}

/// A passing case run again on a GPU, compared bit for bit with the CPU's outputs.
#[derive(Clone, Debug)]
pub enum DeviceOutcome {
    /// Every output has the CPU's bits.
    Identical(RunStats),
    /// Some output differs (NaN payloads do not count: receipts hash every NaN alike).
    Differs { stats: RunStats, message: String },
    /// The GPU run broke.
    Failed(String),
}

/// How `actual` differs from `expected` bit for bit, if it does: a message naming the output,
/// and whether every differing element is a NaN against a NaN.
pub fn bit_difference(name: &str, actual: &Value, expected: &Value) -> Option<String> {
    if sha256_value(actual) == sha256_value(expected) {
        return None;
    }
    let (Value::Tensor(a), Value::Tensor(e)) = (actual, expected) else {
        return Some(format!("output \"{name}\" differs"));
    };
    let (Ok(av), Ok(ev)) = (a.as_slice::<f32>(), e.as_slice::<f32>()) else {
        return Some(format!("output \"{name}\" differs"));
    };
    if av.len() != ev.len() {
        return Some(format!("output \"{name}\" has another shape"));
    }
    let differing = av
        .iter()
        .zip(ev)
        .filter(|(x, y)| x.to_bits() != y.to_bits() && !(x.is_nan() && y.is_nan()))
        .count();
    Some(format!(
        "output \"{name}\": {differing} of {} elements differ",
        av.len()
    ))
}

/// Every case folder under `dir` (folders holding a `model.onnx`), sorted by name.
pub fn case_dirs(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.join("model.onnx").is_file() {
            cases.push(path);
        }
    }
    cases.sort();
    Ok(cases)
}

/// Sorts an op error into a category: unsupported ops are named "op X is not implemented" by
/// the registry, unsupported attribute values name `attribute "X"` (the ops' convention);
/// any other unsupported form is a feature the op lacks, which its message names.
fn classify_error(message: String, unsupported: bool) -> Reason {
    if !unsupported {
        Reason::RuntimeError(message)
    } else if message.contains("is not implemented") {
        Reason::UnsupportedOp(message)
    } else if message.contains("attribute \"") {
        Reason::UnsupportedAttribute(message)
    } else {
        Reason::UnsupportedFeature(message)
    }
}

/// Sorts an importer error: a data type it does not decode, another feature it lacks (an
/// opset, a map type), or a broken file.
fn classify_import_error(e: samebits_onnx::OnnxError) -> Reason {
    match e {
        samebits_onnx::OnnxError::UnsupportedDataType { .. } => {
            Reason::UnsupportedDtype(e.to_string())
        }
        _ if e.is_unsupported() => Reason::UnsupportedFeature(e.to_string()),
        _ => Reason::LoadError(e.to_string()),
    }
}

/// Runs one case folder in `operation_set` on the CPU.
pub fn run_case(case: &Path, operation_set: OperationSet) -> CaseResult {
    run_case_on(case, operation_set, Device::Cpu)
}

/// [`run_case`], then, for a passing case and a GPU `device`, the same plan on the GPU compared
/// bit for bit with the CPU's outputs.
pub fn run_case_on(case: &Path, operation_set: OperationSet, device: Device) -> CaseResult {
    let name = case
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut ops = Vec::new();
    let mut device_outcome = None;
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        run_case_inner(case, operation_set, device, &mut ops, &mut device_outcome)
    }))
    .unwrap_or_else(|panic| {
        let msg = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Err(Reason::RuntimeError(format!("panic: {msg}")))
    });
    CaseResult {
        name,
        ops,
        outcome,
        device: device_outcome,
    }
}

fn run_case_inner(
    case: &Path,
    set: OperationSet,
    device: Device,
    ops: &mut Vec<String>,
    device_outcome: &mut Option<DeviceOutcome>,
) -> Result<(), Reason> {
    let model_path = case.join("model.onnx");
    let model: Model = samebits_onnx::load_model(&model_path).map_err(classify_import_error)?;
    for node in &model.graph.nodes {
        if !ops.contains(&node.op_type) {
            ops.push(node.op_type.clone());
        }
    }
    let input_types: Vec<(String, Option<ValueType>)> = model
        .graph
        .runtime_inputs()
        .map(|v| (v.name.clone(), v.ty.clone()))
        .collect();
    let output_types: Vec<(String, Option<ValueType>)> = model
        .graph
        .outputs
        .iter()
        .map(|v| (v.name.clone(), v.ty.clone()))
        .collect();
    let options = CompileOptions {
        requires_reproducibility: set == OperationSet::Reproducible,
        operation_set: Some(set),
        ..Default::default()
    };
    let compiled = compile(ModelSource::from(model), &options).map_err(|e| {
        let unsupported = matches!(&e, crate::RuntimeError::Op(o) if o.is_unsupported())
            || matches!(&e, crate::RuntimeError::Pass(samebits_passes::PassError::Op { source, .. }) if source.is_unsupported());
        classify_error(e.to_string(), unsupported)
    })?;
    let mut sets: Vec<PathBuf> = std::fs::read_dir(case)
        .map_err(|e| Reason::LoadError(e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("test_data_set_"))
        })
        .collect();
    sets.sort();
    let mut runs = Vec::new();
    for set_dir in sets {
        let mut inputs = BTreeMap::new();
        for (i, (name, ty)) in input_types.iter().enumerate() {
            let file = set_dir.join(format!("input_{i}.pb"));
            if !file.exists() {
                continue;
            }
            let v =
                samebits_onnx::read_value_pb(&file, ty.as_ref()).map_err(classify_import_error)?;
            inputs.insert(name.clone(), v);
        }
        let outputs = compiled.run(&inputs).map_err(|e| {
            let unsupported = matches!(&e, crate::RuntimeError::Op(o) if o.is_unsupported());
            classify_error(e.to_string(), unsupported)
        })?;
        for (i, ((name, ty), (_, actual))) in output_types.iter().zip(&outputs).enumerate() {
            let file = set_dir.join(format!("output_{i}.pb"));
            let expected = samebits_onnx::read_value_pb(&file, ty.as_ref())
                .map_err(|e| Reason::LoadError(e.to_string()))?;
            compare_values(name, actual, &expected)?;
        }
        runs.push((inputs, outputs));
    }
    if device != Device::Cpu {
        *device_outcome = Some(compare_on_device(&compiled, device, &runs));
    }
    Ok(())
}

/// Runs each `(inputs, cpu outputs)` of a passing case on `device` and compares the bits.
#[allow(clippy::type_complexity)]
fn compare_on_device(
    compiled: &crate::CompiledModel,
    device: Device,
    runs: &[(BTreeMap<String, Value>, Vec<(String, Value)>)],
) -> DeviceOutcome {
    let executor = match compiled.executor_on(device) {
        Ok(e) => e,
        Err(e) => return DeviceOutcome::Failed(e.to_string()),
    };
    let mut stats = RunStats::default();
    for (inputs, cpu_outputs) in runs {
        let ordered: Option<Vec<Value>> = executor
            .plan()
            .inputs()
            .map(|(name, _)| inputs.get(name).cloned())
            .collect();
        let Some(ordered) = ordered else {
            return DeviceOutcome::Failed("a test data set lacks an input".into());
        };
        let outputs = match executor.run_counted(ordered, Default::default()) {
            Ok((outputs, run_stats)) => {
                stats.add(&run_stats.unwrap_or_default());
                outputs
            }
            Err(e) => return DeviceOutcome::Failed(e.to_string()),
        };
        for ((name, cpu), gpu) in cpu_outputs.iter().zip(&outputs) {
            if let Some(message) = bit_difference(name, gpu, cpu) {
                return DeviceOutcome::Differs { stats, message };
            }
        }
    }
    DeviceOutcome::Identical(stats)
}

/// Compares an output with its reference under the runner's tolerance.
pub fn compare_values(name: &str, actual: &Value, expected: &Value) -> Result<(), Reason> {
    match (actual, expected) {
        (Value::Tensor(a), Value::Tensor(e)) => compare_tensors(name, a, e),
        (Value::Sequence(a), Value::Sequence(e)) => {
            if a.len() != e.len() {
                return Err(Reason::ShapeMismatch(format!(
                    "output \"{name}\": sequence of {} tensors, expected {}",
                    a.len(),
                    e.len()
                )));
            }
            a.iter()
                .zip(e)
                .try_for_each(|(a, e)| compare_tensors(name, a, e))
        }
        (Value::Optional(a), Value::Optional(e)) => match (a, e) {
            (None, None) => Ok(()),
            (Some(a), Some(e)) => compare_values(name, a, e),
            _ => Err(Reason::ShapeMismatch(format!(
                "output \"{name}\": optional presence differs from the reference"
            ))),
        },
        (Value::Optional(Some(a)), e) => compare_values(name, a, e),
        (a, Value::Optional(Some(e))) => compare_values(name, a, e),
        (a, e) => Err(Reason::ShapeMismatch(format!(
            "output \"{name}\" is a {}, expected a {}",
            a.kind(),
            e.kind()
        ))),
    }
}

fn compare_tensors(name: &str, a: &Tensor, e: &Tensor) -> Result<(), Reason> {
    if a.shape() != e.shape() {
        return Err(Reason::ShapeMismatch(format!(
            "output \"{name}\" has shape {:?}, expected {:?}",
            a.shape(),
            e.shape()
        )));
    }
    if a.dtype() != e.dtype() {
        return Err(Reason::ShapeMismatch(format!(
            "output \"{name}\" has dtype {}, expected {}",
            a.dtype(),
            e.dtype()
        )));
    }
    if a.dtype() == DType::String {
        return if a.as_strings().ok() == e.as_strings().ok() {
            Ok(())
        } else {
            Err(Reason::NumericMismatch {
                output: name.to_string(),
                max_abs_error: f64::NAN,
            })
        };
    }
    let (av, ev) = (
        a.to_f64_vec()
            .map_err(|m| Reason::RuntimeError(m.to_string()))?,
        e.to_f64_vec()
            .map_err(|m| Reason::RuntimeError(m.to_string()))?,
    );
    let float = a.dtype().is_float() || a.dtype().is_small_float();
    let mut worst = 0.0f64;
    let mut bad = false;
    for (&x, &y) in av.iter().zip(&ev) {
        let ok = if !float {
            x == y
        } else if x.is_nan() || y.is_nan() {
            x.is_nan() && y.is_nan()
        } else if x.is_infinite() || y.is_infinite() {
            x == y
        } else {
            (x - y).abs() <= ATOL + RTOL * y.abs()
        };
        if !ok {
            bad = true;
            let err = (x - y).abs();
            if err.is_nan() || err > worst {
                worst = if err.is_nan() { f64::INFINITY } else { err };
            }
        }
    }
    if bad {
        Err(Reason::NumericMismatch {
            output: name.to_string(),
            max_abs_error: worst,
        })
    } else {
        Ok(())
    }
}
