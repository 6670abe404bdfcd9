//! Transcendental elementwise ops and activations: Exp, Log, Tanh, Erf, Sigmoid, the
//! trigonometric and hyperbolic functions, Pow, Softplus, Softsign, Gelu, HardSigmoid,
//! HardSwish, LeakyRelu, PRelu, Elu, Selu, Celu, Mish, ThresholdedRelu, Shrink and Swish.
//!
//! f32, f16 and bf16 tensors (f16/bf16 computed in f32, rounded at the store) use samebits-math
//! in every operation set: its correctly rounded functions and its composite formulas
//! (docs/math.md), so results are the same bits everywhere. f64 tensors use Rust std
//! functions and the same formulas in binary64, outside the contract (docs/contract.md,
//! section `activation`).

use super::numeric::Real;
use crate::broadcast::{LegacyBroadcast, LegacyBroadcastOp, map2};
use crate::registry::Registry;
use crate::{
    BinaryKernel, BuildContext, DeviceKernel, Inputs, InputsExt, NodeArgs, Op, Result, UnaryKernel,
    bail, unsupported,
};
use rayon::prelude::*;
use samebits_ir::{DType, Node, Tensor, Value, ValueType};
use samebits_math::{Activation, UnaryFn};

pub fn register(r: &mut Registry) {
    r.register("", "Exp", |_| unary(Elementwise::Math(UnaryFn::Exp)));
    r.register("", "Log", |_| unary(Elementwise::Math(UnaryFn::Log)));
    r.register("", "Tanh", |_| unary(Elementwise::Math(UnaryFn::Tanh)));
    r.register("", "Erf", |_| unary(Elementwise::Math(UnaryFn::Erf)));
    r.register("", "Sin", |_| unary(Elementwise::Math(UnaryFn::Sin)));
    r.register("", "Cos", |_| unary(Elementwise::Math(UnaryFn::Cos)));
    r.register("", "Tan", |_| unary(Elementwise::Math(UnaryFn::Tan)));
    r.register("", "Asin", |_| unary(Elementwise::Math(UnaryFn::Asin)));
    r.register("", "Acos", |_| unary(Elementwise::Math(UnaryFn::Acos)));
    r.register("", "Atan", |_| unary(Elementwise::Math(UnaryFn::Atan)));
    r.register("", "Sinh", |_| unary(Elementwise::Math(UnaryFn::Sinh)));
    r.register("", "Cosh", |_| unary(Elementwise::Math(UnaryFn::Cosh)));
    r.register("", "Asinh", |_| unary(Elementwise::Math(UnaryFn::Asinh)));
    r.register("", "Acosh", |_| unary(Elementwise::Math(UnaryFn::Acosh)));
    r.register("", "Atanh", |_| unary(Elementwise::Math(UnaryFn::Atanh)));
    r.register("", "Sigmoid", |_| {
        unary(Elementwise::Composite(Activation::Sigmoid))
    });
    r.register("", "Softplus", |_| {
        unary(Elementwise::Composite(Activation::Softplus))
    });
    r.register("", "Mish", |_| {
        unary(Elementwise::Composite(Activation::Mish))
    });
    r.register("", "HardSwish", |_| {
        unary(Elementwise::Composite(Activation::HardSwish))
    });
    r.register("", "Softsign", |_| unary(Elementwise::Softsign));
    r.register("", "Gelu", gelu);
    r.register("", "HardSigmoid", |ctx| {
        unary(Elementwise::Composite(hard_sigmoid(ctx.node)?))
    });
    r.register("", "Elu", |ctx| {
        let alpha = NodeArgs::new(ctx.node).float_or("alpha", 1.0)?;
        unary(Elementwise::Composite(Activation::Elu { alpha }))
    });
    r.register("", "Selu", |ctx| {
        let args = NodeArgs::new(ctx.node);
        let alpha = args.float_or("alpha", 1.673_263_2)?;
        let gamma = args.float_or("gamma", 1.050_701)?;
        unary(Elementwise::Composite(Activation::Selu { alpha, gamma }))
    });
    r.register("", "Celu", |ctx| {
        let alpha = NodeArgs::new(ctx.node).float_or("alpha", 1.0)?;
        if alpha == 0.0 {
            bail!("attribute \"alpha\" of Celu must not be 0");
        }
        unary(Elementwise::Composite(Activation::Celu { alpha }))
    });
    r.register("", "LeakyRelu", |ctx| {
        unary(Elementwise::Composite(leaky_relu(ctx.node)?))
    });
    r.register("", "ThresholdedRelu", |ctx| {
        let alpha = NodeArgs::new(ctx.node).float_or("alpha", 1.0)?;
        unary(Elementwise::ThresholdedRelu { alpha })
    });
    r.register("", "Shrink", |ctx| {
        let args = NodeArgs::new(ctx.node);
        let (bias, lambd) = (args.float_or("bias", 0.0)?, args.float_or("lambd", 0.5)?);
        unary(Elementwise::Shrink { bias, lambd })
    });
    r.register("", "Swish", |ctx| {
        let alpha = NodeArgs::new(ctx.node).float_or("alpha", 1.0)?;
        unary(Elementwise::Swish { alpha })
    });
    r.register("", "PRelu", |ctx| {
        let op = Box::new(Binary::PRelu);
        // Before opset 7 the slope is one value per channel, not numpy-broadcast.
        Ok(if ctx.opset < 7 {
            LegacyBroadcastOp::with_rule(LegacyBroadcast::Channel, op)
        } else {
            op
        })
    });
    r.register("", "Pow", |ctx| {
        LegacyBroadcastOp::wrap(ctx, Box::new(Binary::Pow))
    });
}

/// HardSigmoid's activation with its `alpha` and `beta` (ONNX defaults 0.2, 0.5): the one
/// reading of the node for the op and for the fused chains.
pub(crate) fn hard_sigmoid(node: &Node) -> Result<Activation> {
    let args = NodeArgs::new(node);
    Ok(Activation::HardSigmoid {
        alpha: args.float_or("alpha", 0.2)?,
        beta: args.float_or("beta", 0.5)?,
    })
}

/// LeakyRelu's activation with its `alpha` (ONNX default 0.01), for the op and the chains.
pub(crate) fn leaky_relu(node: &Node) -> Result<Activation> {
    Ok(Activation::LeakyRelu {
        alpha: NodeArgs::new(node).float_or("alpha", 0.01)?,
    })
}

fn unary(f: Elementwise) -> Result<Box<dyn Op>> {
    Ok(Box::new(f))
}

fn gelu(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let approximate = NodeArgs::new(ctx.node).string_or("approximate", "none".into())?;
    unary(Elementwise::Composite(match approximate.as_str() {
        "none" => Activation::GeluErf,
        "tanh" => Activation::GeluTanh,
        other => bail!("attribute \"approximate\" must be \"none\" or \"tanh\", got {other:?}"),
    }))
}

/// A unary elementwise function.
#[derive(Clone, Copy, Debug)]
pub(super) enum Elementwise {
    /// A correctly rounded samebits-math function.
    Math(UnaryFn),
    /// A samebits-math composite formula.
    Composite(Activation),
    /// `x / (1 + |x|)`.
    Softsign,
    /// `x > alpha ? x : 0`.
    ThresholdedRelu { alpha: f32 },
    /// `x < -lambd ? x + bias : x > lambd ? x - bias : 0`.
    Shrink { bias: f32, lambd: f32 },
    /// `x * sigmoid(alpha * x)`.
    Swish { alpha: f32 },
}

impl Elementwise {
    /// The piecewise formulas without transcendentals, at any precision.
    fn piecewise<R: Real>(self, x: R) -> Option<R> {
        Some(match self {
            Elementwise::Softsign => x / (R::ONE + x.abs()),
            Elementwise::ThresholdedRelu { alpha } => {
                if x > R::from_f32(alpha) {
                    x
                } else {
                    R::ZERO
                }
            }
            Elementwise::Shrink { bias, lambd } => {
                let (bias, lambd) = (R::from_f32(bias), R::from_f32(lambd));
                if x < -lambd {
                    x + bias
                } else if x > lambd {
                    x - bias
                } else {
                    R::ZERO
                }
            }
            Elementwise::Math(_) | Elementwise::Composite(_) | Elementwise::Swish { .. } => {
                return None;
            }
        })
    }

    pub(super) fn eval_f32(self, x: f32) -> f32 {
        match self {
            Elementwise::Math(f) => f.eval(x),
            Elementwise::Composite(a) => a.eval(x),
            Elementwise::Swish { alpha } => x * Activation::Sigmoid.eval(alpha * x),
            _ => self.piecewise(x).unwrap_or(f32::NAN),
        }
    }

    /// Rust std in binary64 (outside the contract); `None` where std has no such function.
    fn eval_f64(self, x: f64) -> Option<f64> {
        let softplus = |x: f64| x.max(0.0) + (-x.abs()).exp().ln_1p();
        let sigmoid = |x: f64| {
            if x >= 0.0 {
                1.0 / (1.0 + (-x).exp())
            } else {
                x.exp() / (1.0 + x.exp())
            }
        };
        let expm1 = f64::exp_m1;
        Some(match self {
            Elementwise::Math(f) => match f {
                UnaryFn::Exp => x.exp(),
                UnaryFn::Log => x.ln(),
                UnaryFn::Tanh => x.tanh(),
                UnaryFn::Sin => x.sin(),
                UnaryFn::Cos => x.cos(),
                UnaryFn::Tan => x.tan(),
                UnaryFn::Asin => x.asin(),
                UnaryFn::Acos => x.acos(),
                UnaryFn::Atan => x.atan(),
                UnaryFn::Sinh => x.sinh(),
                UnaryFn::Cosh => x.cosh(),
                UnaryFn::Asinh => x.asinh(),
                UnaryFn::Acosh => x.acosh(),
                UnaryFn::Atanh => x.atanh(),
                _ => return None,
            },
            Elementwise::Composite(a) => match a {
                Activation::Sigmoid => sigmoid(x),
                Activation::Softplus => softplus(x),
                Activation::Mish => x * softplus(x).tanh(),
                Activation::GeluTanh => {
                    let inner = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
                    0.5 * x * (1.0 + inner.tanh())
                }
                Activation::HardSigmoid { alpha, beta } => {
                    (alpha as f64 * x + beta as f64).clamp(0.0, 1.0)
                }
                Activation::HardSwish => x * (x / 6.0 + 0.5).clamp(0.0, 1.0),
                Activation::Elu { alpha } if x <= 0.0 => alpha as f64 * expm1(x),
                Activation::Selu { alpha, gamma } if x <= 0.0 => {
                    gamma as f64 * (alpha as f64 * expm1(x))
                }
                Activation::Selu { gamma, .. } => gamma as f64 * x,
                Activation::Celu { alpha } if x <= 0.0 => alpha as f64 * expm1(x / alpha as f64),
                Activation::Elu { .. } | Activation::Celu { .. } => x,
                Activation::LeakyRelu { alpha } if x < 0.0 => alpha as f64 * x,
                Activation::LeakyRelu { .. } => x,
                Activation::GeluErf | Activation::RsqrtFormula => return None,
            },
            Elementwise::Swish { alpha } => x * sigmoid(alpha as f64 * x),
            _ => self.piecewise(x)?,
        })
    }
}

/// Values per task of a parallel [`Elementwise`] evaluation.
const CHUNK: usize = 8192;
/// From this many values on, [`Elementwise`] evaluates in parallel.
const PARALLEL_MIN: usize = 4 * CHUNK;

impl Op for Elementwise {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![inputs.first().cloned().flatten()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let shape = x.shape().to_vec();
        let y = match x.dtype() {
            DType::F64 => {
                let data = x.as_slice::<f64>()?;
                let out: Option<Vec<f64>> = data.iter().map(|&v| self.eval_f64(v)).collect();
                match out {
                    Some(out) => Tensor::from_vec(shape, out)?,
                    None => unsupported!("{self:?} of f64 tensors"),
                }
            }
            DType::F32 | DType::F16 | DType::BF16 => {
                let data = f32::read(x, "input 0")?;
                let mut out = vec![0.0f32; data.len()];
                let eval = |src: &[f32], dst: &mut [f32]| match self {
                    Elementwise::Math(f) => f.eval_slice(src, dst),
                    Elementwise::Composite(a) => a.eval_slice(src, dst),
                    _ => {
                        for (o, &v) in dst.iter_mut().zip(src) {
                            *o = self.eval_f32(v);
                        }
                    }
                };
                // Each value is its input's alone, so a large tensor (a prefill's gates) is
                // cut into chunks for the pool; a small one (a decode step's) stays here.
                if data.len() >= PARALLEL_MIN {
                    out.par_chunks_mut(CHUNK)
                        .zip(data.par_chunks(CHUNK))
                        .for_each(|(dst, src)| eval(src, dst));
                } else {
                    eval(&data, &mut out);
                }
                f32::store(x.dtype(), shape, out)?
            }
            other => unsupported!("{self:?} of {other} tensors"),
        };
        Ok(vec![y.into()])
    }

    /// samebits-math's functions and formulas, the f32 path of [`Elementwise::eval`].
    fn device_kernel(&self) -> Option<DeviceKernel> {
        match *self {
            Elementwise::Math(f) => Some(DeviceKernel::Unary(UnaryKernel::Math(f))),
            Elementwise::Composite(a) => Some(DeviceKernel::Unary(UnaryKernel::Activation(a))),
            _ => None,
        }
    }
}

/// Binary ops with broadcasting: PRelu (slope broadcast to X) and Pow.
#[derive(Clone, Copy, Debug)]
enum Binary {
    PRelu,
    Pow,
}

/// `x^y` in f32 (contract: activation, Pow): samebits-math's `pow`, C99 `powf` special cases
/// and correctly rounded (docs/math.md), the same bits on every backend.
pub fn pow_f32(x: f32, y: f32) -> f32 {
    samebits_math::pow(x, y)
}

/// `x^y` for integers: exact (wrapping) binary powering; a negative exponent is an error.
fn pow_int(x: i64, y: i64) -> Option<i64> {
    let mut n = u64::try_from(y).ok()?;
    let (mut result, mut base) = (1i64, x);
    while n > 0 {
        if n & 1 == 1 {
            result = result.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        n >>= 1;
    }
    Some(result)
}

impl Binary {
    fn pow(a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let exponents = b.to_f64_vec()?;
        match a.dtype() {
            DType::F32 | DType::F16 | DType::BF16 => {
                let base = f32::read(a, "input 0 (X)")?;
                let y: Vec<f32> = exponents.iter().map(|&e| e as f32).collect();
                let (shape, out) = map2(&base, a.shape(), &y, b.shape(), pow_f32)?;
                f32::store(a.dtype(), shape, out)
            }
            DType::F64 => {
                let (shape, out) = map2(
                    a.as_slice::<f64>()?,
                    a.shape(),
                    &exponents,
                    b.shape(),
                    f64::powf,
                )?;
                Ok(Tensor::from_vec(shape, out)?)
            }
            DType::I32 | DType::I64 if b.dtype().is_int() => {
                let (shape, out) = map2(
                    &a.to_i64_vec()?,
                    a.shape(),
                    &b.to_i64_vec()?,
                    b.shape(),
                    pow_int,
                )?;
                let Some(out) = out.into_iter().collect::<Option<Vec<i64>>>() else {
                    bail!("input 1 (Y) holds a negative exponent for an integer base");
                };
                Ok(if a.dtype() == DType::I32 {
                    Tensor::from_vec(shape, out.into_iter().map(|v| v as i32).collect())?
                } else {
                    Tensor::from_vec(shape, out)?
                })
            }
            DType::I32 | DType::I64 => {
                // Integer base, float exponent: binary64 power truncated (ONNX's reference).
                let (shape, out) = map2(
                    &a.to_f64_vec()?,
                    a.shape(),
                    &exponents,
                    b.shape(),
                    f64::powf,
                )?;
                Ok(if a.dtype() == DType::I32 {
                    Tensor::from_vec(shape, out.into_iter().map(|v| v as i32).collect())?
                } else {
                    Tensor::from_vec(shape, out.into_iter().map(|v| v as i64).collect())?
                })
            }
            other => unsupported!("Pow with base of type {other} and exponent {}", b.dtype()),
        }
    }

    fn prelu(x: &Tensor, slope: &Tensor) -> Result<Tensor> {
        if slope.dtype() != x.dtype() {
            bail!(
                "input 1 (slope) must have the dtype of input 0 ({}), got {}",
                x.dtype(),
                slope.dtype()
            );
        }
        let f = |v: f32, s: f32| if v < 0.0 { s * v } else { v };
        if x.dtype() == DType::F64 {
            let (shape, out) = map2(
                x.as_slice::<f64>()?,
                x.shape(),
                slope.as_slice::<f64>()?,
                slope.shape(),
                |v, s| if v < 0.0 { s * v } else { v },
            )?;
            return Ok(Tensor::from_vec(shape, out)?);
        }
        let (xs, ss) = (
            f32::read(x, "input 0 (X)")?,
            f32::read(slope, "input 1 (slope)")?,
        );
        let (shape, out) = map2(&xs, x.shape(), &ss, slope.shape(), f)?;
        if shape != x.shape() {
            bail!(
                "input 1 (slope) of shape {:?} does not broadcast to X's shape {:?}",
                slope.shape(),
                x.shape()
            );
        }
        f32::store(x.dtype(), shape, out)
    }
}

impl Op for Binary {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let dtype = inputs.first().and_then(|t| t.as_ref()?.dtype());
        Ok(vec![dtype.map(|d| ValueType::tensor(d, None))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (a, b) = (inputs.tensor(0)?, inputs.tensor(1)?);
        let y = match self {
            Binary::Pow => Binary::pow(a, b)?,
            Binary::PRelu => Binary::prelu(a, b)?,
        };
        Ok(vec![y.into()])
    }

    /// Pow of f32 tensors is samebits-math's `pow` of each broadcast pair ([`pow_f32`]).
    fn device_kernel(&self) -> Option<DeviceKernel> {
        match self {
            Binary::Pow => Some(DeviceKernel::Binary(BinaryKernel::Pow)),
            Binary::PRelu => None,
        }
    }
}
