//! `samebits::ElementwiseChain`: several elementwise f32 nodes evaluated in one pass over memory.
//!
//! The compiler's elementwise-fusion pass (samebits-passes, `fusion.rs`) replaces a run of
//! elementwise nodes whose intermediate values nobody else reads by one node of this op. The
//! original nodes travel in its `body` graph attribute: body inputs are the chain's operands (in
//! node-input order), the body output is the chain's result. The op evaluates, for each output
//! element, the body's nodes in order, each one the very IEEE operation the standalone op
//! performs on that element (contract section `elementwise-fusion`), so the bits are those of
//! the unfused graph; intermediates live in registers instead of memory.
//!
//! The fast path takes f32 tensors where every operand is the output's shape, one element, or
//! one value per channel (`[C]` for BatchNormalization's parameters, `[1, C, 1, ...]` under
//! broadcasting) and each binary node has at least one full-size operand. Anything else runs
//! the body node by node as an ordinary plan, the same bits as before fusion.
//!
//! The same evaluator ([`Prepared`]) serves as a convolution's epilogue (`samebits::ConvChain`,
//! `conv.rs`): one chain input is then the convolution's output, transformed in place block by
//! block as the kernel finishes it. Blocks of [`LANES`] lanes are evaluated pass by pass in code
//! compiled for the active ISA (wider registers, the same IEEE operations). A pass is one
//! instruction, or a short run of them that common models repeat ([`Pass`]: an affine pair, a
//! hard swish written out as Add, Clip, Mul, Div, an operation followed by Relu) taken in one
//! loop: each element still goes through the same operations in the same order, only the
//! intermediates stay in registers instead of lane rows, so the bits do not change.

use super::activation::{hard_sigmoid, leaky_relu};
use super::elementwise::{Binary, Unary, f32_binary, f32_unary};
use super::normalization::{BatchNormMode, batch_norm_mode, rsqrt_eps};
use crate::broadcast::LegacyBroadcast;
use crate::device_kernel::input_shape;
use crate::registry::Registry;
use crate::{
    BinaryKernel, BuildContext, ChainKernel, ChainLayout as Layout, ChainOp,
    ChainOperand as Operand, ChainStep, DeviceKernel, Inputs, InputsExt, NodeArgs, Op, OpError,
    OperationSet, Plan, Result, RunOptions, ShapedKernel, bail,
};
use rayon::prelude::*;
use samebits_ir::{Graph, Node, OpsetImports, RecycledF32, Tensor, Value, ValueType};
use samebits_kernels::{Isa, OutputMap};
use samebits_math::Activation;
use std::cell::Cell;

/// The op type the fusion pass emits, in domain [`DOMAIN`].
pub const OP_TYPE: &str = "ElementwiseChain";
/// The domain of [`OP_TYPE`].
pub const DOMAIN: &str = "samebits";
/// Most nodes in one chain (register file size).
pub const MAX_CHAIN: usize = 16;
/// The op type of a convolution whose output feeds a chain (`conv.rs`), in domain [`DOMAIN`].
pub const CONV_CHAIN: &str = "ConvChain";

/// Whether the fusion pass may start a `ConvChain` with `node`: a Conv or ConvTranspose of the
/// default domain with one output.
pub fn is_conv_head(node: &Node) -> bool {
    (node.domain.is_empty() || node.domain == "ai.onnx")
        && matches!(node.op_type.as_str(), "Conv" | "ConvTranspose")
        && node.outputs.len() == 1
}

pub fn register(r: &mut Registry) {
    r.register(DOMAIN, OP_TYPE, |ctx| {
        Ok(Box::new(ElementwiseChain::build(ctx)?))
    });
}

/// Whether the fusion pass may put `node` into a chain: an op of the default domain whose
/// per-element operation this file implements, with every input present.
pub fn is_fusable(node: &Node, opset: i64) -> bool {
    if !(node.domain.is_empty() || node.domain == "ai.onnx") || node.outputs.len() != 1 {
        return false;
    }
    let arity = node.inputs.len();
    let all_present = node.inputs.iter().all(|i| !i.is_empty());
    match node.op_type.as_str() {
        // Before opset 7 they may broadcast the legacy way, which a chain does not do.
        "Add" | "Sub" | "Mul" | "Div" => {
            arity == 2 && all_present && LegacyBroadcast::of(node, opset).ok() == Some(None)
        }
        "Relu" | "Sigmoid" | "HardSigmoid" | "HardSwish" | "LeakyRelu" => arity == 1 && all_present,
        // The input-bound form (opset 11 on); bounds may be omitted.
        "Clip" => opset >= 11 && (1..=3).contains(&arity) && !node.inputs[0].is_empty(),
        "BatchNormalization" => {
            arity == 5
                && all_present
                && batch_norm_mode(node, opset).ok() == Some(BatchNormMode::Inference)
        }
        _ => false,
    }
}

/// One body node's per-element operation.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Binary(Binary),
    Relu,
    /// `max(x, lo)` then `min(., hi)`, as Clip does.
    Clip,
    /// `((x - mean) * rstd) * scale + bias`, `rstd = 1 / sqrt(var + epsilon)`, as
    /// BatchNormalization does in inference mode. Operands: x, scale, bias, mean, var.
    BatchNorm {
        epsilon: f32,
    },
    /// A samebits-math composite activation (Sigmoid, HardSigmoid, HardSwish, LeakyRelu), the function the
    /// standalone op applies.
    Activation(Activation),
}

#[derive(Debug)]
struct Instr {
    kind: Kind,
    operands: Vec<Operand>,
}

/// The fused op: the body parsed into instructions, and the body as a plan for the general case.
#[derive(Debug)]
pub(super) struct ElementwiseChain {
    instrs: Vec<Instr>,
    inputs: usize,
    output_type: Option<ValueType>,
    fallback: Plan,
}

impl ElementwiseChain {
    fn build(ctx: &BuildContext) -> Result<ElementwiseChain> {
        let body: &Graph = NodeArgs::new(ctx.node).graph("body")?;
        ElementwiseChain::from_body(body, ctx.opsets, ctx.operation_set)
    }

    /// The chain of a `body` graph (its nodes in order, one output).
    pub(super) fn from_body(
        body: &Graph,
        opsets: &OpsetImports,
        operation_set: OperationSet,
    ) -> Result<ElementwiseChain> {
        if body.outputs.len() != 1 || body.nodes.is_empty() || body.nodes.len() > MAX_CHAIN {
            bail!(
                "{OP_TYPE}: body needs 1 to {MAX_CHAIN} nodes and one output, has {} nodes and \
                 {} outputs",
                body.nodes.len(),
                body.outputs.len()
            );
        }
        let opset = crate::registry::opset_of(opsets, "");
        let mut names: Vec<&str> = body.inputs.iter().map(|v| v.name.as_str()).collect();
        let inputs = names.len();
        let mut instrs = Vec::with_capacity(body.nodes.len());
        for node in &body.nodes {
            if !is_fusable(node, opset) {
                bail!("{OP_TYPE}: {} cannot be part of a chain", node.describe());
            }
            let operands = node
                .inputs
                .iter()
                .map(|name| {
                    if name.is_empty() {
                        return Ok(Operand::Absent);
                    }
                    match names.iter().position(|n| n == name) {
                        Some(i) if i < inputs => Ok(Operand::Input(i)),
                        Some(i) => Ok(Operand::Temp(i - inputs)),
                        None => Err(OpError::Invalid(format!(
                            "{OP_TYPE}: {} reads \"{name}\", which is no body input nor an \
                             earlier node's output",
                            node.describe()
                        ))),
                    }
                })
                .collect::<Result<Vec<_>>>()?;
            let kind = match node.op_type.as_str() {
                "Add" => Kind::Binary(Binary::Add),
                "Sub" => Kind::Binary(Binary::Sub),
                "Mul" => Kind::Binary(Binary::Mul),
                "Div" => Kind::Binary(Binary::Div),
                "Relu" => Kind::Relu,
                "Clip" => Kind::Clip,
                "Sigmoid" => Kind::Activation(Activation::Sigmoid),
                "HardSwish" => Kind::Activation(Activation::HardSwish),
                "HardSigmoid" => Kind::Activation(hard_sigmoid(node)?),
                "LeakyRelu" => Kind::Activation(leaky_relu(node)?),
                _ => Kind::BatchNorm {
                    epsilon: NodeArgs::new(node).float_or("epsilon", 1e-5)?,
                },
            };
            instrs.push(Instr { kind, operands });
            names.push(node.outputs[0].as_str());
        }
        if names.last() != Some(&body.outputs[0].name.as_str()) {
            bail!("{OP_TYPE}: the body output must be the last node's output");
        }
        Ok(ElementwiseChain {
            instrs,
            inputs,
            output_type: body.outputs[0].ty.clone(),
            fallback: Plan::build(body, opsets, operation_set, &[])?,
        })
    }

    /// Number of chain inputs (the body's inputs).
    pub(super) fn input_count(&self) -> usize {
        self.inputs
    }

    /// The chain's output type, as the body declares it.
    pub(super) fn output_type(&self) -> Option<ValueType> {
        self.output_type.clone()
    }

    /// The operands' layouts and the output shape when the fast path applies to chain inputs
    /// of these shapes (all f32): every input is the output's shape, one element, or one value
    /// per channel (axis 1). With `per_element` false (the CPU's lane evaluator) every
    /// instruction's result must also be full size; a per-element evaluator (the device's)
    /// computes each step at each output element, which equals computing it on the smaller
    /// operands and broadcasting (each step is a function of its operands' values only).
    fn fast_layout(
        &self,
        shapes: &[&[usize]],
        per_element: bool,
    ) -> Option<(Vec<usize>, Vec<Layout>)> {
        let numel = |s: &[usize]| s.iter().product::<usize>();
        let shape = shapes.iter().max_by_key(|s| numel(s))?.to_vec();
        let channels = (shape.len() >= 2).then(|| shape[1]);
        let layouts: Vec<Layout> = shapes
            .iter()
            .map(|s| Layout::of(s, &shape, channels))
            .collect::<Option<_>>()?;
        let full = |o: &Operand| match o {
            Operand::Input(i) => per_element || matches!(layouts[*i], Layout::Full | Layout::Last),
            Operand::Temp(_) => true,
            Operand::Absent => false,
        };
        // A `[C]` operand broadcasts along the last axis (NumPy), so it is one value per
        // channel only for rank-2 outputs; BatchNormalization's `[C]` parameters are per channel.
        let broadcasts = |o: &Operand| match o {
            Operand::Input(i) => {
                !(layouts[*i] == Layout::Channel && shapes[*i].len() == 1 && shape.len() != 2)
            }
            _ => true,
        };
        for instr in &self.instrs {
            let ok = match instr.kind {
                Kind::Binary(_) => {
                    let [a, b] = [&instr.operands[0], &instr.operands[1]];
                    (full(a) || full(b)) && broadcasts(a) && broadcasts(b)
                }
                Kind::Relu | Kind::Activation(_) => {
                    full(&instr.operands[0]) && broadcasts(&instr.operands[0])
                }
                Kind::Clip => {
                    full(&instr.operands[0])
                        && broadcasts(&instr.operands[0])
                        && instr.operands[1..].iter().all(|o| match o {
                            Operand::Input(i) => layouts[*i] == Layout::Scalar,
                            _ => matches!(o, Operand::Absent),
                        })
                }
                // BatchNormalization's parameters are `[C]`, one per channel of axis 1.
                Kind::BatchNorm { .. } => {
                    full(&instr.operands[0])
                        && broadcasts(&instr.operands[0])
                        && shape.len() >= 2
                        && instr.operands[1..].iter().all(|o| match o {
                            Operand::Input(i) => shapes[*i] == [shape[1]],
                            _ => false,
                        })
                }
            };
            if !ok {
                return None;
            }
        }
        Some((shape, layouts))
    }
}

impl Layout {
    fn of(shape: &[usize], out: &[usize], channels: Option<usize>) -> Option<Layout> {
        if shape == out {
            return Some(Layout::Full);
        }
        if shape.iter().product::<usize>() == 1 && shape.len() <= out.len() {
            return Some(Layout::Scalar);
        }
        let c = channels?;
        // `[C]` (BatchNormalization parameters) or `[.., C, 1, ...]` aligned to axis 1.
        if shape == [c] {
            return Some(Layout::Channel);
        }
        let pad = out.len().checked_sub(shape.len())?;
        let dim = |d: usize| if d < pad { 1 } else { shape[d - pad] };
        let last = out.len() - 1;
        if (0..out.len()).all(|d| dim(d) == if d == 1 { c } else { 1 }) {
            return Some(Layout::Channel);
        }
        if (0..out.len()).all(|d| dim(d) == if d == last { 1 } else { out[d] }) {
            return Some(Layout::Row);
        }
        (0..out.len())
            .all(|d| dim(d) == if d == last { out[d] } else { 1 })
            .then_some(Layout::Last)
    }
}

/// Lanes per register (a block of outputs evaluated instruction by instruction: long enough
/// that the per-instruction dispatch is small next to the vector work).
const LANES: usize = 256;
/// Elements per parallel task.
const TASK_ELEMENTS: usize = 1 << 14;
/// Outputs below this count run on the calling thread.
const PARALLEL_MIN: usize = 1 << 15;

thread_local! {
    /// Per-thread chain registers, reused across calls.
    static REGISTERS: Cell<Vec<[f32; LANES]>> = const { Cell::new(Vec::new()) };
}

/// A run of instructions evaluated in one loop over a block's lanes (see the module doc); the
/// result lands in the row of its last instruction, and its other instructions' results are
/// read by no other instruction.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Pass {
    /// Instruction `j` alone.
    One(usize),
    /// Binary instructions `first` and `first + 1`: `(x op1 s1) op2 s2` with splat `s1`, `s2`;
    /// `x_left`: `x` is the first's left operand; `prev_left`: the first's result is the
    /// second's left operand.
    SplatPair {
        first: usize,
        x_left: bool,
        prev_left: bool,
    },
    /// Instructions `first .. first + 4`: `Add(y, c)`, `Clip(., lo, hi)`, `Mul(y, .)` (or
    /// `Mul(., y)` without `y_left`), `Div(., d)`, with splat `c`, `lo`, `hi`, `d`: hard swish
    /// as PP-LCNet's exporters write it.
    HardSwish { first: usize, y_left: bool },
    /// Binary instruction `j`, then Relu of its result.
    BinaryRelu(usize),
    /// BatchNormalization instruction `j`, then Relu of its result.
    BatchNormRelu(usize),
}

impl Pass {
    /// The instruction whose row receives the pass's result.
    fn last(self) -> usize {
        match self {
            Pass::One(j) => j,
            Pass::SplatPair { first, .. } => first + 1,
            Pass::HardSwish { first, .. } => first + 3,
            Pass::BinaryRelu(j) | Pass::BatchNormRelu(j) => j + 1,
        }
    }
}

/// Whether some operand takes one value per row of the last axis or per position along it.
fn by_last_axis(layouts: &[Layout]) -> bool {
    layouts
        .iter()
        .any(|l| matches!(l, Layout::Row | Layout::Last))
}

/// Whether operand `o` is one value for a whole block: a scalar, per-channel or per-row input
/// other than the mapped one.
fn is_splat_operand(o: &Operand, layouts: &[Layout], mapped: Option<usize>) -> bool {
    matches!(*o, Operand::Input(i)
        if Some(i) != mapped && matches!(layouts[i], Layout::Scalar | Layout::Channel | Layout::Row))
}

/// Groups `instrs` into passes: at each instruction, the longest [`Pass`] form that matches
/// (operand layouts as given), else the instruction alone.
fn plan_passes(instrs: &[Instr], layouts: &[Layout], mapped: Option<usize>) -> Vec<Pass> {
    let splat = |o: &Operand| is_splat_operand(o, layouts, mapped);
    // Reads of each instruction's result by later instructions.
    let mut reads = vec![0usize; instrs.len()];
    for o in instrs.iter().flat_map(|i| &i.operands) {
        if let Operand::Temp(t) = o {
            reads[*t] += 1;
        }
    }
    let only_next = |j: usize| reads[j] == 1;
    let is = |j: usize, want: fn(Kind) -> bool| instrs.get(j).is_some_and(|i| want(i.kind));
    let binary = |k: Kind| matches!(k, Kind::Binary(_));
    let op = |j: usize, want: Binary| matches!(instrs[j].kind, Kind::Binary(b) if b == want);
    let mut passes = Vec::new();
    let mut j = 0;
    while j < instrs.len() {
        let ops = |k: usize| &instrs[j + k].operands;
        let pass = if is(j, binary)
            && j + 3 < instrs.len()
            && op(j, Binary::Add)
            && matches!(instrs[j + 1].kind, Kind::Clip)
            && op(j + 2, Binary::Mul)
            && op(j + 3, Binary::Div)
            && !splat(&ops(0)[0])
            && splat(&ops(0)[1])
            && ops(1).len() == 3
            && ops(1)[0] == Operand::Temp(j)
            && ops(1)[1..].iter().all(splat)
            && (ops(2)[..] == [ops(0)[0], Operand::Temp(j + 1)]
                || ops(2)[..] == [Operand::Temp(j + 1), ops(0)[0]])
            && ops(3)[0] == Operand::Temp(j + 2)
            && splat(&ops(3)[1])
            && (j..j + 3).all(only_next)
        {
            Pass::HardSwish {
                first: j,
                y_left: ops(2)[0] == ops(0)[0],
            }
        } else if is(j, binary)
            && is(j + 1, binary)
            && only_next(j)
            && splat(&ops(0)[0]) != splat(&ops(0)[1])
            && ops(1).contains(&Operand::Temp(j))
            && ops(1).iter().any(splat)
        {
            Pass::SplatPair {
                first: j,
                x_left: !splat(&ops(0)[0]),
                prev_left: ops(1)[0] == Operand::Temp(j),
            }
        } else if is(j + 1, |k| matches!(k, Kind::Relu))
            && only_next(j)
            && ops(1)[0] == Operand::Temp(j)
            && let Some(pass) = match instrs[j].kind {
                Kind::Binary(_) => Some(Pass::BinaryRelu(j)),
                Kind::BatchNorm { .. } => Some(Pass::BatchNormRelu(j)),
                _ => None,
            }
        {
            pass
        } else {
            Pass::One(j)
        };
        j = pass.last() + 1;
        passes.push(pass);
    }
    passes
}

/// An operand's values for one block of lanes.
#[derive(Clone, Copy)]
enum Lanes<'a> {
    Each(&'a [f32]),
    Splat(f32),
}

impl<'a> Lanes<'a> {
    /// The per-lane values of an operand that `fast_layout` / `plan_passes` found full size.
    #[inline(always)]
    fn each(self) -> &'a [f32] {
        match self {
            Lanes::Each(x) => x,
            Lanes::Splat(_) => unreachable!("checked by fast_layout / plan_passes"),
        }
    }

    /// The one value of an operand that `fast_layout` / `plan_passes` found to be a splat.
    #[inline(always)]
    fn splat(self) -> f32 {
        match self {
            Lanes::Splat(v) => v,
            Lanes::Each(_) => unreachable!("checked by fast_layout / plan_passes"),
        }
    }
}

/// A chain input as [`ElementwiseChain::prepare`] takes it.
#[derive(Clone, Copy)]
pub(super) enum ChainInput<'a> {
    /// A tensor (the fast path needs f32).
    Tensor(&'a Tensor),
    /// The values [`Prepared::apply`] transforms in place: a full-size f32 tensor of this shape.
    Mapped(&'a [usize]),
}

/// A chain whose fast path applies to given inputs: operands resolved, ready to evaluate any
/// range of outputs, on any thread.
pub(super) struct Prepared<'a> {
    chain: &'a ElementwiseChain,
    shape: Vec<usize>,
    /// Per chain input, its values (empty for the mapped input).
    data: Vec<&'a [f32]>,
    layouts: Vec<Layout>,
    /// The chain input that [`Prepared::apply`] transforms in place.
    mapped: Option<usize>,
    /// Per instruction, per channel, `rstd` of BatchNormalization (empty for other kinds).
    rstd: Vec<Vec<f32>>,
    /// The instructions grouped into passes over the lanes, in order.
    passes: Vec<Pass>,
    /// The ISA of the thread that prepared the chain (worker threads run the same code path).
    isa: Isa,
    /// The length of the output's last axis (at least 1).
    last: usize,
}

impl ElementwiseChain {
    /// The fast path for these inputs (in body-input order), or `None` when it does not apply:
    /// a non-f32 tensor, an operand layout it does not take, or a mapped input that is not
    /// full size.
    pub(super) fn prepare<'a>(&'a self, inputs: &[ChainInput<'a>]) -> Option<Prepared<'a>> {
        let mut shapes = Vec::with_capacity(inputs.len());
        let mut data = Vec::with_capacity(inputs.len());
        let mut mapped = None;
        for (i, input) in inputs.iter().enumerate() {
            match *input {
                ChainInput::Tensor(t) => {
                    shapes.push(t.shape());
                    data.push(t.as_slice::<f32>().ok()?);
                }
                ChainInput::Mapped(shape) => {
                    shapes.push(shape);
                    data.push(&[][..]);
                    mapped = Some(i);
                }
            }
        }
        let (shape, layouts) = self.fast_layout(&shapes, false)?;
        // A mapped input comes in ranges of one channel row, which per-row and per-feature
        // operands do not follow.
        if mapped.is_some_and(|i| layouts[i] != Layout::Full || by_last_axis(&layouts)) {
            return None;
        }
        let rstd = self
            .instrs
            .iter()
            .map(|instr| match (instr.kind, instr.operands.get(4)) {
                (Kind::BatchNorm { epsilon }, Some(Operand::Input(var))) => {
                    data[*var].iter().map(|&v| rsqrt_eps(v, epsilon)).collect()
                }
                _ => Vec::new(),
            })
            .collect();
        let passes = plan_passes(&self.instrs, &layouts, mapped);
        let last = shape.last().copied().unwrap_or(1).max(1);
        Some(Prepared {
            chain: self,
            shape,
            data,
            layouts,
            mapped,
            rstd,
            passes,
            isa: Isa::active(),
            last,
        })
    }

    /// Runs the body node by node (the general case), on `inputs` in body-input order.
    pub(super) fn run_fallback(&self, inputs: Vec<Value>) -> Result<Vec<Value>> {
        self.fallback.run(inputs, RunOptions::default())
    }
}

impl Prepared<'_> {
    /// Whether some operand takes one value per channel, so that a range of outputs must lie
    /// within one channel row.
    fn per_channel(&self) -> bool {
        self.layouts.contains(&Layout::Channel)
            || self
                .chain
                .instrs
                .iter()
                .any(|i| matches!(i.kind, Kind::BatchNorm { .. }))
    }

    /// The length of the output's last axis when some operand takes one value per row or per
    /// position of it, so that a range of outputs must lie within one row of that axis.
    fn per_last_axis(&self) -> Option<usize> {
        by_last_axis(&self.layouts).then_some(self.last)
    }

    /// Evaluates outputs `start .. start + values.len()` (flat indices) into `values`, reading
    /// the mapped input (if any) from `values` first. With channel operands the range lies in
    /// one row of channel `channel`.
    fn run(&self, start: usize, channel: usize, values: &mut [f32]) {
        match self.isa {
            // SAFETY: `isa` came from `Isa::active()`, which only returns available ISAs.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { self.run_avx512(start, channel, values) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { self.run_avx2(start, channel, values) },
            _ => self.run_blocks(start, channel, values),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    /// # Safety
    /// The CPU supports AVX-512F.
    unsafe fn run_avx512(&self, start: usize, channel: usize, values: &mut [f32]) {
        self.run_blocks(start, channel, values)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    /// # Safety
    /// The CPU supports AVX2.
    unsafe fn run_avx2(&self, start: usize, channel: usize, values: &mut [f32]) {
        self.run_blocks(start, channel, values)
    }

    /// The lanes `at .. at + main.len()` of operand `o` (`main`: the mapped input's,
    /// `temps`: the earlier instructions' results).
    #[inline(always)]
    fn operand<'s>(
        &'s self,
        o: &Operand,
        main: &'s [f32],
        temps: &'s [[f32; LANES]],
        at: usize,
        channel: usize,
    ) -> Lanes<'s> {
        let n = main.len();
        match *o {
            Operand::Input(i) if Some(i) == self.mapped => Lanes::Each(main),
            Operand::Input(i) => match self.layouts[i] {
                Layout::Full => Lanes::Each(&self.data[i][at..at + n]),
                Layout::Scalar => Lanes::Splat(self.data[i][0]),
                Layout::Channel => Lanes::Splat(self.data[i][channel]),
                // The range lies within one row of the last axis (`Prepared::eval`).
                Layout::Row => Lanes::Splat(self.data[i][at / self.last]),
                Layout::Last => {
                    let from = at % self.last;
                    Lanes::Each(&self.data[i][from..from + n])
                }
            },
            Operand::Temp(t) => Lanes::Each(&temps[t][..n]),
            Operand::Absent => unreachable!("checked by fast_layout"),
        }
    }

    /// [`Prepared::run`]'s body, `LANES` lanes at a time, pass by pass (contract:
    /// elementwise-fusion).
    #[inline(always)]
    fn run_blocks(&self, start: usize, channel: usize, values: &mut [f32]) {
        let instrs = &self.chain.instrs;
        // Registers: one row per instruction (thread-local scratch, so that short ranges do not
        // pay for clearing it); a pass writes the row of its last instruction, and the mapped
        // input's lanes are read where they are.
        let mut scratch = REGISTERS.take();
        scratch.resize(instrs.len(), [0.0; LANES]);
        let regs = &mut scratch[..];
        for (b, block) in values.chunks_mut(LANES).enumerate() {
            let n = block.len();
            let at = start + b * LANES;
            let main: &[f32] = block;
            for &pass in &self.passes {
                let last = pass.last();
                let (before, rest) = regs.split_at_mut(last);
                let dst = &mut rest[0][..n];
                let lanes = |o: &Operand| self.operand(o, main, before, at, channel);
                let each = |o: &Operand| lanes(o).each();
                let splat = |o: &Operand| lanes(o).splat();
                match pass {
                    Pass::One(j) => self.run_instr(j, &lanes, dst, channel),
                    Pass::SplatPair {
                        first: j,
                        x_left,
                        prev_left,
                    } => {
                        let (first, second) = (&instrs[j], &instrs[j + 1]);
                        let (Kind::Binary(op1), Kind::Binary(op2)) = (first.kind, second.kind)
                        else {
                            unreachable!("checked by plan_passes")
                        };
                        let [x, s1] = if x_left { [0, 1] } else { [1, 0] };
                        splat_pair(
                            each(&first.operands[x]),
                            (op1, splat(&first.operands[s1]), !x_left),
                            (
                                op2,
                                splat(&second.operands[usize::from(prev_left)]),
                                !prev_left,
                            ),
                            dst,
                        );
                    }
                    Pass::HardSwish { first: j, y_left } => {
                        let (add, clip, div) = (&instrs[j], &instrs[j + 1], &instrs[j + 3]);
                        hard_swish_ops(
                            each(&add.operands[0]),
                            splat(&add.operands[1]),
                            (splat(&clip.operands[1]), splat(&clip.operands[2])),
                            y_left,
                            splat(&div.operands[1]),
                            dst,
                        );
                    }
                    Pass::BinaryRelu(j) => {
                        let Kind::Binary(op) = instrs[j].kind else {
                            unreachable!("checked by plan_passes")
                        };
                        let ops = &instrs[j].operands;
                        binary_lanes(op, true, lanes(&ops[0]), lanes(&ops[1]), dst);
                    }
                    Pass::BatchNormRelu(j) => batch_norm_lanes(
                        each(&instrs[j].operands[0]),
                        self.batch_norm_params(j, channel),
                        true,
                        dst,
                    ),
                }
            }
            block.copy_from_slice(&regs[instrs.len() - 1][..n]);
        }
        REGISTERS.set(scratch);
    }

    /// Instruction `j` alone over `dst`'s lanes (`lanes` resolves its operands).
    #[inline(always)]
    fn run_instr<'s>(
        &self,
        j: usize,
        lanes: &impl Fn(&Operand) -> Lanes<'s>,
        dst: &mut [f32],
        channel: usize,
    ) {
        let instr = &self.chain.instrs[j];
        let each = |o: &Operand| lanes(o).each();
        match instr.kind {
            Kind::Binary(op) => binary_lanes(
                op,
                false,
                lanes(&instr.operands[0]),
                lanes(&instr.operands[1]),
                dst,
            ),
            Kind::Relu => {
                for (d, &v) in dst.iter_mut().zip(each(&instr.operands[0])) {
                    *d = f32_unary(Unary::Relu, v);
                }
            }
            Kind::Activation(a) => a.eval_slice(each(&instr.operands[0]), dst),
            Kind::Clip => {
                let bound = |k: usize| match instr.operands.get(k) {
                    Some(o @ Operand::Input(_)) => Some(lanes(o).splat()),
                    _ => None,
                };
                clip_lanes(each(&instr.operands[0]), bound(1), bound(2), dst);
            }
            Kind::BatchNorm { .. } => batch_norm_lanes(
                each(&instr.operands[0]),
                self.batch_norm_params(j, channel),
                false,
                dst,
            ),
        }
    }

    /// BatchNormalization instruction `j`'s `(scale, bias, mean, rstd)` for `channel`.
    #[inline(always)]
    fn batch_norm_params(&self, j: usize, channel: usize) -> (f32, f32, f32, f32) {
        let param = |k: usize| match self.chain.instrs[j].operands[k] {
            Operand::Input(i) => self.data[i][channel],
            _ => unreachable!("checked by fast_layout"),
        };
        (param(1), param(2), param(3), self.rstd[j][channel])
    }

    /// The whole output as a new tensor (no mapped input), in parallel over blocks.
    fn eval(&self) -> Result<Tensor> {
        let shape = &self.shape;
        let numel: usize = shape.iter().product();
        // With channel operands, work goes by rows of one channel, with per-row or per-feature
        // operands by rows of the last axis (within a channel row: that row's length divides
        // the last axis's, or is 1); otherwise by flat blocks.
        let per_channel = self.per_channel();
        let inner = if per_channel {
            shape[2..].iter().product::<usize>().max(1)
        } else {
            1
        };
        let channels = if per_channel { shape[1] } else { 1 };
        let last_axis = self.per_last_axis();
        let row = match (last_axis, per_channel) {
            (Some(last), true) => last.min(inner),
            (Some(last), false) => last,
            (None, true) => inner,
            (None, false) => TASK_ELEMENTS,
        };
        let segmented = per_channel || last_axis.is_some();
        // Every element is written by its block's pass over the chain.
        let mut out = RecycledF32::take(numel);
        let block = if segmented {
            row * TASK_ELEMENTS.div_ceil(row)
        } else {
            TASK_ELEMENTS
        };
        let task = |(b, chunk): (usize, &mut [f32])| {
            let start = b * block;
            for (r, piece) in chunk.chunks_mut(row).enumerate() {
                let at = start + r * row;
                let channel = if per_channel {
                    at / inner % channels
                } else {
                    0
                };
                self.run(at, channel, piece);
            }
        };
        if numel >= PARALLEL_MIN {
            out.par_chunks_mut(block).enumerate().for_each(task);
        } else {
            out.chunks_mut(block).enumerate().for_each(task);
        }
        Ok(Tensor::from_recycled(shape.clone(), out)?)
    }
}

impl OutputMap for Prepared<'_> {
    /// `values` (the mapped input at `start ..`, all in channel `channel`) become the chain's
    /// outputs there.
    fn apply(&self, channel: usize, start: usize, values: &mut [f32]) {
        self.run(start, channel, values);
    }
}

/// `dst = a op b` lane by lane (then Relu with `relu`), one loop per operand layout so that
/// each vectorises.
#[inline(always)]
fn binary_lanes(op: Binary, relu: bool, a: Lanes, b: Lanes, dst: &mut [f32]) {
    macro_rules! hoisted {
        ($($variant:ident),*) => {
            match (op, relu) {
                $(
                    (Binary::$variant, false) => {
                        binary_loop(a, b, dst, |p, q| f32_binary(Binary::$variant, p, q))
                    }
                    (Binary::$variant, true) => binary_loop(a, b, dst, |p, q| {
                        f32_unary(Unary::Relu, f32_binary(Binary::$variant, p, q))
                    }),
                )*
                (_, false) => binary_loop(a, b, dst, |p, q| f32_binary(op, p, q)),
                (_, true) => {
                    binary_loop(a, b, dst, |p, q| f32_unary(Unary::Relu, f32_binary(op, p, q)))
                }
            }
        };
    }
    hoisted!(Add, Sub, Mul, Div)
}

#[inline(always)]
fn binary_loop(a: Lanes, b: Lanes, dst: &mut [f32], f: impl Fn(f32, f32) -> f32) {
    match (a, b) {
        (Lanes::Each(a), Lanes::Each(b)) => {
            for ((d, &p), &q) in dst.iter_mut().zip(a).zip(b) {
                *d = f(p, q);
            }
        }
        (Lanes::Each(a), Lanes::Splat(q)) => {
            for (d, &p) in dst.iter_mut().zip(a) {
                *d = f(p, q);
            }
        }
        (Lanes::Splat(p), Lanes::Each(b)) => {
            for (d, &q) in dst.iter_mut().zip(b) {
                *d = f(p, q);
            }
        }
        (Lanes::Splat(p), Lanes::Splat(q)) => dst.fill(f(p, q)),
    }
}

/// `dst = (x op1 s1) op2 s2` lane by lane, each constant on the left where its flag says: two
/// binary instructions whose constants are splats, in one loop.
#[inline(always)]
fn splat_pair(
    x: &[f32],
    (op1, s1, s1_left): (Binary, f32, bool),
    (op2, s2, s2_left): (Binary, f32, bool),
    dst: &mut [f32],
) {
    // The operand order as a select of two loop invariants, so that each of the 16 operation
    // pairs is one loop (no branch inside it).
    #[inline(always)]
    fn ordered(v: f32, s: f32, s_left: bool) -> (f32, f32) {
        if s_left { (s, v) } else { (v, s) }
    }
    macro_rules! pairs {
        ($($a:ident),*) => {
            match op1 {
                $(Binary::$a => pairs!(@second $a; Add, Sub, Mul, Div),)*
                _ => unreachable!("chains hold Add, Sub, Mul and Div only"),
            }
        };
        (@second $a:ident; $($b:ident),*) => {
            match op2 {
                $(Binary::$b => {
                    for (d, &v) in dst.iter_mut().zip(x) {
                        let (p, q) = ordered(v, s1, s1_left);
                        let t = f32_binary(Binary::$a, p, q);
                        let (p, q) = ordered(t, s2, s2_left);
                        *d = f32_binary(Binary::$b, p, q);
                    }
                })*
                _ => unreachable!("chains hold Add, Sub, Mul and Div only"),
            }
        };
    }
    pairs!(Add, Sub, Mul, Div)
}

/// Hard swish written out as four instructions, in one loop: `t = y + c`,
/// `t = min(max(t, lo), hi)` (Clip), `t = y * t` (or `t * y` without `y_left`), `t / d`.
#[inline(always)]
fn hard_swish_ops(y: &[f32], c: f32, (lo, hi): (f32, f32), y_left: bool, d: f32, dst: &mut [f32]) {
    for (out, &v) in dst.iter_mut().zip(y) {
        let t = f32_binary(Binary::Add, v, c);
        let t = clip(t, Some(lo), Some(hi));
        let (p, q) = if y_left { (v, t) } else { (t, v) };
        let t = f32_binary(Binary::Mul, p, q);
        *out = f32_binary(Binary::Div, t, d);
    }
}

/// Clip of one value as the Clip op computes it: `max(v, lo)` then `min(., hi)`, each bound
/// only when given.
#[inline(always)]
fn clip(v: f32, lo: Option<f32>, hi: Option<f32>) -> f32 {
    let v = lo.map_or(v, |l| f32_binary(Binary::Max, v, l));
    hi.map_or(v, |h| f32_binary(Binary::Min, v, h))
}

#[inline(always)]
fn clip_lanes(x: &[f32], lo: Option<f32>, hi: Option<f32>, dst: &mut [f32]) {
    for (d, &v) in dst.iter_mut().zip(x) {
        *d = clip(v, lo, hi);
    }
}

/// BatchNormalization in inference mode lane by lane, `((x - mean) * rstd) * scale + bias`
/// (then Relu with `relu`).
#[inline(always)]
fn batch_norm_lanes(
    x: &[f32],
    (scale, bias, mean, rstd): (f32, f32, f32, f32),
    relu: bool,
    dst: &mut [f32],
) {
    let lanes = dst.iter_mut().zip(x);
    if relu {
        for (d, &s) in lanes {
            *d = f32_unary(Unary::Relu, ((s - mean) * rstd) * scale + bias);
        }
    } else {
        for (d, &s) in lanes {
            *d = ((s - mean) * rstd) * scale + bias;
        }
    }
}

impl Op for ElementwiseChain {
    fn infer(&self, _inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![self.output_type.clone()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        if inputs.len() != self.inputs {
            bail!(
                "{OP_TYPE}: expected {} inputs, got {}",
                self.inputs,
                inputs.len()
            );
        }
        let tensors: Option<Vec<ChainInput>> = (0..self.inputs)
            .map(|i| Some(ChainInput::Tensor(inputs.value(i).ok()?.as_tensor().ok()?)))
            .collect();
        if let Some(prepared) = tensors.and_then(|t| self.prepare(&t)) {
            return Ok(vec![prepared.eval()?.into()]);
        }
        let fed = (0..self.inputs)
            .map(|i| inputs.value(i).cloned())
            .collect::<Result<Vec<_>>>()?;
        self.run_fallback(fed)
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Shaped)
    }

    /// The fast path's chain (f32 operands are the backend's check); other layouts run the
    /// body node by node on the CPU.
    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], _inputs: &Inputs) -> Result<ShapedKernel> {
        let shapes = (0..self.inputs)
            .map(|i| input_shape(shapes, i))
            .collect::<Result<Vec<_>>>()?;
        Ok(ShapedKernel::Chain(self.chain_kernel(&shapes)?))
    }
}

impl ElementwiseChain {
    /// The device form of the fast path for chain inputs of these shapes, or an error when the
    /// fast path does not take them.
    pub(super) fn chain_kernel(&self, shapes: &[&[usize]]) -> Result<ChainKernel> {
        let Some((shape, layouts)) = self.fast_layout(shapes, true) else {
            bail!("{OP_TYPE}: operands outside the fused layouts");
        };
        let steps = self
            .instrs
            .iter()
            .map(|instr| ChainStep {
                op: match instr.kind {
                    Kind::Binary(Binary::Add) => ChainOp::Binary(BinaryKernel::Add),
                    Kind::Binary(Binary::Sub) => ChainOp::Binary(BinaryKernel::Sub),
                    Kind::Binary(Binary::Mul) => ChainOp::Binary(BinaryKernel::Mul),
                    Kind::Binary(Binary::Div) => ChainOp::Binary(BinaryKernel::Div),
                    Kind::Binary(other) => unreachable!("{other:?} is not fusable"),
                    Kind::Relu => ChainOp::Relu,
                    Kind::Clip => ChainOp::Clip,
                    Kind::BatchNorm { epsilon } => ChainOp::BatchNorm { epsilon },
                    Kind::Activation(a) => ChainOp::Activation(a),
                },
                operands: instr.operands.clone(),
            })
            .collect();
        Ok(ChainKernel {
            shape,
            layouts,
            steps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instr(kind: Kind, operands: &[Operand]) -> Instr {
        Instr {
            kind,
            operands: operands.to_vec(),
        }
    }

    /// PP-OCRv4's chain (learnable affine, hard swish written out, learnable affine) groups into
    /// three passes; the same instructions with a full-size constant, or with an intermediate
    /// read twice, stay apart where the forms no longer hold.
    #[test]
    fn passes_group_the_forms_and_only_them() {
        use Operand::{Input, Temp};
        let (add, mul, div) = (
            Kind::Binary(Binary::Add),
            Kind::Binary(Binary::Mul),
            Kind::Binary(Binary::Div),
        );
        // Inputs: 0 the mapped convolution output, 1 per channel, 2..=5 scalars, 6 full size.
        let layouts = [
            Layout::Full,
            Layout::Channel,
            Layout::Scalar,
            Layout::Scalar,
            Layout::Scalar,
            Layout::Scalar,
            Layout::Full,
        ];
        let chain = |scale: usize| {
            vec![
                instr(mul, &[Input(scale), Input(0)]),
                instr(add, &[Temp(0), Input(2)]),
                instr(add, &[Temp(1), Input(3)]),
                instr(Kind::Clip, &[Temp(2), Input(4), Input(5)]),
                instr(mul, &[Temp(1), Temp(3)]),
                instr(div, &[Temp(4), Input(5)]),
                instr(mul, &[Temp(5), Input(1)]),
                instr(add, &[Temp(6), Input(2)]),
            ]
        };
        assert_eq!(
            plan_passes(&chain(1), &layouts, Some(0)),
            [
                Pass::SplatPair {
                    first: 0,
                    x_left: false,
                    prev_left: true
                },
                Pass::HardSwish {
                    first: 2,
                    y_left: true
                },
                Pass::SplatPair {
                    first: 6,
                    x_left: true,
                    prev_left: true
                },
            ]
        );
        // A full-size scale: the first pair is two single instructions.
        assert_eq!(
            plan_passes(&chain(6), &layouts, Some(0))[..2],
            [Pass::One(0), Pass::One(1)]
        );
        // The clipped value read again after the Div: no hard swish pass.
        let mut reread = chain(1);
        reread[7] = instr(add, &[Temp(6), Temp(3)]);
        let passes = plan_passes(&reread, &layouts, Some(0));
        assert!(!passes.iter().any(|p| matches!(p, Pass::HardSwish { .. })));
        // Every instruction lands in exactly one pass, in order.
        let covered: usize = passes.iter().map(|p| p.last() + 1).max().unwrap();
        assert_eq!(covered, reread.len());
        // BatchNormalization or a binary instruction, then Relu.
        let bn = Kind::BatchNorm { epsilon: 1e-5 };
        let relu_chain = [
            instr(bn, &[Input(0), Input(1), Input(1), Input(1), Input(1)]),
            instr(Kind::Relu, &[Temp(0)]),
            instr(add, &[Temp(1), Input(6)]),
            instr(Kind::Relu, &[Temp(2)]),
        ];
        assert_eq!(
            plan_passes(&relu_chain, &layouts, Some(0)),
            [Pass::BatchNormRelu(0), Pass::BinaryRelu(2)]
        );
    }
}
