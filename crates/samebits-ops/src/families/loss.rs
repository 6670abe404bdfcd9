//! Loss functions: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (contract section
//! `loss`).
//!
//! Scores `x` are `[N, C, d1, ..., dk]`, targets `[N, d1, ..., dk]` (class indices), the
//! optional `weight` `[C]`. Both ops gather one term per target position; SoftmaxCrossEntropyLoss
//! first replaces the scores by their log-softmax over the class axis (`softmax_row`).

use super::numeric::{Real, with_real_type};
use super::softmax::softmax_row;
use crate::registry::Registry;
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, Result, bail, unsupported};
use samebits_ir::{Tensor, Value, ValueType};

pub fn register(r: &mut Registry) {
    r.register("", "NegativeLogLikelihoodLoss", |ctx| {
        Loss::build(ctx, false)
    });
    r.register("", "SoftmaxCrossEntropyLoss", |ctx| Loss::build(ctx, true));
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Reduction {
    None,
    Sum,
    Mean,
}

#[derive(Debug)]
struct Loss {
    /// SoftmaxCrossEntropyLoss: take the log-softmax of the scores first.
    log_softmax: bool,
    reduction: Reduction,
    ignore_index: Option<i64>,
    correctly_rounded: bool,
}

impl Loss {
    fn build(ctx: &BuildContext, log_softmax: bool) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        let reduction = match args.string_or("reduction", "mean".into())?.as_str() {
            "none" => Reduction::None,
            "sum" => Reduction::Sum,
            "mean" => Reduction::Mean,
            other => bail!("attribute \"reduction\" = {other:?} is not none, sum or mean"),
        };
        Ok(Box::new(Loss {
            log_softmax,
            reduction,
            ignore_index: args.int("ignore_index")?,
            correctly_rounded: ctx.operation_set.correctly_rounded_math(),
        }))
    }

    fn eval_as<R: Real>(
        &self,
        x: &Tensor,
        target: &Tensor,
        weight: Option<&Tensor>,
    ) -> Result<Vec<Tensor>> {
        let shape = x.shape();
        if shape.len() < 2 {
            bail!("input 0 (scores) must be [N, C, ...], got shape {shape:?}");
        }
        let (n, c) = (shape[0], shape[1]);
        let d: usize = shape[2..].iter().product();
        let mut want_target = vec![n];
        want_target.extend_from_slice(&shape[2..]);
        if target.shape() != want_target {
            bail!(
                "input 1 (target) must have shape {want_target:?} for scores {shape:?}, got {:?}",
                target.shape()
            );
        }
        let classes = target.to_i64_vec()?;
        let weight = match weight {
            Some(w) if w.shape() != [c] => {
                bail!(
                    "input 2 (weight) must have shape [{c}], got {:?}",
                    w.shape()
                )
            }
            Some(w) => Some(R::read(w, "input 2 (weight)")?),
            None => None,
        };
        let mut scores = R::read(x, "input 0 (scores)")?.into_owned();
        // No classes or no positions: nothing to normalise (and no chunks of 0).
        if self.log_softmax && c * d > 0 {
            let mut row = vec![R::ZERO; c];
            for block in scores.chunks_mut(c * d) {
                for j in 0..d {
                    for (k, r) in row.iter_mut().enumerate() {
                        *r = block[k * d + j];
                    }
                    softmax_row(&mut row, true, self.correctly_rounded);
                    for (k, &r) in row.iter().enumerate() {
                        block[k * d + j] = r;
                    }
                }
            }
        }
        // One term and one weight per target position, in the target's row-major order.
        let mut terms = Vec::with_capacity(classes.len());
        let mut weights = Vec::with_capacity(classes.len());
        for (p, &class) in classes.iter().enumerate() {
            if Some(class) == self.ignore_index {
                terms.push(R::ZERO);
                weights.push(R::ZERO);
                continue;
            }
            if class < 0 || class as usize >= c {
                bail!("input 1 (target) holds class {class}, outside [0, {c})");
            }
            let (i, j) = (p / d, p % d);
            let value = scores[(i * c + class as usize) * d + j];
            match &weight {
                Some(w) => {
                    let w = w[class as usize];
                    terms.push(-(value * w));
                    weights.push(w);
                }
                None => {
                    terms.push(-value);
                    weights.push(R::ONE);
                }
            }
        }
        let dtype = x.dtype();
        let loss = match self.reduction {
            Reduction::None => R::store(dtype, target.shape().to_vec(), terms)?,
            Reduction::Sum => {
                R::store(dtype, vec![], vec![R::sum_strided(&terms, 1, terms.len())])?
            }
            Reduction::Mean => {
                let total = R::sum_strided(&terms, 1, terms.len());
                let count = R::sum_strided(&weights, 1, weights.len());
                R::store(dtype, vec![], vec![total / count])?
            }
        };
        let mut outputs = vec![loss];
        if self.log_softmax {
            outputs.push(R::store(dtype, shape.to_vec(), scores)?);
        }
        Ok(outputs)
    }
}

impl Op for Loss {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let x = inputs.first().cloned().flatten();
        let dtype = x.as_ref().and_then(|t| t.dtype());
        let loss_shape = match self.reduction {
            Reduction::None => inputs
                .get(1)
                .cloned()
                .flatten()
                .and_then(|t| t.shape().cloned()),
            _ => Some(samebits_ir::Shape::known(&[])),
        };
        Ok(vec![dtype.map(|d| ValueType::tensor(d, loss_shape)), x])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let target = inputs.tensor(1)?;
        if !target.dtype().is_int() {
            bail!(
                "input 1 (target) must be an integer tensor, got {}",
                target.dtype()
            );
        }
        let weight = inputs.opt_tensor(2)?;
        let outputs = with_real_type!(x.dtype(), R => self.eval_as::<R>(x, target, weight)?,
            else unsupported!("losses of {} scores", x.dtype()));
        Ok(outputs.into_iter().map(Value::from).collect())
    }
}
