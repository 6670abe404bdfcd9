//! Recurrent layers: RNN, GRU and LSTM (opsets 7 to 22), forward, reverse or bidirectional,
//! with sequence lengths, initial states, biases, LSTM peepholes, GRU's
//! `linear_before_reset`, `clip`, both layouts and the activation functions samebits defines as
//! elementwise ops (the same functions: Sigmoid, Tanh, Relu, HardSigmoid, LeakyRelu,
//! ThresholdedRelu, Elu, Softsign, Softplus).
//!
//! Implements contract section `recurrent`: each gate's pre-activation is
//! `canonical-dot(x_t, W row) + canonical-dot(h, R row)`, then the peephole term, `Wb` and `Rb`
//! added left to right, clipped, then the activation; the state updates are f32 operations in the
//! order written there. Sequences, directions and batch rows are independent, so they run in
//! parallel without changing a bit. f16 / bf16 compute in f32 and round once at the store.

use super::activation::Elementwise;
use super::elementwise::{Unary, f32_unary};
use crate::device_kernel::{
    RECURRENT_STAGE_COLS, RECURRENT_STAGE_ROWS, SOURCE_TABLE_EXACT, SourceKernel, SourceLaunch,
};
use crate::registry::Registry;
use crate::staging::{f32_values, store_f32};
use crate::{
    BuildContext, DeviceKernel, Inputs, InputsExt, NodeArgs, Op, Result, ShapedKernel, bail,
    unsupported,
};
use rayon::prelude::*;
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{DType, Value, ValueType};
use samebits_kernels::{MatRef, gemm_f32};
use samebits_math::{Activation, UnaryFn};

pub fn register(r: &mut Registry) {
    r.register("", "RNN", |ctx| recurrent(ctx, Cell::Rnn));
    r.register("", "GRU", |ctx| {
        let lbr = NodeArgs::new(ctx.node).int_or("linear_before_reset", 0)? != 0;
        recurrent(
            ctx,
            Cell::Gru {
                linear_before_reset: lbr,
            },
        )
    });
    r.register("", "LSTM", |ctx| recurrent(ctx, Cell::Lstm));
    r.register_kernel_source("recurrent.cu", include_str!("../../kernels/recurrent.cu"));
}

/// An activation function of a recurrent cell: the elementwise op of that name.
#[derive(Clone, Copy, Debug)]
enum Function {
    Elementwise(Elementwise),
    Relu,
}

impl Function {
    /// The function `name` (case-insensitive, as ONNX Runtime reads them) with its optional
    /// alpha and beta (the elementwise op's defaults otherwise).
    fn named(name: &str, alpha: Option<f32>, beta: Option<f32>) -> Result<Function> {
        let e = |e: Elementwise| Ok(Function::Elementwise(e));
        match name.to_ascii_lowercase().as_str() {
            "relu" => Ok(Function::Relu),
            "sigmoid" => e(Elementwise::Composite(Activation::Sigmoid)),
            "tanh" => e(Elementwise::Math(UnaryFn::Tanh)),
            "hardsigmoid" => e(Elementwise::Composite(Activation::HardSigmoid {
                alpha: alpha.unwrap_or(0.2),
                beta: beta.unwrap_or(0.5),
            })),
            "leakyrelu" => e(Elementwise::Composite(Activation::LeakyRelu {
                alpha: alpha.unwrap_or(0.01),
            })),
            "thresholdedrelu" => e(Elementwise::ThresholdedRelu {
                alpha: alpha.unwrap_or(1.0),
            }),
            "elu" => e(Elementwise::Composite(Activation::Elu {
                alpha: alpha.unwrap_or(1.0),
            })),
            "softsign" => e(Elementwise::Softsign),
            "softplus" => e(Elementwise::Composite(Activation::Softplus)),
            _ => bail!(
                "{name:?} is not supported (Sigmoid, Tanh, Relu, HardSigmoid, LeakyRelu, \
                 ThresholdedRelu, Elu, Softsign, Softplus)"
            ),
        }
    }

    fn eval(self, x: f32) -> f32 {
        match self {
            Function::Elementwise(e) => e.eval_f32(x),
            Function::Relu => f32_unary(Unary::Relu, x),
        }
    }

    /// The function as `kernels/recurrent.cu` reads it, `(code, p0, p1)`: code >= 0 the
    /// samebits-math activation of that [`Activation::index`] with its parameters, -1 Relu,
    /// -2 Tanh; `None` for the functions the device does not evaluate.
    fn device_code(self) -> Option<[f32; 3]> {
        match self {
            Function::Relu => Some([-1.0, 0.0, 0.0]),
            Function::Elementwise(Elementwise::Math(UnaryFn::Tanh)) => Some([-2.0, 0.0, 0.0]),
            Function::Elementwise(Elementwise::Composite(a)) => {
                let (p0, p1) = a.params();
                Some([a.index() as f32, p0, p1])
            }
            Function::Elementwise(_) => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cell {
    Rnn,
    Gru { linear_before_reset: bool },
    Lstm,
}

impl Cell {
    /// Gates per unit (rows of W and R per hidden unit).
    fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru { .. } => 3,
            Cell::Lstm => 4,
        }
    }

    /// The activation functions of one direction, by default.
    fn default_activations(self) -> &'static [&'static str] {
        match self {
            Cell::Rnn => &["Tanh"],
            Cell::Gru { .. } => &["Sigmoid", "Tanh"],
            Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
        }
    }

    fn name(self) -> &'static str {
        match self {
            Cell::Rnn => "RNN",
            Cell::Gru { .. } => "GRU",
            Cell::Lstm => "LSTM",
        }
    }

    /// The cell as `kernels/recurrent.cu` reads it.
    fn device_code(self) -> i64 {
        match self {
            Cell::Rnn => 0,
            Cell::Gru {
                linear_before_reset: false,
            } => 1,
            Cell::Gru {
                linear_before_reset: true,
            } => 2,
            Cell::Lstm => 3,
        }
    }
}

/// Input positions of the recurrent ops (ONNX): X, W, R, B, sequence_lens, initial_h,
/// initial_c (LSTM), P (LSTM).
const BIAS: usize = 3;
const LENGTHS: usize = 4;
const INITIAL_H: usize = 5;
const INITIAL_C: usize = 6;
const PEEPHOLES: usize = 7;

/// The largest hidden size the device kernel takes: LSTM's two products per gate row and four
/// state vectors (12 floats per unit) beside the warps' staging areas
/// ([`DEVICE_STAGE_FLOATS`] each) fit the 48 KiB of shared memory a block may ask for.
const DEVICE_HIDDEN_MAX: usize = 512;
/// Threads of the device kernel's blocks (at most; fewer for fewer gate rows).
const DEVICE_THREADS: usize = 256;
/// Floats of one warp's staging area in `kernels/recurrent.cu`: its rows of pieces, each with
/// one padding column.
const DEVICE_STAGE_FLOATS: usize = RECURRENT_STAGE_ROWS * (RECURRENT_STAGE_COLS + 1);

#[derive(Debug)]
struct Recurrent {
    cell: Cell,
    /// The directions run: forward and/or reverse, in output order.
    reverse: Vec<bool>,
    hidden_size: Option<usize>,
    /// `layout = 1`: batch first.
    batch_first: bool,
    clip: Option<f32>,
    /// Per direction, the cell's activation functions in order (f, g, h).
    activations: Vec<Vec<Function>>,
}

fn recurrent(ctx: &BuildContext, cell: Cell) -> Result<Box<dyn Op>> {
    let op = cell.name();
    let args = NodeArgs::new(ctx.node);
    let reverse = match args.string_or("direction", "forward".into())?.as_str() {
        "forward" => vec![false],
        "reverse" => vec![true],
        "bidirectional" => vec![false, true],
        other => bail!(
            "{op}: attribute \"direction\" must be forward, reverse or bidirectional, got {other:?}"
        ),
    };
    if cell == Cell::Lstm && args.int_or("input_forget", 0)? != 0 {
        unsupported!("LSTM with input_forget = 1");
    }
    let hidden_size = match args.int("hidden_size")? {
        None => None,
        Some(h) if h > 0 => Some(h as usize),
        Some(h) => bail!("{op}: attribute \"hidden_size\" must be positive, got {h}"),
    };
    let clip = match args.float("clip")? {
        Some(c) if c.is_nan() || c <= 0.0 => {
            bail!("{op}: attribute \"clip\" must be positive, got {c}")
        }
        c => c,
    };
    let per_direction = cell.default_activations().len();
    let names = args.strings_or(
        "activations",
        cell.default_activations()
            .iter()
            .map(|s| s.to_string())
            .collect(),
    )?;
    let alphas = args.floats_or("activation_alpha", Vec::new())?;
    let betas = args.floats_or("activation_beta", Vec::new())?;
    let functions = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            Function::named(name, alphas.get(i).copied(), betas.get(i).copied()).map_err(|e| {
                crate::OpError::Invalid(format!("{op}: attribute \"activations\": {e}"))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let activations = match functions.len() {
        n if n == per_direction => vec![functions; reverse.len()],
        n if n == per_direction * reverse.len() => functions
            .chunks(per_direction)
            .map(<[Function]>::to_vec)
            .collect(),
        n => bail!(
            "{op}: attribute \"activations\" lists {n} functions; {} directions need {} each",
            reverse.len(),
            per_direction
        ),
    };
    Ok(Box::new(Recurrent {
        cell,
        reverse,
        hidden_size,
        batch_first: args.int_or("layout", 0)? != 0,
        clip,
        activations,
    }))
}

/// One direction's recurrence weights: R `[G * H, H]`, the biases `[G * H]` each, and LSTM's
/// peepholes `[3 * H]` (input, output, forget).
struct Weights<'a> {
    r: &'a [f32],
    wb: &'a [f32],
    rb: &'a [f32],
    p: &'a [f32],
}

/// `out[i, r] = canonical-dot(row i of a, row r of m)` for `count` rows of `a` (`len` long,
/// `stride` apart from `offset`) and the `rows` rows of `m` (`[rows, len]`): the canonical GEMM,
/// the same bits as one `canonical_dot` per output (contract `gemm`).
fn products(
    (a, offset, stride): (&[f32], usize, usize),
    count: usize,
    m: &[f32],
    rows: usize,
    len: usize,
) -> Vec<f32> {
    let mut out = vec![0.0f32; count * rows];
    if count == 0 || rows == 0 {
        return out;
    }
    let a = MatRef {
        data: a,
        offset,
        batch_stride: 0,
        row_stride: stride,
        col_stride: 1,
    };
    let m = MatRef::row_major(m, rows, len).transposed();
    gemm_f32(1, count, rows, len, a, m, &mut out);
    out
}

/// One sequence of one direction: its weights, its inputs' products with W and its length.
struct Sequence<'a> {
    direction: usize,
    weights: Weights<'a>,
    hidden: usize,
    /// `x_t · W` for every step t, `[len, rows]` in time order.
    xw: Vec<f32>,
    len: usize,
}

impl Recurrent {
    /// The pre-activation of row `row` (gate `row / H`, unit `row % H`) from its products
    /// `xw = x·W row` and `hr = h·R row`: then `extra` (the peephole term, or 0 where there is
    /// none), `Wb` and `Rb` added left to right, clipped.
    fn pre(&self, w: &Weights, row: usize, (xw, hr): (f32, f32), extra: f32) -> f32 {
        self.clip((((xw + hr) + extra) + w.wb[row]) + w.rb[row])
    }

    fn clip(&self, v: f32) -> f32 {
        match self.clip {
            Some(c) => v.clamp(-c, c),
            None => v,
        }
    }

    /// Runs one sequence from the `initial` hidden and cell states: returns its hidden state
    /// after each step (in time order, `[len, hidden]`), the final hidden state and cell state.
    fn run_sequence(
        &self,
        sequence: &Sequence,
        initial: (Vec<f32>, Vec<f32>),
    ) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let Sequence {
            direction,
            ref weights,
            hidden: hs,
            ref xw,
            len,
        } = *sequence;
        let w = weights;
        let (mut h, mut c) = initial;
        let f = &self.activations[direction];
        let rows = self.cell.gates() * hs;
        // GRU without linear_before_reset takes its candidate rows' R product with r * h.
        let h_rows = match self.cell {
            Cell::Gru {
                linear_before_reset: false,
            } => 2 * hs,
            _ => rows,
        };
        let steps: Vec<usize> = match self.reverse[direction] {
            false => (0..len).collect(),
            true => (0..len).rev().collect(),
        };
        let mut ys = vec![0.0f32; len * hs];
        let mut next = vec![0.0f32; hs];
        let mut next_c = vec![0.0f32; hs];
        for t in steps {
            let xw = &xw[t * rows..][..rows];
            let hr = products((&h, 0, hs), 1, &w.r[..h_rows * hs], h_rows, hs);
            let at = |row: usize| (xw[row], hr[row]);
            match self.cell {
                Cell::Rnn => {
                    for (j, n) in next.iter_mut().enumerate() {
                        *n = f[0].eval(self.pre(w, j, at(j), 0.0));
                    }
                }
                Cell::Gru {
                    linear_before_reset,
                } => {
                    let z: Vec<f32> = (0..hs)
                        .map(|j| f[0].eval(self.pre(w, j, at(j), 0.0)))
                        .collect();
                    let r: Vec<f32> = (0..hs)
                        .map(|j| f[0].eval(self.pre(w, hs + j, at(hs + j), 0.0)))
                        .collect();
                    let rh: Vec<f32> = r.iter().zip(&h).map(|(r, h)| r * h).collect();
                    let rhr = match linear_before_reset {
                        true => Vec::new(),
                        false => products((&rh, 0, hs), 1, &w.r[h_rows * hs..], hs, hs),
                    };
                    for (j, n) in next.iter_mut().enumerate() {
                        let row = 2 * hs + j;
                        let pre = match linear_before_reset {
                            true => self.clip((xw[row] + r[j] * (hr[row] + w.rb[row])) + w.wb[row]),
                            false => self.pre(w, row, (xw[row], rhr[j]), 0.0),
                        };
                        let candidate = f[1].eval(pre);
                        *n = (1.0 - z[j]) * candidate + z[j] * h[j];
                    }
                }
                Cell::Lstm => {
                    let peep = |k: usize, j: usize, state: f32| match w.p.is_empty() {
                        true => 0.0,
                        false => w.p[k * hs + j] * state,
                    };
                    for j in 0..hs {
                        let i = f[0].eval(self.pre(w, j, at(j), peep(0, j, c[j])));
                        let row = 2 * hs + j;
                        let forget = f[0].eval(self.pre(w, row, at(row), peep(2, j, c[j])));
                        let row = 3 * hs + j;
                        let candidate = f[1].eval(self.pre(w, row, at(row), 0.0));
                        let cell = forget * c[j] + i * candidate;
                        let row = hs + j;
                        let o = f[0].eval(self.pre(w, row, at(row), peep(1, j, cell)));
                        next[j] = o * f[2].eval(cell);
                        next_c[j] = cell;
                    }
                    c.copy_from_slice(&next_c);
                }
            }
            h.copy_from_slice(&next);
            ys[t * hs..][..hs].copy_from_slice(&h);
        }
        (ys, h, c)
    }
}

/// The sizes of one evaluation, checked against every input's shape.
#[derive(Clone, Copy, Debug)]
struct Layer {
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    directions: usize,
}

impl Layer {
    /// Y's shape.
    fn y_shape(&self, batch_first: bool) -> Vec<usize> {
        match batch_first {
            false => vec![self.seq, self.directions, self.batch, self.hidden],
            true => vec![self.batch, self.seq, self.directions, self.hidden],
        }
    }

    /// The shape of the initial and final states (Y_h, Y_c).
    fn state_shape(&self, batch_first: bool) -> Vec<usize> {
        match batch_first {
            false => vec![self.directions, self.batch, self.hidden],
            true => vec![self.batch, self.directions, self.hidden],
        }
    }
}

impl Recurrent {
    /// The layer's sizes from the inputs' shapes (`None`: omitted), every input checked.
    fn layer(&self, shapes: &[Option<&[usize]>]) -> Result<Layer> {
        let op = self.cell.name();
        let shape = |i: usize| shapes.get(i).copied().flatten();
        let (Some(x), Some(w), Some(r)) = (shape(0), shape(1), shape(2)) else {
            bail!("{op}: inputs X, W and R are required");
        };
        let directions = self.reverse.len();
        let gates = self.cell.gates();
        let [a, b, input] = *x else {
            bail!("{op}: X must have rank 3, got shape {x:?}");
        };
        let (seq, batch) = if self.batch_first { (b, a) } else { (a, b) };
        let hidden = r.last().copied().unwrap_or(0);
        if w != [directions, gates * hidden, input]
            || r != [directions, gates * hidden, hidden]
            || self.hidden_size.is_some_and(|h| h != hidden)
        {
            bail!(
                "{op}: W {w:?} and R {r:?} must be [{directions}, {gates} * hidden, {input}] and \
                 [{directions}, {gates} * hidden, hidden] (hidden_size {:?})",
                self.hidden_size
            );
        }
        let layer = Layer {
            seq,
            batch,
            input,
            hidden,
            directions,
        };
        let rows = gates * hidden;
        let mut expected = vec![
            (BIAS, "B", vec![directions, 2 * rows]),
            (INITIAL_H, "initial_h", layer.state_shape(self.batch_first)),
        ];
        if self.cell == Cell::Lstm {
            expected.push((INITIAL_C, "initial_c", layer.state_shape(self.batch_first)));
            expected.push((PEEPHOLES, "P", vec![directions, 3 * hidden]));
        }
        for (i, name, want) in expected {
            if let Some(got) = shape(i)
                && got != want
            {
                bail!("{op}: {name} must be {want:?}, got {got:?}");
            }
        }
        check_tensor_size(
            &format!("{op} output Y"),
            &layer.y_shape(self.batch_first),
            DType::F32,
        )?;
        Ok(layer)
    }

    /// Each batch row's sequence length (input `sequence_lens`, else the whole sequence).
    fn lengths(&self, inputs: &Inputs, layer: Layer) -> Result<Vec<usize>> {
        let (seq, batch) = (layer.seq, layer.batch);
        match inputs.opt_ints(LENGTHS, "sequence_lens")? {
            None => Ok(vec![seq; batch]),
            Some(l) if l.len() == batch && l.iter().all(|&v| (0..=seq as i64).contains(&v)) => {
                Ok(l.into_iter().map(|v| v as usize).collect())
            }
            Some(l) => bail!(
                "{}: sequence_lens must hold {batch} lengths in 0..={seq}, got {l:?}",
                self.cell.name()
            ),
        }
    }
}

impl Op for Recurrent {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let dtype = inputs.first().cloned().flatten().and_then(|t| t.dtype());
        let outputs = if self.cell == Cell::Lstm { 3 } else { 2 };
        Ok(vec![dtype.map(|d| ValueType::tensor(d, None)); outputs])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Shaped)
    }

    /// `kernels/recurrent.cu`: one block per (direction, batch row) sequence, the tensors on
    /// the device, the sequence lengths (read on the host) and the cell's functions as a table.
    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], inputs: &Inputs) -> Result<ShapedKernel> {
        let layer = self.layer(shapes)?;
        if layer.hidden > DEVICE_HIDDEN_MAX {
            bail!("a hidden size above {DEVICE_HIDDEN_MAX} runs on the CPU");
        }
        if layer.batch.max(layer.seq) >= SOURCE_TABLE_EXACT {
            bail!("sequence lengths or a batch of {SOURCE_TABLE_EXACT} or more run on the CPU");
        }
        let lengths = self.lengths(inputs, layer)?;
        let rows = self.cell.gates() * layer.hidden;
        let threads = rows.next_multiple_of(32).clamp(32, DEVICE_THREADS);
        // Per direction three functions (a cell with fewer pads with unused ones).
        let mut table: Vec<f32> = lengths.iter().map(|&l| l as f32).collect();
        for functions in &self.activations {
            for f in functions.iter().chain([&Function::Relu; 3]).take(3) {
                let Some(code) = f.device_code() else {
                    bail!("activation {f:?} runs on the CPU");
                };
                table.extend(code);
            }
        }
        let present = |i: usize| shapes.get(i).copied().flatten().is_some();
        let mut device_inputs = vec![0, 1, 2];
        let mut slot = |i: usize| -> i64 {
            match present(i) {
                true => {
                    device_inputs.push(i);
                    device_inputs.len() as i64 - 1
                }
                false => -1,
            }
        };
        let optional = [BIAS, INITIAL_H, INITIAL_C, PEEPHOLES].map(|i| {
            let lstm_only = i == INITIAL_C || i == PEEPHOLES;
            match lstm_only && self.cell != Cell::Lstm {
                true => -1,
                false => slot(i),
            }
        });
        let table_slot = device_inputs.len() as i64;
        let ints = [
            self.cell.device_code(),
            layer.directions as i64,
            layer.seq as i64,
            layer.batch as i64,
            layer.input as i64,
            layer.hidden as i64,
            i64::from(self.batch_first),
            i64::from(self.clip.is_some()),
        ]
        .into_iter()
        .chain(optional)
        .chain([table_slot, i64::from(self.reverse[0])])
        .collect();
        let mut outputs = vec![
            layer.y_shape(self.batch_first),
            layer.state_shape(self.batch_first),
        ];
        if self.cell == Cell::Lstm {
            outputs.push(layer.state_shape(self.batch_first));
        }
        Ok(ShapedKernel::Source(SourceKernel {
            entry: "sb_recurrent",
            inputs: device_inputs,
            tables: vec![table],
            ints,
            floats: vec![self.clip.unwrap_or(0.0)],
            outputs,
            launch: SourceLaunch::Blocks {
                blocks: layer.directions * layer.batch,
                threads,
                shared: (2 * rows + 4 * layer.hidden + threads / 32 * DEVICE_STAGE_FLOATS)
                    * std::mem::size_of::<f32>(),
            },
        }))
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let shapes: Vec<Option<&[usize]>> = (0..inputs.len())
            .map(|i| Ok(inputs.opt_tensor(i)?.map(|t| t.shape())))
            .collect::<Result<_>>()?;
        let layer = self.layer(&shapes)?;
        let Layer {
            seq,
            batch,
            input,
            hidden,
            directions,
        } = layer;
        let (x, w, r) = (inputs.tensor(0)?, inputs.tensor(1)?, inputs.tensor(2)?);
        let rows = self.cell.gates() * hidden;
        let y_shape = layer.y_shape(self.batch_first);
        let xv = f32_values(x, "X")?;
        let (wv, rv) = (f32_values(w, "W")?, f32_values(r, "R")?);
        let bias = match inputs.opt_tensor(BIAS)? {
            Some(t) => f32_values(t, "B")?.into_owned(),
            None => vec![0.0f32; directions * 2 * rows],
        };
        let lens = self.lengths(inputs, layer)?;
        // Initial states: [directions, batch, hidden] (batch first: [batch, directions, hidden]).
        let state = |i: usize, name: &str| -> Result<Option<Vec<f32>>> {
            inputs
                .opt_tensor(i)?
                .map(|t| Ok(f32_values(t, name)?.into_owned()))
                .transpose()
        };
        let initial_h = state(INITIAL_H, "initial_h")?;
        let (initial_c, peepholes) = match self.cell {
            Cell::Lstm => (state(INITIAL_C, "initial_c")?, state(PEEPHOLES, "P")?),
            _ => (None, None),
        };
        let state_at = |s: &Option<Vec<f32>>, d: usize, n: usize| -> Vec<f32> {
            let at = match self.batch_first {
                false => (d * batch + n) * hidden,
                true => (n * directions + d) * hidden,
            };
            s.as_ref()
                .map_or(vec![0.0; hidden], |v| v[at..at + hidden].to_vec())
        };
        // Batch row n's step t of X is row t of this view (offset, stride).
        let x_rows = |n: usize| match self.batch_first {
            false => (n * input, batch * input),
            true => (n * seq * input, input),
        };
        // One task per (direction, batch row): its hidden states per step and final states.
        type Run = (Vec<f32>, Vec<f32>, Vec<f32>);
        let runs: Vec<Run> = (0..directions * batch)
            .into_par_iter()
            .map(|task| {
                let (d, n) = (task / batch, task % batch);
                let w = &wv[d * rows * input..][..rows * input];
                let (offset, stride) = x_rows(n);
                let sequence = Sequence {
                    direction: d,
                    weights: Weights {
                        r: &rv[d * rows * hidden..][..rows * hidden],
                        wb: &bias[d * 2 * rows..][..rows],
                        rb: &bias[d * 2 * rows + rows..][..rows],
                        p: peepholes
                            .as_ref()
                            .map_or(&[][..], |p| &p[d * 3 * hidden..][..3 * hidden]),
                    },
                    hidden,
                    xw: products((&xv, offset, stride), lens[n], w, rows, input),
                    len: lens[n],
                };
                let initial = (state_at(&initial_h, d, n), state_at(&initial_c, d, n));
                self.run_sequence(&sequence, initial)
            })
            .collect();
        let mut y = vec![0.0f32; y_shape.iter().product()];
        let state_len = directions * batch * hidden;
        let (mut y_h, mut y_c) = (vec![0.0f32; state_len], vec![0.0f32; state_len]);
        for (task, (ys, h, c)) in runs.iter().enumerate() {
            let (d, n) = (task / batch, task % batch);
            for (t, step) in ys.chunks_exact(hidden.max(1)).enumerate() {
                let at = match self.batch_first {
                    false => ((t * directions + d) * batch + n) * hidden,
                    true => ((n * seq + t) * directions + d) * hidden,
                };
                y[at..at + hidden].copy_from_slice(step);
            }
            let at = match self.batch_first {
                false => (d * batch + n) * hidden,
                true => (n * directions + d) * hidden,
            };
            y_h[at..at + hidden].copy_from_slice(h);
            y_c[at..at + hidden].copy_from_slice(c);
        }
        let state_shape = layer.state_shape(self.batch_first);
        let dtype = x.dtype();
        let mut outputs = vec![
            store_f32(dtype, y_shape, y)?.into(),
            store_f32(dtype, state_shape.clone(), y_h)?.into(),
        ];
        if self.cell == Cell::Lstm {
            outputs.push(store_f32(dtype, state_shape, y_c)?.into());
        }
        Ok(outputs)
    }
}
