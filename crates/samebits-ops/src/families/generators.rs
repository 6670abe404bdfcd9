//! Generators: ops whose output is made from attributes and shapes rather than from input
//! elements (Constant, ConstantOfShape, Range, EyeLike). Float Range computes each element from
//! its index, `start + i * delta`, never by accumulation (docs/contract.md, "Range").

use super::cast::{cast_tensor, onnx_dtype};
use super::{input_dtype, output_of};
use crate::layout::{StridedView, move_elements};
use crate::registry::Registry;
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, OpError, Result, bail, unsupported};
use half::{bf16, f16};
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{DType, Tensor, Value, ValueType, with_numeric_type};

pub fn register(r: &mut Registry) {
    r.register("", "Constant", constant);
    r.register("", "ConstantOfShape", constant_of_shape);
    r.register("", "Range", |_| Ok(Box::new(Range)));
    r.register("", "EyeLike", eye_like);
}

/// Constant: the one value attribute, as a tensor.
#[derive(Debug)]
struct Constant(Tensor);

fn constant(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    let mut found = Vec::new();
    if let Some(t) = args.tensor("value")? {
        found.push(t);
    }
    if let Some(v) = args.float("value_float")? {
        found.push(Tensor::scalar(v));
    }
    if let Some(v) = args.floats("value_floats")? {
        found.push(Tensor::from_vec(vec![v.len()], v)?);
    }
    if let Some(v) = args.int("value_int")? {
        found.push(Tensor::scalar(v));
    }
    if let Some(v) = args.ints("value_ints")? {
        found.push(Tensor::from_vec(vec![v.len()], v)?);
    }
    if let Some(v) = args.string("value_string")? {
        found.push(Tensor::from_strings(vec![], vec![v])?);
    }
    if let Some(v) = args.strings("value_strings")? {
        found.push(Tensor::from_strings(vec![v.len()], v)?);
    }
    if args.has("sparse_value") {
        unsupported!("attribute \"sparse_value\": sparse tensors");
    }
    if found.len() != 1 {
        bail!(
            "Constant needs exactly one of value, value_float(s), value_int(s), value_string(s); has {}",
            found.len()
        );
    }
    Ok(Box::new(Constant(found.remove(0))))
}

impl Op for Constant {
    fn infer(&self, _inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![Some(ValueType::tensor(
            self.0.dtype(),
            Some(samebits_ir::Shape::known(self.0.shape())),
        ))])
    }

    fn eval(&self, _inputs: &Inputs) -> Result<Vec<Value>> {
        Ok(vec![self.0.clone().into()])
    }
}

/// ConstantOfShape: the one-element `value` (default f32 0) repeated over the shape input.
#[derive(Debug)]
struct ConstantOfShape(Tensor);

fn constant_of_shape(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let value = NodeArgs::new(ctx.node)
        .tensor("value")?
        .unwrap_or_else(|| Tensor::scalar(0f32));
    if value.numel() != 1 {
        bail!(
            "attribute \"value\" must hold one element, has shape {:?}",
            value.shape()
        );
    }
    Ok(Box::new(ConstantOfShape(value)))
}

impl Op for ConstantOfShape {
    fn infer(&self, _inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(output_of(Some(self.0.dtype())))
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let dims = inputs.ints(0, "input")?;
        let shape = dims
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| OpError::Invalid(format!("input shape {dims:?} holds a negative dim")))?;
        check_tensor_size("ConstantOfShape output", &shape, self.0.dtype())?;
        let view = StridedView {
            offset: 0,
            strides: vec![0; shape.len()],
            shape: shape.clone(),
        };
        Ok(vec![move_elements(&[&self.0], shape, &view)?.into()])
    }
}

/// An element type Range counts in.
trait RangeElem: samebits_ir::Element + Copy {
    /// `ceil((limit - start) / delta)`, clamped at 0; `None` when `delta` is zero.
    fn count(start: Self, limit: Self, delta: Self) -> Option<f64>;
    /// `start + i * delta`.
    fn nth(start: Self, delta: Self, i: usize) -> Self;
}

macro_rules! int_range {
    ($($t:ty),*) => {$(
        impl RangeElem for $t {
            fn count(start: Self, limit: Self, delta: Self) -> Option<f64> {
                let (s, l, d) = (start as i128, limit as i128, delta as i128);
                if d == 0 {
                    return None;
                }
                // Ceiling of the quotient: truncation rounds a positive inexact quotient down.
                let span = l - s;
                let q = span / d + i128::from(span % d != 0 && (span < 0) == (d < 0));
                Some(q.max(0) as f64)
            }
            fn nth(start: Self, delta: Self, i: usize) -> Self {
                (start as i128 + i as i128 * delta as i128) as $t
            }
        }
    )*};
}
int_range!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_range {
    ($($t:ty),*) => {$(
        impl RangeElem for $t {
            fn count(start: Self, limit: Self, delta: Self) -> Option<f64> {
                if delta == 0.0 {
                    return None;
                }
                let q = ((limit as f64 - start as f64) / delta as f64).ceil();
                Some(if q > 0.0 { q } else { 0.0 })
            }
            fn nth(start: Self, delta: Self, i: usize) -> Self {
                start + (i as $t) * delta
            }
        }
    )*};
}
float_range!(f32, f64);

macro_rules! half_range {
    ($($t:ty),*) => {$(
        impl RangeElem for $t {
            fn count(start: Self, limit: Self, delta: Self) -> Option<f64> {
                f32::count(start.to_f32(), limit.to_f32(), delta.to_f32())
            }
            /// Computed in f32 and rounded once (docs/contract.md, "Arithmetic").
            fn nth(start: Self, delta: Self, i: usize) -> Self {
                <$t>::from_f32(f32::nth(start.to_f32(), delta.to_f32(), i))
            }
        }
    )*};
}
half_range!(f16, bf16);

/// Range over every numeric type.
#[derive(Debug)]
struct Range;

fn range<T: RangeElem>(start: &Tensor, limit: &Tensor, delta: &Tensor) -> Result<Tensor> {
    let scalar = |t: &Tensor, name: &str| -> Result<T> {
        match t.as_slice::<T>()? {
            [v] => Ok(*v),
            _ => bail!("{name} must be a scalar, has shape {:?}", t.shape()),
        }
    };
    let (s, l, d) = (
        scalar(start, "start")?,
        scalar(limit, "limit")?,
        scalar(delta, "delta")?,
    );
    let Some(count) = T::count(s, l, d) else {
        bail!("delta must not be zero")
    };
    if count.is_nan() || count >= (1u64 << 48) as f64 {
        bail!("range from {s:?} to {l:?} by {d:?} has too many ({count}) elements");
    }
    let n = count as usize;
    check_tensor_size("Range output", &[n], start.dtype())?;
    let mut out = Vec::with_capacity(n);
    out.extend((0..n).map(|i| T::nth(s, d, i)));
    Ok(Tensor::from_vec(vec![n], out)?)
}

impl Op for Range {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(output_of(input_dtype(inputs, 0)))
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (start, limit, delta) = (inputs.tensor(0)?, inputs.tensor(1)?, inputs.tensor(2)?);
        if limit.dtype() != start.dtype() || delta.dtype() != start.dtype() {
            bail!(
                "start ({}), limit ({}) and delta ({}) must share a dtype",
                start.dtype(),
                limit.dtype(),
                delta.dtype()
            );
        }
        let out = with_numeric_type!(start.dtype(), T => range::<T>(start, limit, delta),
            else bail!("Range on {}: start, limit and delta must be numbers", start.dtype()));
        Ok(vec![out?.into()])
    }
}

/// EyeLike: ones on the diagonal `j - i == k` of a 2-D shape, zeros elsewhere, in `dtype`
/// (default: the input's).
#[derive(Debug)]
struct EyeLike {
    k: i64,
    dtype: Option<DType>,
}

fn eye_like(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    let dtype = args
        .int("dtype")?
        .map(|code| onnx_dtype(code, "dtype"))
        .transpose()?;
    if dtype == Some(DType::String) {
        bail!("attribute \"dtype\": EyeLike cannot make strings");
    }
    Ok(Box::new(EyeLike {
        k: args.int_or("k", 0)?,
        dtype,
    }))
}

impl Op for EyeLike {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(output_of(self.dtype.or(input_dtype(inputs, 0))))
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let [rows, cols] = *x.shape() else {
            bail!("input must be 2-D, has shape {:?}", x.shape())
        };
        let dtype = self.dtype.unwrap_or(x.dtype());
        if dtype == DType::String {
            bail!("EyeLike cannot make strings");
        }
        let diagonal = (0..rows * cols)
            .map(|p| (p % cols) as i64 - (p / cols) as i64 == self.k)
            .collect();
        let mask = Tensor::from_bools(vec![rows, cols], diagonal)?;
        Ok(vec![cast_tensor(&mask, dtype)?.into()])
    }
}
