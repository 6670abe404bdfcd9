//! Ops of the `ai.onnx.preview.training` domain (opset 1): the optimizers Adagrad, Adam and
//! Momentum, each one update step of several tensors at once.
//!
//! Inputs: the learning rate `R` (one float32), the update count `T` (one int64), then the
//! optimized tensors `X_1 .. X_n`, their gradients `G_1 .. G_n` and the optimizer's state
//! (`H_i` for Adagrad, `V_i` and `H_i` for Adam, `V_i` for Momentum), float32, each group in
//! that order; each `G_i` and state tensor has `X_i`'s shape. Outputs: the new `X_i`, then the
//! new state tensors, group by group. Every element is computed on its own in float32 by the
//! formula of docs/contract.md (section `training`), one rounding per operation in the written
//! order: no reduction, so the result is the same on every machine. `T` enters as the float32
//! nearest to it, and `alpha^T`, `beta^T` are samebits-math's correctly rounded `pow`.

use crate::registry::Registry;
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, Result, bail};
use samebits_ir::{DType, Tensor, Value, ValueType};

const DOMAIN: &str = "ai.onnx.preview.training";

pub fn register(r: &mut Registry) {
    r.register(DOMAIN, "Adagrad", Optimizer::build_adagrad);
    r.register(DOMAIN, "Adam", Optimizer::build_adam);
    r.register(DOMAIN, "Momentum", Optimizer::build_momentum);
}

/// An optimizer and its attributes.
#[derive(Debug, Clone, Copy)]
enum Rule {
    Adagrad {
        decay_factor: f32,
        epsilon: f32,
        norm_coefficient: f32,
    },
    Adam {
        alpha: f32,
        beta: f32,
        epsilon: f32,
        norm_coefficient: f32,
        norm_coefficient_post: f32,
    },
    Momentum {
        alpha: f32,
        beta: f32,
        nesterov: bool,
        norm_coefficient: f32,
    },
}

impl Rule {
    fn name(&self) -> &'static str {
        match self {
            Rule::Adagrad { .. } => "Adagrad",
            Rule::Adam { .. } => "Adam",
            Rule::Momentum { .. } => "Momentum",
        }
    }

    /// Input groups after R and T: X, G and the state tensors.
    fn groups(&self) -> usize {
        match self {
            Rule::Adam { .. } => 4,
            Rule::Adagrad { .. } | Rule::Momentum { .. } => 3,
        }
    }

    /// The step's learning rate from `R` and `T` (the same for every element).
    fn rate(&self, r: f32, t: i64) -> f32 {
        let tf = t as f32;
        match *self {
            Rule::Adagrad { decay_factor, .. } => r / (1.0 + tf * decay_factor),
            Rule::Adam { alpha, beta, .. } if t > 0 => {
                let alpha_t = samebits_math::pow(alpha, tf);
                let beta_t = samebits_math::pow(beta, tf);
                (r * (1.0 - beta_t).sqrt()) / (1.0 - alpha_t)
            }
            Rule::Adam { .. } | Rule::Momentum { .. } => r,
        }
    }

    /// One element: `x`, its gradient `g` and state `s` (one value, or two for Adam) in, the
    /// new `x` and state out.
    fn step(&self, rate: f32, t: i64, x: f32, g: f32, s: [f32; 2]) -> (f32, [f32; 2]) {
        match *self {
            Rule::Adagrad {
                epsilon,
                norm_coefficient,
                ..
            } => {
                let g = norm_coefficient * x + g;
                let h = s[0] + g * g;
                let scale = h.sqrt() + epsilon;
                (x - (rate * g) / scale, [h, 0.0])
            }
            Rule::Adam {
                alpha,
                beta,
                epsilon,
                norm_coefficient,
                norm_coefficient_post,
            } => {
                let g = norm_coefficient * x + g;
                let v = alpha * s[0] + (1.0 - alpha) * g;
                let h = beta * s[1] + (1.0 - beta) * (g * g);
                let scale = h.sqrt() + epsilon;
                let x = x - rate * (v / scale);
                ((1.0 - norm_coefficient_post) * x, [v, h])
            }
            Rule::Momentum {
                alpha,
                beta,
                nesterov,
                norm_coefficient,
            } => {
                let g = norm_coefficient * x + g;
                let beta = if t > 0 { beta } else { 1.0 };
                let v = alpha * s[0] + beta * g;
                let x = match nesterov {
                    true => x - rate * (g + alpha * v),
                    false => x - rate * v,
                };
                (x, [v, 0.0])
            }
        }
    }
}

#[derive(Debug)]
struct Optimizer {
    rule: Rule,
}

impl Optimizer {
    fn build_adagrad(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        Ok(Box::new(Optimizer {
            rule: Rule::Adagrad {
                decay_factor: args.float_or("decay_factor", 0.0)?,
                epsilon: args.float_or("epsilon", 0.0)?,
                norm_coefficient: args.float_or("norm_coefficient", 0.0)?,
            },
        }))
    }

    fn build_adam(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        Ok(Box::new(Optimizer {
            rule: Rule::Adam {
                alpha: args.float_or("alpha", 0.9)?,
                beta: args.float_or("beta", 0.999)?,
                epsilon: args.float_or("epsilon", 0.0)?,
                norm_coefficient: args.float_or("norm_coefficient", 0.0)?,
                norm_coefficient_post: args.float_or("norm_coefficient_post", 0.0)?,
            },
        }))
    }

    fn build_momentum(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        let required = |name: &str| -> Result<f32> {
            match args.float(name)? {
                Some(v) => Ok(v),
                None => bail!("Momentum: the attribute \"{name}\" is required"),
            }
        };
        let nesterov = match args.string("mode")?.as_deref() {
            Some("standard") => false,
            Some("nesterov") => true,
            Some(other) => bail!(
                "Momentum: attribute \"mode\" must be \"standard\" or \"nesterov\", got {other:?}"
            ),
            None => bail!("Momentum: the attribute \"mode\" is required"),
        };
        Ok(Box::new(Optimizer {
            rule: Rule::Momentum {
                alpha: required("alpha")?,
                beta: required("beta")?,
                nesterov,
                norm_coefficient: required("norm_coefficient")?,
            },
        }))
    }

    /// The number of optimized tensors for `inputs` inputs.
    fn count(&self, inputs: usize) -> Result<usize> {
        let groups = self.rule.groups();
        let n = inputs.saturating_sub(2) / groups;
        if inputs < 2 + groups || inputs != 2 + groups * n {
            bail!(
                "{}: expected R, T and {groups} groups of equally many tensors, got {inputs} inputs",
                self.rule.name()
            );
        }
        Ok(n)
    }
}

/// The one value of a single-element input.
fn single<'a>(t: &'a Tensor, op: &str, what: &str, dtype: DType) -> Result<&'a Tensor> {
    if t.numel() != 1 || t.dtype() != dtype {
        bail!(
            "{op}: input {what} must be one {dtype} value, got {} of shape {:?}",
            t.dtype(),
            t.shape()
        );
    }
    Ok(t)
}

impl Op for Optimizer {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let n = self.count(inputs.len())?;
        // X_i's type for the new X_i, then each state group's own inputs' types.
        let mut out: Vec<Option<ValueType>> = inputs[2..2 + n].to_vec();
        out.extend(inputs[2 + 2 * n..].iter().cloned());
        Ok(out)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let op = self.rule.name();
        let n = self.count(inputs.len())?;
        let r = single(inputs.tensor(0)?, op, "R", DType::F32)?.as_slice::<f32>()?[0];
        let t = single(inputs.tensor(1)?, op, "T", DType::I64)?.as_slice::<i64>()?[0];
        let rate = self.rule.rate(r, t);
        let states = self.rule.groups() - 2;
        let mut xs = Vec::with_capacity(n);
        let mut new_states: Vec<Vec<Tensor>> = vec![Vec::with_capacity(n); states];
        for i in 0..n {
            let x = inputs.tensor(2 + i)?;
            let mut operands = Vec::with_capacity(1 + states);
            for group in 1..=1 + states {
                let index = 2 + group * n + i;
                let v = inputs.tensor(index)?;
                if v.dtype() != DType::F32 || v.shape() != x.shape() {
                    bail!(
                        "{op}: input {index} ({} of shape {:?}) must be float32 of input {}'s \
                         shape {:?}",
                        v.dtype(),
                        v.shape(),
                        2 + i,
                        x.shape()
                    );
                }
                operands.push(v.as_slice::<f32>()?);
            }
            if x.dtype() != DType::F32 {
                bail!("{op}: input {} must be float32, got {}", 2 + i, x.dtype());
            }
            let x_values = x.as_slice::<f32>()?;
            let mut x_new = Vec::with_capacity(x_values.len());
            let mut s_new = vec![Vec::with_capacity(x_values.len()); states];
            for (k, &xk) in x_values.iter().enumerate() {
                let s = [operands[1][k], operands.get(2).map_or(0.0, |h| h[k])];
                let (xk, sk) = self.rule.step(rate, t, xk, operands[0][k], s);
                x_new.push(xk);
                for (j, out) in s_new.iter_mut().enumerate() {
                    out.push(sk[j]);
                }
            }
            xs.push(Tensor::from_vec(x.shape().to_vec(), x_new)?);
            for (j, values) in s_new.into_iter().enumerate() {
                new_states[j].push(Tensor::from_vec(x.shape().to_vec(), values)?);
            }
        }
        Ok(xs
            .into_iter()
            .chain(new_states.into_iter().flatten())
            .map(Value::from)
            .collect())
    }
}
