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
use crate::registry::Registry;
use crate::staging::{f32_values, store_f32};
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, Result, bail, unsupported};
use rayon::prelude::*;
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{DType, Value, ValueType};
use samebits_kernels::canonical_dot;
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
}

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

/// One direction's weights: W `[G * H, I]`, R `[G * H, H]`, the biases `[G * H]` each, and
/// LSTM's peepholes `[3 * H]` (input, output, forget).
struct Weights<'a> {
    w: &'a [f32],
    r: &'a [f32],
    wb: &'a [f32],
    rb: &'a [f32],
    p: &'a [f32],
}

/// Sizes of one evaluation.
#[derive(Clone, Copy)]
struct Dims {
    input: usize,
    hidden: usize,
}

impl Recurrent {
    /// The pre-activation of row `row` (gate `row / H`, unit `row % H`): `x·W + h·R`, then
    /// `extra` (peephole term, or 0 where there is none), `Wb` and `Rb`, clipped.
    fn pre(&self, w: &Weights, dims: Dims, row: usize, x: &[f32], h: &[f32], extra: f32) -> f32 {
        let xw = canonical_dot(x, &w.w[row * dims.input..][..dims.input]);
        let hr = canonical_dot(h, &w.r[row * dims.hidden..][..dims.hidden]);
        self.clip((((xw + hr) + extra) + w.wb[row]) + w.rb[row])
    }

    fn clip(&self, v: f32) -> f32 {
        match self.clip {
            Some(c) => v.clamp(-c, c),
            None => v,
        }
    }

    /// Runs one sequence (batch row) in one direction from the `initial` hidden and cell
    /// states: writes its hidden state at each step into `ys[t]` and returns the final hidden
    /// state and cell state.
    fn run_sequence(
        &self,
        (direction, w, dims): (usize, &Weights, Dims),
        xs: &[&[f32]],
        initial: (Vec<f32>, Vec<f32>),
        ys: &mut [Vec<f32>],
    ) -> (Vec<f32>, Vec<f32>) {
        let (mut h, mut c) = initial;
        let hs = dims.hidden;
        let f = &self.activations[direction];
        let steps: Vec<usize> = match self.reverse[direction] {
            false => (0..xs.len()).collect(),
            true => (0..xs.len()).rev().collect(),
        };
        let mut next = vec![0.0f32; hs];
        let mut next_c = vec![0.0f32; hs];
        for t in steps {
            let x = xs[t];
            match self.cell {
                Cell::Rnn => {
                    for (j, n) in next.iter_mut().enumerate() {
                        *n = f[0].eval(self.pre(w, dims, j, x, &h, 0.0));
                    }
                }
                Cell::Gru {
                    linear_before_reset,
                } => {
                    let z: Vec<f32> = (0..hs)
                        .map(|j| f[0].eval(self.pre(w, dims, j, x, &h, 0.0)))
                        .collect();
                    let r: Vec<f32> = (0..hs)
                        .map(|j| f[0].eval(self.pre(w, dims, hs + j, x, &h, 0.0)))
                        .collect();
                    let rh: Vec<f32> = r.iter().zip(&h).map(|(r, h)| r * h).collect();
                    for (j, n) in next.iter_mut().enumerate() {
                        let row = 2 * hs + j;
                        let pre = if linear_before_reset {
                            let xw = canonical_dot(x, &w.w[row * dims.input..][..dims.input]);
                            let hr = canonical_dot(&h, &w.r[row * hs..][..hs]);
                            self.clip((xw + r[j] * (hr + w.rb[row])) + w.wb[row])
                        } else {
                            self.pre(w, dims, row, x, &rh, 0.0)
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
                        let i = f[0].eval(self.pre(w, dims, j, x, &h, peep(0, j, c[j])));
                        let forget =
                            f[0].eval(self.pre(w, dims, 2 * hs + j, x, &h, peep(2, j, c[j])));
                        let candidate = f[1].eval(self.pre(w, dims, 3 * hs + j, x, &h, 0.0));
                        let cell = forget * c[j] + i * candidate;
                        let o = f[0].eval(self.pre(w, dims, hs + j, x, &h, peep(1, j, cell)));
                        next[j] = o * f[2].eval(cell);
                        next_c[j] = cell;
                    }
                    c.copy_from_slice(&next_c);
                }
            }
            h.copy_from_slice(&next);
            ys[t].extend_from_slice(&h);
        }
        (h, c)
    }
}

impl Op for Recurrent {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let dtype = inputs.first().cloned().flatten().and_then(|t| t.dtype());
        let outputs = if self.cell == Cell::Lstm { 3 } else { 2 };
        Ok(vec![dtype.map(|d| ValueType::tensor(d, None)); outputs])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let op = self.cell.name();
        let (x, w, r) = (inputs.tensor(0)?, inputs.tensor(1)?, inputs.tensor(2)?);
        let directions = self.reverse.len();
        let gates = self.cell.gates();
        let [a, b, input] = *x.shape() else {
            bail!("{op}: X must have rank 3, got shape {:?}", x.shape());
        };
        let (seq, batch) = if self.batch_first { (b, a) } else { (a, b) };
        let hidden = r.shape().last().copied().unwrap_or(0);
        if w.shape() != [directions, gates * hidden, input]
            || r.shape() != [directions, gates * hidden, hidden]
            || self.hidden_size.is_some_and(|h| h != hidden)
        {
            bail!(
                "{op}: W {:?} and R {:?} must be [{directions}, {gates} * hidden, {input}] and \
                 [{directions}, {gates} * hidden, hidden] (hidden_size {:?})",
                w.shape(),
                r.shape(),
                self.hidden_size
            );
        }
        let dims = Dims { input, hidden };
        let rows = gates * hidden;
        let y_shape = match self.batch_first {
            false => vec![seq, directions, batch, hidden],
            true => vec![batch, seq, directions, hidden],
        };
        check_tensor_size(&format!("{op} output Y"), &y_shape, DType::F32)?;
        let xv = f32_values(x, "X")?;
        let (wv, rv) = (f32_values(w, "W")?, f32_values(r, "R")?);
        let zeros = vec![0.0f32; directions * 2 * rows];
        let bias = match inputs.opt_tensor(3)? {
            Some(t) if t.shape() == [directions, 2 * rows] => f32_values(t, "B")?.into_owned(),
            Some(t) => bail!(
                "{op}: B must be [{directions}, {}], got {:?}",
                2 * rows,
                t.shape()
            ),
            None => zeros,
        };
        let lens: Vec<usize> = match inputs.opt_ints(4, "sequence_lens")? {
            None => vec![seq; batch],
            Some(l) if l.len() == batch && l.iter().all(|&v| (0..=seq as i64).contains(&v)) => {
                l.into_iter().map(|v| v as usize).collect()
            }
            Some(l) => {
                bail!("{op}: sequence_lens must hold {batch} lengths in 0..={seq}, got {l:?}")
            }
        };
        // Initial states: [directions, batch, hidden] (batch first: [batch, directions, hidden]).
        let state = |i: usize, name: &str| -> Result<Option<Vec<f32>>> {
            let Some(t) = inputs.opt_tensor(i)? else {
                return Ok(None);
            };
            let expected = match self.batch_first {
                false => [directions, batch, hidden],
                true => [batch, directions, hidden],
            };
            if t.shape() != expected {
                bail!("{op}: {name} must be {expected:?}, got {:?}", t.shape());
            }
            Ok(Some(f32_values(t, name)?.into_owned()))
        };
        let initial_h = state(5, "initial_h")?;
        let (initial_c, peepholes) = match self.cell {
            Cell::Lstm => {
                let p = match inputs.opt_tensor(7)? {
                    Some(t) if t.shape() == [directions, 3 * hidden] => {
                        Some(f32_values(t, "P")?.into_owned())
                    }
                    Some(t) => bail!(
                        "{op}: P must be [{directions}, {}], got {:?}",
                        3 * hidden,
                        t.shape()
                    ),
                    None => None,
                };
                (state(6, "initial_c")?, p)
            }
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
        let x_at = |t: usize, n: usize| -> &[f32] {
            let at = match self.batch_first {
                false => (t * batch + n) * input,
                true => (n * seq + t) * input,
            };
            &xv[at..at + input]
        };
        // One task per (direction, batch row): its hidden states per step and final states.
        type Run = (Vec<Vec<f32>>, Vec<f32>, Vec<f32>);
        let runs: Vec<Run> = (0..directions * batch)
            .into_par_iter()
            .map(|task| {
                let (d, n) = (task / batch, task % batch);
                let weights = Weights {
                    w: &wv[d * rows * input..][..rows * input],
                    r: &rv[d * rows * hidden..][..rows * hidden],
                    wb: &bias[d * 2 * rows..][..rows],
                    rb: &bias[d * 2 * rows + rows..][..rows],
                    p: peepholes
                        .as_ref()
                        .map_or(&[][..], |p| &p[d * 3 * hidden..][..3 * hidden]),
                };
                let xs: Vec<&[f32]> = (0..lens[n]).map(|t| x_at(t, n)).collect();
                let mut ys = vec![Vec::with_capacity(hidden); lens[n]];
                let initial = (state_at(&initial_h, d, n), state_at(&initial_c, d, n));
                let (h, c) = self.run_sequence((d, &weights, dims), &xs, initial, &mut ys);
                (ys, h, c)
            })
            .collect();
        let mut y = vec![0.0f32; y_shape.iter().product()];
        let state_len = directions * batch * hidden;
        let (mut y_h, mut y_c) = (vec![0.0f32; state_len], vec![0.0f32; state_len]);
        for (task, (ys, h, c)) in runs.iter().enumerate() {
            let (d, n) = (task / batch, task % batch);
            for (t, step) in ys.iter().enumerate() {
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
        let state_shape = match self.batch_first {
            false => vec![directions, batch, hidden],
            true => vec![batch, directions, hidden],
        };
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
