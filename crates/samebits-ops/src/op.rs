//! The [`Op`] trait every operator implements, the [`BuildContext`] an op is built from, and the
//! [`OperationSet`] it is built for.

use crate::{DeviceKernel, OpError, Plan, Result, ShapedKernel};
use samebits_ir::{Node, OpsetImports, Tensor, Value, ValueType};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// Which promise the kernels keep (docs/contract.md, "Operation sets").
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OperationSet {
    /// Fastest kernels; no promise about bits.
    Default,
    /// Same bits run to run on the same machine.
    Deterministic,
    /// Same bits on every supported CPU and GPU, batch size, thread and partition count.
    #[default]
    Reproducible,
    /// Reproducible, with the exact-integer products of GGUF weights of the types of
    /// `samebits_kernels::INT8_TYPES` (docs/contract.md, `int8-products`): the activations of
    /// each product are quantized to 8-bit blocks, and each block's products summed exactly.
    /// Other ops, and products with weights of other types, are `reproducible`'s.
    #[serde(rename = "reproducible-int8")]
    ReproducibleInt8,
}

impl OperationSet {
    pub const ALL: [OperationSet; 4] = [
        OperationSet::Default,
        OperationSet::Deterministic,
        OperationSet::Reproducible,
        OperationSet::ReproducibleInt8,
    ];

    pub fn name(self) -> &'static str {
        match self {
            OperationSet::Default => "default",
            OperationSet::Deterministic => "deterministic",
            OperationSet::Reproducible => "reproducible",
            OperationSet::ReproducibleInt8 => "reproducible-int8",
        }
    }

    /// True when the set keeps the reproducibility promise (same bits on every machine).
    pub fn is_reproducible(self) -> bool {
        matches!(
            self,
            OperationSet::Reproducible | OperationSet::ReproducibleInt8
        )
    }

    /// True when products with GGUF weights use the exact-integer tier.
    pub fn int8_products(self) -> bool {
        self == OperationSet::ReproducibleInt8
    }

    /// True when transcendentals must be the correctly rounded ones (docs/math.md).
    pub fn correctly_rounded_math(self) -> bool {
        self != OperationSet::Default
    }
}

impl fmt::Display for OperationSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for OperationSet {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        OperationSet::ALL
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown operation set {s:?} (default, deterministic, reproducible, \
                     reproducible-int8)"
                )
            })
    }
}

/// Everything an op constructor may look at.
pub struct BuildContext<'a> {
    pub node: &'a Node,
    /// The opset version imported for the node's domain.
    pub opset: i64,
    pub operation_set: OperationSet,
    /// The model's opset imports (subgraphs are built against them too).
    pub opsets: &'a OpsetImports,
    /// Input types known at build time (`None` where unknown), one per node input.
    pub input_types: &'a [Option<ValueType>],
    /// Whether each node input is a constant of the plan (an initializer), so that an op may
    /// prepare it once (pack weights) and reuse that for every run; empty when unknown.
    pub constant_inputs: &'a [bool],
    /// Names of outer-scope values that this node's subgraphs read; the interpreter appends
    /// their values after the node's own inputs when it evaluates the op.
    pub captures: &'a [String],
}

/// The inputs of one evaluation; `None` marks an omitted optional input.
pub type Inputs<'a> = [Option<&'a Value>];

/// An operator instance: one graph node with its attributes parsed.
pub trait Op: Send + Sync + fmt::Debug {
    /// Output types from input types. An empty vector means "unknown"; ops implement this
    /// where the types follow from the input types alone.
    fn infer(&self, _inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(Vec::new())
    }

    /// Evaluates the op on CPU values.
    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>>;

    /// The reproducible kernel this op's float32 evaluation equals, for backends other than
    /// the CPU interpreter; `None` (the default) makes them fall back to [`Op::eval`].
    fn device_kernel(&self) -> Option<DeviceKernel> {
        None
    }

    /// For a fused op (decoder fusion's `samebits::` ops, `decoder_fused.rs`): the plan of the
    /// nodes it stands for, whose inputs are the op's inputs and whose outputs are its outputs,
    /// in order. A backend with no launch for the op's inputs runs this plan step by step, with
    /// its own kernels, instead of falling back to [`Op::eval`].
    fn body(&self) -> Option<&Arc<Plan>> {
        None
    }

    /// For ops whose outputs are a function of their inputs' shapes alone (Shape, Size): the
    /// outputs for inputs of `shapes`; `None` for every other op. Shape specialisation
    /// (samebits-passes' `specialization.rs`) folds such nodes once the shapes are known.
    fn outputs_from_shapes(&self, _shapes: &[&[usize]]) -> Option<Result<Vec<Value>>> {
        None
    }

    /// For ops whose device kernel is [`DeviceKernel::View`]: the output shape, from input 0's
    /// `shape` and the other inputs (shape and axes values, on the host).
    fn view_shape(&self, _shape: &[usize], _inputs: &Inputs) -> Result<Vec<usize>> {
        Err(OpError::Invalid("not a view op".into()))
    }

    /// For ops whose device kernel is [`DeviceKernel::Shaped`]: the kernel for inputs of
    /// `shapes` (`None` for omitted inputs), reading on the host the inputs it needs there
    /// (Resize's scales, Slice's starts, ...: `inputs` holds every input available on the
    /// host). An error means "run the op on the CPU".
    fn shaped_kernel(
        &self,
        _shapes: &[Option<&[usize]>],
        _inputs: &Inputs,
    ) -> Result<ShapedKernel> {
        Err(OpError::Invalid("no shaped device kernel".into()))
    }
}

/// Typed access to the inputs of an evaluation, with errors that name the input index.
pub trait InputsExt {
    fn value(&self, i: usize) -> Result<&Value>;
    fn tensor(&self, i: usize) -> Result<&Tensor>;
    fn opt_tensor(&self, i: usize) -> Result<Option<&Tensor>>;
    /// Input `i`, an integer tensor (shape, axes, pads, indices), as i64 values; errors name
    /// the input `name`.
    fn ints(&self, i: usize, name: &str) -> Result<Vec<i64>>;
    /// [`InputsExt::ints`] for an optional input.
    fn opt_ints(&self, i: usize, name: &str) -> Result<Option<Vec<i64>>>;
}

impl InputsExt for Inputs<'_> {
    fn value(&self, i: usize) -> Result<&Value> {
        self.get(i)
            .copied()
            .flatten()
            .ok_or_else(|| OpError::Invalid(format!("required input {i} is missing")))
    }

    fn tensor(&self, i: usize) -> Result<&Tensor> {
        self.value(i)?
            .as_tensor()
            .map_err(|e| OpError::Invalid(format!("input {i}: {e}")))
    }

    fn opt_tensor(&self, i: usize) -> Result<Option<&Tensor>> {
        match self.get(i).copied().flatten() {
            None => Ok(None),
            Some(Value::Optional(None)) => Ok(None),
            Some(v) => v
                .as_tensor()
                .map(Some)
                .map_err(|e| OpError::Invalid(format!("input {i}: {e}"))),
        }
    }

    fn ints(&self, i: usize, name: &str) -> Result<Vec<i64>> {
        self.opt_ints(i, name)?
            .ok_or_else(|| OpError::Invalid(format!("required input {i} ({name}) is missing")))
    }

    fn opt_ints(&self, i: usize, name: &str) -> Result<Option<Vec<i64>>> {
        self.opt_tensor(i)?
            .map(|t| {
                t.to_i64_vec()
                    .map_err(|e| OpError::Invalid(format!("input {i} ({name}): {e}")))
            })
            .transpose()
    }
}
