//! Softmax, LogSoftmax and Hardmax, and [`softmax_row`], the one softmax of samebits (contract
//! section `softmax`), which Attention uses as well.
//!
//! Axis semantics: before opset 13 the input is coerced to 2-D `[prod(dims[..axis]),
//! prod(dims[axis..])]` (default axis 1) and each row is normalized; from opset 13 the op runs
//! along the single axis `axis` (default -1).

use super::numeric::{Layout, Real, with_real_type};
use crate::registry::Registry;
use crate::{
    BuildContext, DeviceKernel, Inputs, InputsExt, NodeArgs, Op, OpError, Result, normalize_axis,
};
use crate::{bail, unsupported};
use rayon::prelude::*;
use samebits_ir::{Tensor, Value, ValueType};
use samebits_kernels::{ArgKind, argreduce_f32};

pub fn register(r: &mut Registry) {
    r.register("", "Softmax", |ctx| {
        Softmax::build(ctx, Normalizer::Softmax)
    });
    r.register("", "LogSoftmax", |ctx| {
        Softmax::build(ctx, Normalizer::LogSoftmax)
    });
    r.register("", "Hardmax", |ctx| {
        Softmax::build(ctx, Normalizer::Hardmax)
    });
}

/// The softmax of one f32 row, in place, exactly as the Softmax op computes it (contract:
/// softmax); for callers outside the op graph, such as LLM sampling.
pub fn softmax_f32(row: &mut [f32], correctly_rounded: bool) {
    softmax_row(row, false, correctly_rounded);
}

/// The softmax of one row, in place (contract: softmax): `m = max(x)` (`reduce-extrema`),
/// `e_k = exp(x_k - m)`, `s = canonical_sum(e)`, then `y_k = e_k / s`, or with `log`,
/// `y_k = (x_k - m) - log(s)`. `correctly_rounded` picks samebits-math's exp and log.
pub fn softmax_row<R: Real>(row: &mut [R], log: bool, correctly_rounded: bool) {
    let m = row.iter().fold(R::LOWEST, |a, &b| a.max(b));
    if log {
        let mut e = row.to_vec();
        for v in e.iter_mut() {
            *v = (*v - m).exp(correctly_rounded);
        }
        let log_s = R::sum_strided(&e, 1, e.len()).ln(correctly_rounded);
        for v in row.iter_mut() {
            *v = (*v - m) - log_s;
        }
    } else {
        let shifted: Vec<R> = row.iter().map(|&v| v - m).collect();
        R::exp_slice(&shifted, row, correctly_rounded);
        let s = R::sum_strided(row, 1, row.len());
        for v in row.iter_mut() {
            *v = *v / s;
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Normalizer {
    Softmax,
    LogSoftmax,
    Hardmax,
}

#[derive(Debug)]
struct Softmax {
    normalizer: Normalizer,
    axis: i64,
    /// Opset < 13: coerce to 2-D at `axis`.
    coerce_2d: bool,
    correctly_rounded: bool,
}

impl Softmax {
    fn build(ctx: &BuildContext, normalizer: Normalizer) -> Result<Box<dyn Op>> {
        let coerce_2d = ctx.opset < 13;
        let axis = NodeArgs::new(ctx.node).int_or("axis", if coerce_2d { 1 } else { -1 })?;
        Ok(Box::new(Softmax {
            normalizer,
            axis,
            coerce_2d,
            correctly_rounded: ctx.operation_set.correctly_rounded_math(),
        }))
    }

    /// The `[outer, len, inner]` view the op normalizes along.
    fn dims(&self, shape: &[usize]) -> Result<(usize, usize, usize)> {
        let axis = normalize_axis(self.axis, shape.len())
            .map_err(|e| OpError::Invalid(format!("attribute \"axis\": {e}")))?;
        Ok(if self.coerce_2d {
            (
                shape[..axis].iter().product(),
                shape[axis..].iter().product(),
                1,
            )
        } else {
            Layout::new(shape, &[axis]).dims
        })
    }

    fn eval_as<R: Real>(&self, x: &Tensor) -> Result<Tensor> {
        let (_, len, inner) = self.dims(x.shape())?;
        let data = R::read(x, "input 0")?;
        let mut out = vec![R::ZERO; data.len()];
        let log = self.normalizer == Normalizer::LogSoftmax;
        let cr = self.correctly_rounded;
        // An empty axis or an empty inner block leaves nothing to normalise.
        if len > 0 && inner > 0 {
            out.par_chunks_mut(len * inner)
                .enumerate()
                .for_each(|(o, block)| {
                    let src = &data[o * len * inner..(o + 1) * len * inner];
                    let mut row = vec![R::ZERO; len];
                    for i in 0..inner {
                        for (k, r) in row.iter_mut().enumerate() {
                            *r = src[k * inner + i];
                        }
                        softmax_row(&mut row, log, cr);
                        for (k, &r) in row.iter().enumerate() {
                            block[k * inner + i] = r;
                        }
                    }
                });
        }
        R::store(x.dtype(), x.shape().to_vec(), out)
    }

    /// One-hot of the first maximum (`reduce-extrema`, NaN counts as the maximum).
    fn hardmax(&self, x: &Tensor) -> Result<Tensor> {
        let (outer, len, inner) = self.dims(x.shape())?;
        if x.dtype() == samebits_ir::DType::F64 {
            unsupported!("Hardmax of f64 tensors");
        }
        let data = f32::read(x, "input 0")?;
        let mut out = vec![0.0f32; data.len()];
        if len > 0 {
            let mut best = vec![0i64; outer * inner];
            argreduce_f32(ArgKind::ArgMax, false, &data, outer, len, inner, &mut best);
            for (flat, &k) in best.iter().enumerate() {
                let (o, i) = (flat / inner, flat % inner);
                out[(o * len + k as usize) * inner + i] = 1.0;
            }
        }
        f32::store(x.dtype(), x.shape().to_vec(), out)
    }
}

impl Op for Softmax {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![inputs.first().cloned().flatten()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        if x.rank() == 0 {
            bail!("input 0 must have at least one dim, got a scalar");
        }
        let y = match self.normalizer {
            Normalizer::Hardmax => self.hardmax(x)?,
            _ => with_real_type!(x.dtype(), R => self.eval_as::<R>(x)?,
                else unsupported!("{:?} of {} tensors", self.normalizer, x.dtype())),
        };
        Ok(vec![y.into()])
    }

    /// Softmax and LogSoftmax with correctly rounded exp and log (not Hardmax, not the
    /// `default` operation set's std exp).
    fn device_kernel(&self) -> Option<DeviceKernel> {
        let log = match self.normalizer {
            Normalizer::Softmax => false,
            Normalizer::LogSoftmax => true,
            Normalizer::Hardmax => return None,
        };
        self.correctly_rounded.then_some(DeviceKernel::Softmax {
            axis: self.axis,
            log,
            coerce_2d: self.coerce_2d,
        })
    }
}
