//! FlexAttention (`ai.onnx.preview`, opset 1): scaled dot-product attention whose scores and
//! probabilities pass through optional user graphs, `score_mod` and `prob_mod`.
//!
//! Inputs `Q [B, Hq, L, E]`, `K [B, Hkv, S, E]`, `V [B, Hkv, S, Ev]` (Hq a multiple of Hkv,
//! query head `h` reading key head `h / (Hq / Hkv)`); attribute `scale` (default `1 / sqrt(E)`).
//! docs/contract.md, section `flex-attention`: with `c = sqrt(scale)`, each score is the
//! canonical dot of `q * c` and `k * c` (each product rounded); the `[B, Hq, L, S]` scores go
//! through `score_mod` when given (a subgraph of one input and one output of that shape), each
//! row through Softmax's own row function (section `softmax`, correctly rounded exp), the
//! probabilities through `prob_mod` when given, and each output feature is the canonical dot of
//! a probability row with that feature's values over the S positions. f16 / bf16 compute in
//! f32 and f64 in f64 (as the `Real` ops do), the output rounded once to V's dtype.

use super::control_flow::Subgraph;
use super::numeric::{Real, with_real_type};
use super::softmax::softmax_row;
use crate::registry::Registry;
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, Result, bail, unsupported};
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{Tensor, Value, ValueType};

const OP: &str = "FlexAttention";

pub fn register(r: &mut Registry) {
    r.register("ai.onnx.preview", OP, FlexAttention::build);
}

#[derive(Debug)]
struct FlexAttention {
    scale: Option<f32>,
    score_mod: Option<Subgraph>,
    prob_mod: Option<Subgraph>,
    declared_inputs: usize,
}

impl FlexAttention {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        if args.has("softmax_precision") {
            unsupported!("{OP}: attribute \"softmax_precision\"");
        }
        let graph = |name: &str| -> Result<Option<Subgraph>> {
            if !args.has(name) {
                return Ok(None);
            }
            let g = Subgraph::build(ctx, name)?;
            if g.input_count != 1 || g.output_count() != 1 {
                bail!("{OP}: {name} must have one input and one output");
            }
            Ok(Some(g))
        };
        Ok(Box::new(FlexAttention {
            scale: args.float("scale")?,
            score_mod: graph("score_mod")?,
            prob_mod: graph("prob_mod")?,
            declared_inputs: ctx.node.inputs.len(),
        }))
    }

    /// Runs `graph` (score_mod or prob_mod) on `values` of `shape`; its output must keep it.
    fn modify<R: Real>(
        &self,
        graph: &Subgraph,
        values: Vec<R>,
        shape: &[usize],
        captures: &Inputs,
    ) -> Result<Vec<R>> {
        let input = Tensor::from_vec(shape.to_vec(), values)?;
        let mut out = graph.run(&[input.into()], captures)?;
        let t = out.remove(0);
        let t = t.as_tensor()?;
        if t.shape() != shape || t.dtype() != input_dtype::<R>() {
            bail!(
                "{OP}: a modifier graph returned {} {:?}, not the {} {shape:?} it was given",
                t.dtype(),
                t.shape(),
                input_dtype::<R>()
            );
        }
        Ok(R::read(t, "modifier output")?.into_owned())
    }

    fn eval_as<R: Real>(&self, inputs: &Inputs) -> Result<Tensor> {
        let (q, k, v) = (inputs.tensor(0)?, inputs.tensor(1)?, inputs.tensor(2)?);
        let (&[b, hq, l, e], &[kb, hkv, s, ke], &[vb, vh, vs, ev]) =
            (q.shape(), k.shape(), v.shape())
        else {
            bail!(
                "{OP}: Q, K and V must have rank 4, got {:?}, {:?} and {:?}",
                q.shape(),
                k.shape(),
                v.shape()
            );
        };
        if kb != b
            || vb != b
            || vh != hkv
            || vs != s
            || ke != e
            || hkv == 0
            || !hq.is_multiple_of(hkv)
        {
            bail!(
                "{OP}: shapes Q {:?}, K {:?}, V {:?} do not fit (one batch, K and V one head \
                 count and length, Q and K one size, Q's heads a multiple of K's)",
                q.shape(),
                k.shape(),
                v.shape()
            );
        }
        check_tensor_size(&format!("{OP} scores"), &[b, hq, l, s], q.dtype())?;
        check_tensor_size(&format!("{OP} output"), &[b, hq, l, ev], v.dtype())?;
        let (qv, kv, vv) = (R::read(q, "Q")?, R::read(k, "K")?, R::read(v, "V")?);
        let scale = match self.scale {
            Some(scale) => R::from_f32(scale),
            None => R::ONE / R::from_f32(e as f32).sqrt(),
        };
        let c = scale.sqrt();
        let qs: Vec<R> = qv.iter().map(|&x| x * c).collect();
        let ks: Vec<R> = kv.iter().map(|&x| x * c).collect();
        let group = hq / hkv;
        let mut scores = vec![R::ZERO; b * hq * l * s];
        for (row, out) in scores.chunks_exact_mut(s.max(1)).enumerate() {
            let bh = row / l;
            let (bi, h) = (bh / hq, bh % hq);
            let query = &qs[row * e..][..e];
            let keys = &ks[(bi * hkv + h / group) * s * e..];
            for (j, score) in out.iter_mut().enumerate() {
                *score = R::dot_strided(query, 1, &keys[j * e..], 1, e);
            }
        }
        let shape = [b, hq, l, s];
        let captures = &inputs[self.declared_inputs.min(inputs.len())..];
        if let Some(graph) = &self.score_mod {
            scores = self.modify(graph, scores, &shape, captures)?;
        }
        for row in scores.chunks_exact_mut(s.max(1)) {
            softmax_row(row, false, true);
        }
        if let Some(graph) = &self.prob_mod {
            scores = self.modify(graph, scores, &shape, captures)?;
        }
        let mut out = vec![R::ZERO; b * hq * l * ev];
        for (row, y) in out.chunks_exact_mut(ev.max(1)).enumerate() {
            let bh = row / l;
            let (bi, h) = (bh / hq, bh % hq);
            let probs = &scores[row * s..][..s];
            let values = &vv[(bi * hkv + h / group) * s * ev..];
            for (m, ym) in y.iter_mut().enumerate() {
                *ym = R::dot_strided(probs, 1, &values[m..], ev, s);
            }
        }
        R::store(v.dtype(), vec![b, hq, l, ev], out)
    }
}

/// The dtype of a tensor of `R` values (what the modifier graphs receive).
fn input_dtype<R: Real>() -> samebits_ir::DType {
    <R as samebits_ir::Element>::DTYPE
}

impl Op for FlexAttention {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let dtype = inputs.get(2).cloned().flatten().and_then(|t| t.dtype());
        Ok(vec![dtype.map(|d| ValueType::tensor(d, None))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let q = inputs.tensor(0)?;
        for (i, name) in [(1, "K"), (2, "V")] {
            if inputs.tensor(i)?.dtype() != q.dtype() {
                bail!(
                    "{OP}: {name} is {}, Q {}",
                    inputs.tensor(i)?.dtype(),
                    q.dtype()
                );
            }
        }
        let y = with_real_type!(q.dtype(), R => self.eval_as::<R>(inputs)?,
            else unsupported!("{OP} of dtype {}", q.dtype()));
        Ok(vec![y.into()])
    }
}
