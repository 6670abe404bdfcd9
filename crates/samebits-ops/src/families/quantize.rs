//! Linear quantization: QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear, per tensor,
//! per axis or blocked (`block_size`), to and from int8/uint8/int16/uint16, int4/uint4,
//! int2/uint2, float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz) and float4 e2m1 (and from int32 for
//! DequantizeLinear), and QLinearMatMul (integer products, then one requantization). The formulas, operation by operation, are in docs/contract.md,
//! "Quantization"; float8 and float4 values convert by `samebits_ir::small_types`, and their
//! zero points must be zero.

use crate::registry::Registry;
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, OpError, Result, bail, unsupported};
use half::{bf16, f16};
use samebits_ir::{DType, Element, Shape, Tensor, Value, ValueType, small_types};

pub fn register(r: &mut Registry) {
    r.register("", "QuantizeLinear", quantize_linear);
    r.register("", "DequantizeLinear", dequantize_linear);
    r.register("", "DynamicQuantizeLinear", |_| {
        Ok(Box::new(DynamicQuantizeLinear))
    });
    r.register("", "QLinearMatMul", |_| Ok(Box::new(QLinearMatMul)));
    r.register("", "QLinearConv", |ctx| {
        Ok(Box::new(QLinearConv {
            conv: super::conv::integer_conv("QLinearConv", ctx)?,
        }))
    });
}

/// An integer type quantized values are stored in.
trait QuantInt: Element + Copy {
    const MIN: i64;
    const MAX: i64;
    /// `v`, already within `MIN..=MAX`.
    fn from_in_range(v: i64) -> Self;
}

macro_rules! quant_int {
    ($($t:ty),*) => {$(
        impl QuantInt for $t {
            const MIN: i64 = <$t>::MIN as i64;
            const MAX: i64 = <$t>::MAX as i64;
            fn from_in_range(v: i64) -> Self {
                v as $t
            }
        }
    )*};
}
quant_int!(i8, u8, i16, u16);

/// Runs `$body` with `$Q` bound to the quantized integer type of `$dtype`.
macro_rules! with_quant_int {
    ($dtype:expr, $Q:ident => $body:expr, else $other:expr) => {
        match $dtype {
            DType::I8 => {
                type $Q = i8;
                $body
            }
            DType::U8 => {
                type $Q = u8;
                $body
            }
            DType::I16 => {
                type $Q = i16;
                $body
            }
            DType::U16 => {
                type $Q = u16;
                $body
            }
            _ => $other,
        }
    };
}

/// The quantized dtype of an ONNX dtype code (attribute `output_dtype`).
fn quantized_dtype(code: i64) -> Result<DType> {
    Ok(match code {
        2 => DType::U8,
        3 => DType::I8,
        4 => DType::U16,
        5 => DType::I16,
        17 => DType::F8E4M3FN,
        18 => DType::F8E4M3FNUZ,
        19 => DType::F8E5M2,
        20 => DType::F8E5M2FNUZ,
        21 => DType::U4,
        22 => DType::I4,
        23 => DType::F4E2M1,
        25 => DType::U2,
        26 => DType::I2,
        other => bail!("attribute \"output_dtype\" = {other} is not a quantized dtype"),
    })
}

/// The float format a division or a result is rounded to.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Precision {
    F32,
    F16,
    BF16,
}

impl Precision {
    fn of(dtype: DType, what: &str) -> Result<Precision> {
        Ok(match dtype {
            DType::F32 => Precision::F32,
            DType::F16 => Precision::F16,
            DType::BF16 => Precision::BF16,
            other => bail!("{what} must be float32, float16 or bfloat16, got {other}"),
        })
    }

    fn from_code(code: i64, attribute: &str) -> Result<Precision> {
        Ok(match code {
            1 => Precision::F32,
            10 => Precision::F16,
            16 => Precision::BF16,
            other => bail!(
                "attribute \"{attribute}\" = {other}: expected 1 (float), 10 (float16) or 16 \
                 (bfloat16)"
            ),
        })
    }

    fn dtype(self) -> DType {
        match self {
            Precision::F32 => DType::F32,
            Precision::F16 => DType::F16,
            Precision::BF16 => DType::BF16,
        }
    }

    /// `v` rounded to this format (nearest, ties to even), widened back exactly.
    fn round(self, v: f64) -> f64 {
        match self {
            Precision::F32 => v as f32 as f64,
            Precision::F16 => f16::from_f64(v).to_f64(),
            Precision::BF16 => bf16::from_f64(v).to_f64(),
        }
    }

    /// The correctly rounded quotient in this format of two values of this format: an f32
    /// division, then (f16, bf16) one rounding, which equals a direct division in the narrow
    /// format because f32 has more than twice its precision plus two bits.
    fn divide(self, a: f64, b: f64) -> f64 {
        self.round(((a as f32) / (b as f32)) as f64)
    }

    /// An f32 result stored in this format.
    fn store(self, shape: Vec<usize>, values: Vec<f32>) -> Result<Tensor> {
        Ok(match self {
            Precision::F32 => Tensor::from_vec(shape, values)?,
            Precision::F16 => {
                Tensor::from_vec(shape, values.into_iter().map(f16::from_f32).collect())?
            }
            Precision::BF16 => {
                Tensor::from_vec(shape, values.into_iter().map(bf16::from_f32).collect())?
            }
        })
    }
}

/// `round_half_even(q) + zero_point` clamped to `lo..=hi` for a quotient `q`; NaN rounds to 0
/// (contract: quantize-linear).
fn round_clamp(q: f64, zero_point: i64, lo: i64, hi: i64) -> i64 {
    let r = q.round_ties_even();
    let r = if r.is_nan() { 0.0 } else { r };
    (r + zero_point as f64).clamp(lo as f64, hi as f64) as i64
}

/// [`round_clamp`] to the range of `Q`.
fn saturate_round<Q: QuantInt>(q: f64, zero_point: i64) -> Q {
    Q::from_in_range(round_clamp(q, zero_point, Q::MIN, Q::MAX))
}

/// The float8 and float4 types QuantizeLinear and DequantizeLinear handle (not e8m0).
fn is_quant_float(dtype: DType) -> bool {
    dtype.is_small_float() && dtype != DType::F8E8M0
}

/// Which scale / zero-point element each element of `x` uses.
#[derive(Debug)]
enum ParamLayout {
    PerTensor,
    PerAxis {
        dim: usize,
        inner: usize,
    },
    Blocked {
        dim: usize,
        inner: usize,
        block: usize,
        blocks: usize,
    },
}

impl ParamLayout {
    fn new(x: &[usize], scale: &[usize], axis: i64, block_size: i64) -> Result<ParamLayout> {
        if scale.iter().product::<usize>() == 1 {
            return Ok(ParamLayout::PerTensor);
        }
        let axis = crate::normalize_axis(axis, x.len())
            .map_err(|e| OpError::Invalid(format!("attribute \"axis\": {e}")))?;
        let (dim, inner) = (x[axis], x[axis + 1..].iter().product());
        if block_size < 0 {
            bail!("attribute \"block_size\" is {block_size}, it must be >= 0");
        }
        if block_size == 0 {
            if scale != [dim] {
                bail!(
                    "scale of shape {scale:?} is neither a scalar nor a vector of the {dim} \
                     elements of axis {axis} of x {x:?}"
                );
            }
            return Ok(ParamLayout::PerAxis { dim, inner });
        }
        let block = block_size as usize;
        let blocks = dim.div_ceil(block);
        let mut expected = x.to_vec();
        expected[axis] = blocks;
        if scale != expected {
            bail!(
                "blocked scale must have shape {expected:?} (x {x:?} with axis {axis} in blocks \
                 of {block}), got {scale:?}"
            );
        }
        Ok(ParamLayout::Blocked {
            dim,
            inner,
            block,
            blocks,
        })
    }

    /// The scale index of element `i` (row-major) of x.
    fn index(&self, i: usize) -> usize {
        match *self {
            ParamLayout::PerTensor => 0,
            ParamLayout::PerAxis { dim, inner } => (i / inner) % dim,
            ParamLayout::Blocked {
                dim,
                inner,
                block,
                blocks,
            } => {
                let (outer, along, within) = (i / (dim * inner), (i / inner) % dim, i % inner);
                (outer * blocks + along / block) * inner + within
            }
        }
    }
}

/// Checks that the zero point (when given) matches the scale's shape (or both hold one
/// element) and is zero for float8 and float4 types, and returns its values.
fn zero_points(zp: Option<&Tensor>, scale: &Tensor, count: usize) -> Result<Vec<f64>> {
    match zp {
        None => Ok(vec![0.0; count]),
        // A one-element zero point goes with a scalar scale whatever its rank (ONNX's own
        // tests pair a `[1]` zero point with a `[]` scale).
        Some(z) if z.shape() != scale.shape() && (z.numel() != 1 || scale.numel() != 1) => bail!(
            "zero point of shape {:?} does not match the scale's shape {:?}",
            z.shape(),
            scale.shape()
        ),
        Some(z) => {
            let values = z.to_f64_vec()?;
            if is_quant_float(z.dtype()) && values.iter().any(|&v| v != 0.0) {
                bail!("a {} zero point must be zero", z.dtype());
            }
            Ok(values)
        }
    }
}

/// The `axis` and `block_size` attributes shared by QuantizeLinear and DequantizeLinear.
fn axis_and_block(ctx: &BuildContext) -> Result<(i64, i64)> {
    let args = NodeArgs::new(ctx.node);
    Ok((args.int_or("axis", 1)?, args.int_or("block_size", 0)?))
}

#[derive(Debug)]
struct QuantizeLinear {
    axis: i64,
    block_size: i64,
    output_dtype: Option<DType>,
    precision: Option<Precision>,
    /// Float8 outputs: clamp out-of-range values to the largest finite value (else inf/NaN).
    saturate: bool,
}

fn quantize_linear(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    let (axis, block_size) = axis_and_block(ctx)?;
    let output_dtype = match args.int_or("output_dtype", 0)? {
        0 => None,
        code => Some(quantized_dtype(code)?),
    };
    let precision = match args.int_or("precision", 0)? {
        0 => None,
        code => Some(Precision::from_code(code, "precision")?),
    };
    Ok(Box::new(QuantizeLinear {
        axis,
        block_size,
        output_dtype,
        precision,
        saturate: args.int_or("saturate", 1)? != 0,
    }))
}

impl QuantizeLinear {
    /// The output dtype: the zero point's, else `output_dtype`, else uint8.
    fn output(&self, zero_point: Option<DType>) -> Result<DType> {
        let dtype = match (zero_point, self.output_dtype) {
            (Some(z), Some(o)) if z != o => {
                bail!("zero point has dtype {z}, attribute \"output_dtype\" says {o}")
            }
            (Some(z), _) => z,
            (None, Some(o)) => o,
            (None, None) => DType::U8,
        };
        if dtype.is_small_int() || is_quant_float(dtype) {
            return Ok(dtype);
        }
        with_quant_int!(dtype, Q => Ok(Q::DTYPE), else {
            bail!(
                "cannot quantize to {dtype}: an 8-, 16-, 4- or 2-bit integer, float8 (not e8m0) \
                 or float4 expected"
            )
        })
    }
}

impl Op for QuantizeLinear {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let zp = inputs.get(2).cloned().flatten().and_then(|t| t.dtype());
        let shape = inputs
            .first()
            .cloned()
            .flatten()
            .and_then(|t| t.shape().cloned());
        Ok(vec![Some(ValueType::tensor(self.output(zp)?, shape))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (x, scale, zp) = (inputs.tensor(0)?, inputs.tensor(1)?, inputs.opt_tensor(2)?);
        if !matches!(
            x.dtype(),
            DType::F32 | DType::F16 | DType::BF16 | DType::I32
        ) {
            bail!(
                "input 0 (x) must be float32, float16, bfloat16 or int32, got {}",
                x.dtype()
            );
        }
        let precision = match self.precision {
            Some(p) => p,
            None => Precision::of(scale.dtype(), "input 1 (y_scale)")?,
        };
        let out = self.output(zp.map(Tensor::dtype))?;
        let layout = ParamLayout::new(x.shape(), scale.shape(), self.axis, self.block_size)?;
        let scales: Vec<f64> = scale
            .to_f64_vec()?
            .into_iter()
            .map(|s| precision.round(s))
            .collect();
        let zero_points = zero_points(zp, scale, scales.len())?;
        let xs = x.to_f64_vec()?;
        let quotient = |i: usize, v: f64| {
            // contract: quantize-linear
            let p = layout.index(i);
            (
                precision.divide(precision.round(v), scales[p]),
                zero_points[p],
            )
        };
        if out.is_storage_only() {
            let codes = xs
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let (q, zp) = quotient(i, v);
                    match small_types::int_range(out) {
                        Some((lo, hi)) => round_clamp(q, zp as i64, lo, hi) as u8,
                        // Float zero points are zero (checked by `zero_points`).
                        None => small_types::encode_float(out, q, self.saturate)
                            .expect("float8/float4 output checked by QuantizeLinear::output"),
                    }
                })
                .collect();
            return Ok(vec![
                Tensor::from_codes(out, x.shape().to_vec(), codes)?.into(),
            ]);
        }
        with_quant_int!(out, Q => {
            let q: Vec<Q> = xs
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let (q, zp) = quotient(i, v);
                    saturate_round(q, zp as i64)
                })
                .collect();
            Ok(vec![Tensor::from_vec(x.shape().to_vec(), q)?.into()])
        }, else unreachable!("output dtype checked by QuantizeLinear::output"))
    }
}

#[derive(Debug)]
struct DequantizeLinear {
    axis: i64,
    block_size: i64,
    output_dtype: Option<Precision>,
}

fn dequantize_linear(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let (axis, block_size) = axis_and_block(ctx)?;
    let output_dtype = match NodeArgs::new(ctx.node).int_or("output_dtype", 0)? {
        0 => None,
        code => Some(Precision::from_code(code, "output_dtype")?),
    };
    Ok(Box::new(DequantizeLinear {
        axis,
        block_size,
        output_dtype,
    }))
}

impl Op for DequantizeLinear {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let dtype = match self.output_dtype {
            Some(p) => Some(p.dtype()),
            None => inputs.get(1).cloned().flatten().and_then(|t| t.dtype()),
        };
        let shape = inputs
            .first()
            .cloned()
            .flatten()
            .and_then(|t| t.shape().cloned());
        Ok(vec![dtype.map(|d| ValueType::tensor(d, shape))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (x, scale, zp) = (inputs.tensor(0)?, inputs.tensor(1)?, inputs.opt_tensor(2)?);
        if !(matches!(
            x.dtype(),
            DType::I8 | DType::U8 | DType::I16 | DType::U16 | DType::I32
        ) || x.dtype().is_small_int()
            || is_quant_float(x.dtype()))
        {
            unsupported!(
                "DequantizeLinear of {}: an 8-, 16-, 32-, 4- or 2-bit integer, float8 (not e8m0) \
                 or float4 expected",
                x.dtype()
            );
        }
        if let Some(z) = zp
            && z.dtype() != x.dtype()
        {
            bail!(
                "input 2 (x_zero_point) has dtype {}, x has {}",
                z.dtype(),
                x.dtype()
            );
        }
        let out = match self.output_dtype {
            Some(p) => p,
            None => Precision::of(scale.dtype(), "input 1 (x_scale)")?,
        };
        let layout = ParamLayout::new(x.shape(), scale.shape(), self.axis, self.block_size)?;
        let scales: Vec<f32> = scale.to_f64_vec()?.into_iter().map(|s| s as f32).collect();
        let zero_points = zero_points(zp, scale, scales.len())?;
        let y: Vec<f32> = x
            .to_f64_vec()?
            .into_iter()
            .enumerate()
            .map(|(i, q)| {
                // contract: dequantize-linear
                let p = layout.index(i);
                (q - zero_points[p]) as f32 * scales[p]
            })
            .collect();
        Ok(vec![out.store(x.shape().to_vec(), y)?.into()])
    }
}

/// DynamicQuantizeLinear: uint8 quantization with a scale and zero point taken from the range
/// of x (widened to include 0).
#[derive(Debug)]
struct DynamicQuantizeLinear;

impl Op for DynamicQuantizeLinear {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let shape = inputs
            .first()
            .cloned()
            .flatten()
            .and_then(|t| t.shape().cloned());
        let scalar = Some(Shape::known(&[]));
        Ok(vec![
            Some(ValueType::tensor(DType::U8, shape)),
            Some(ValueType::tensor(DType::F32, scalar.clone())),
            Some(ValueType::tensor(DType::U8, scalar)),
        ])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let xs = x.as_slice::<f32>().map_err(|_| {
            OpError::Invalid(format!("input 0 (x) must be float32, got {}", x.dtype()))
        })?;
        // contract: dynamic-quantize-linear. f32::max / f32::min skip NaN; starting from 0
        // includes 0 in the range.
        let max = xs.iter().fold(0f32, |m, &v| m.max(v));
        let min = xs.iter().fold(0f32, |m, &v| m.min(v));
        let scale = if max == min { 1.0 } else { max - min } / 255.0;
        let zero_point = (0.0 - min / scale).clamp(0.0, 255.0).round_ties_even();
        let zero_point = zero_point as i64;
        let y: Vec<u8> = xs
            .iter()
            .map(|&v| saturate_round(Precision::F32.divide(v as f64, scale as f64), zero_point))
            .collect();
        Ok(vec![
            Tensor::from_vec(x.shape().to_vec(), y)?.into(),
            Tensor::scalar(scale).into(),
            Tensor::scalar(zero_point as u8).into(),
        ])
    }
}

/// QLinearMatMul (opsets 10 and 21; contract: qlinear-matmul): `C = (A - a_zp) x (B - b_zp)`
/// exactly in i32, then per output `y = saturate(round_half_even(f64(C) * f64(M)) + y_zp)` with
/// the multiplier `M = P(P(a_s * b_s) / y_s)` in the scales' precision `P`. Scales and zero
/// points of A are per tensor or per row, those of B per tensor or per column.
#[derive(Debug)]
struct QLinearMatMul;

/// The scale values of input `i` of `op` (`what` in errors): one, or `count` of them.
fn qlinear_scales(
    op: &str,
    inputs: &Inputs,
    i: usize,
    what: &str,
    count: usize,
) -> Result<Vec<f64>> {
    let t = inputs.tensor(i)?;
    let values = t.to_f64_vec()?;
    if values.len() != 1 && values.len() != count {
        bail!(
            "{op}: input {i} ({what}) has {} elements; expected 1 or {count}",
            values.len()
        );
    }
    Ok(values)
}

/// What the QLinear ops share (contract: qlinear-matmul): the scales' precision `P` (input 1's
/// dtype, inputs 4 and 6 of the same), the one y_scale, and the output zero point and dtype.
struct Requantization {
    precision: Precision,
    y_scale: f64,
    y_zp: i64,
    dtype: DType,
}

impl Requantization {
    /// The output's type: y_zero_point's dtype (input 7), u8 without one.
    fn output_type(inputs: &[Option<ValueType>]) -> ValueType {
        let dtype = inputs
            .get(7)
            .and_then(|t| t.as_ref()?.dtype())
            .unwrap_or(DType::U8);
        ValueType::tensor(dtype, None)
    }

    fn of(op: &str, inputs: &Inputs) -> Result<Requantization> {
        let scale = inputs.tensor(1)?;
        let precision = Precision::of(scale.dtype(), &format!("{op} input 1"))?;
        for (i, what) in [(4, "the second operand's scale"), (6, "y_scale")] {
            let dtype = inputs.tensor(i)?.dtype();
            if dtype != scale.dtype() {
                bail!(
                    "{op}: input {i} ({what}) has dtype {dtype}, input 1 {}",
                    scale.dtype()
                );
            }
        }
        let y_scale = match qlinear_scales(op, inputs, 6, "y_scale", 1)?.as_slice() {
            [s] => *s,
            _ => bail!("{op}: input 6 (y_scale) must hold one element"),
        };
        let (y_zp, dtype) = match inputs.opt_tensor(7)? {
            Some(z) if z.numel() == 1 => (z.to_i64_vec()?[0], z.dtype()),
            Some(z) => bail!(
                "{op}: input 7 (y_zero_point) must hold one element, got shape {:?}",
                z.shape()
            ),
            None => (0, DType::U8),
        };
        Ok(Requantization {
            precision,
            y_scale,
            y_zp,
            dtype,
        })
    }

    /// `M = P(P(sa * sb) / y_s)`.
    fn multiplier(&self, sa: f64, sb: f64) -> f64 {
        self.precision
            .divide(self.precision.round(sa * sb), self.y_scale)
    }

    /// `saturate(round_half_even(f64(C) * f64(M)) + y_zp)` of every value, `multiplier(e)`
    /// giving element `e`'s `M`.
    fn apply(
        &self,
        op: &str,
        shape: Vec<usize>,
        values: &[i32],
        multiplier: impl Fn(usize) -> f64,
    ) -> Result<Tensor> {
        let dtype = self.dtype;
        Ok(with_quant_int!(dtype, Q => {
            let out: Vec<Q> = values
                .iter()
                .enumerate()
                .map(|(e, &c)| saturate_round::<Q>((c as f64) * multiplier(e), self.y_zp))
                .collect();
            Tensor::from_vec(shape, out)?
        }, else unsupported!("{op} output of dtype {dtype} (y_zero_point: u8 or i8)")))
    }
}

impl Op for QLinearMatMul {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![Some(Requantization::output_type(inputs))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (a, b) = (inputs.tensor(0)?, inputs.tensor(3)?);
        let products = super::linalg::integer_matmul(
            "QLinearMatMul",
            a,
            inputs.opt_tensor(2)?,
            b,
            inputs.opt_tensor(5)?,
        )?;
        let (m, n, shape) = (products.m, products.n, products.shape);
        let requantization = Requantization::of("QLinearMatMul", inputs)?;
        let a_scale = qlinear_scales("QLinearMatMul", inputs, 1, "a_scale", m)?;
        let b_scale = qlinear_scales("QLinearMatMul", inputs, 4, "b_scale", n)?;
        // The multiplier of output (i, j) (contract: qlinear-matmul).
        let multiplier = |e: usize| {
            let (i, j) = (e / n % m, e % n);
            requantization.multiplier(a_scale[i % a_scale.len()], b_scale[j % b_scale.len()])
        };
        let out = requantization.apply("QLinearMatMul", shape, &products.values, multiplier)?;
        Ok(vec![out.into()])
    }
}

/// QLinearConv (opset 10; contract: qlinear-matmul's requantization over ConvInteger's exact
/// sums): `C = conv(x - x_zp, w - w_zp) + B` in i32 (ConvInteger's kernel; the bias `[M]` i32
/// added wrapping), then `y = saturate(round_half_even(f64(C) * f64(M_m)) + y_zp)` with
/// `M_m = P(P(x_s * w_s[m]) / y_s)` per output channel `m` (w_scale per tensor or per channel).
#[derive(Debug)]
struct QLinearConv {
    /// ConvInteger with this node's attributes.
    conv: Box<dyn Op>,
}

impl Op for QLinearConv {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![Some(Requantization::output_type(inputs))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        const OP: &str = "QLinearConv";
        let get = |i: usize| inputs.get(i).copied().flatten();
        let integer: Vec<Option<&Value>> = vec![get(0), get(3), get(2), get(5)];
        let sums = self.conv.eval(&integer)?.remove(0);
        let sums = sums.as_tensor()?;
        let shape = sums.shape().to_vec();
        let channels = shape.get(1).copied().unwrap_or(0);
        let plane: usize = shape.iter().skip(2).product();
        // The output channel of element e of [N, M, spatial..].
        let channel_of = |e: usize| e / plane.max(1) % channels.max(1);
        let mut values = sums.as_slice::<i32>()?.to_vec();
        if let Some(bias) = inputs.opt_tensor(8)? {
            if bias.dtype() != DType::I32 || bias.numel() != channels {
                bail!(
                    "{OP}: input 8 (B) must be {channels} int32 values, got {} of shape {:?}",
                    bias.dtype(),
                    bias.shape()
                );
            }
            let bias = bias.as_slice::<i32>()?;
            for (e, v) in values.iter_mut().enumerate() {
                *v = v.wrapping_add(bias[channel_of(e)]);
            }
        }
        let requantization = Requantization::of(OP, inputs)?;
        let x_scale = qlinear_scales(OP, inputs, 1, "x_scale", 1)?;
        let w_scale = qlinear_scales(OP, inputs, 4, "w_scale", channels)?;
        let multiplier = |e: usize| {
            requantization.multiplier(x_scale[0], w_scale[channel_of(e) % w_scale.len()])
        };
        let out = requantization.apply(OP, shape, &values, multiplier)?;
        Ok(vec![out.into()])
    }
}
