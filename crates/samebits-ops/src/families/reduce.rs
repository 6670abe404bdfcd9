//! Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
//! ReduceSumSquare, ReduceLogSum, ReduceLogSumExp, ArgMax, ArgMin, CumSum and CumProd, and
//! `samebits::SumToShape` (a broadcast gradient summed back to its operand's shape, written by
//! the differentiation pass).
//!
//! Every reduction views its input as `[outer, len, inner]` (contract section `reduce-axes`:
//! several reduced axes are one reduction over the row-major order of the reduced index tuple)
//! and reduces in the order of `canonical-sum` / `reduce-extrema`. f32 runs on the
//! `samebits_kernels` reductions, f64 and integers on the same order in scalar code (integers
//! wrap), f16 and bf16 compute in f32 and round at the store.

use super::numeric::{
    Dims, Layout, Num, Real, fold_axis, normalize_axes, with_num_type, with_real_type,
};
use crate::device_kernel::input_shape;
use crate::registry::Registry;
use crate::{
    BuildContext, DeviceKernel, Inputs, InputsExt, NodeArgs, Op, OpError, Result, ShapedKernel,
    bail, normalize_axis, unsupported,
};
use samebits_ir::{DType, Shape, Tensor, Value, ValueType};
use samebits_kernels::{ArgKind, ReduceKind, argreduce_f32, reduce_f32};
use std::cmp::Ordering;

pub fn register(r: &mut Registry) {
    r.register("", "ReduceSum", |ctx| Reduce::build(ctx, Reduction::Sum));
    r.register("", "ReduceMean", |ctx| Reduce::build(ctx, Reduction::Mean));
    r.register("", "ReduceMax", |ctx| Reduce::build(ctx, Reduction::Max));
    r.register("", "ReduceMin", |ctx| Reduce::build(ctx, Reduction::Min));
    r.register("", "ReduceProd", |ctx| Reduce::build(ctx, Reduction::Prod));
    r.register("", "ReduceL1", |ctx| Reduce::build(ctx, Reduction::L1));
    r.register("", "ReduceL2", |ctx| Reduce::build(ctx, Reduction::L2));
    r.register("", "ReduceSumSquare", |ctx| {
        Reduce::build(ctx, Reduction::SumSquare)
    });
    r.register("", "ReduceLogSum", |ctx| {
        Reduce::build(ctx, Reduction::LogSum)
    });
    r.register("", "ReduceLogSumExp", |ctx| {
        Reduce::build(ctx, Reduction::LogSumExp)
    });
    r.register("", "ArgMax", |ctx| ArgReduce::build(ctx, ArgKind::ArgMax));
    r.register("", "ArgMin", |ctx| ArgReduce::build(ctx, ArgKind::ArgMin));
    r.register("", "CumSum", |ctx| Cumulative::build(ctx, false));
    r.register("", "CumProd", |ctx| Cumulative::build(ctx, true));
    r.register("samebits", "SumToShape", |_| Ok(Box::new(SumToShape)));
}

/// Reductions along the middle axis in the canonical order, per element type: f32 on the
/// vectorised kernels, the other types on the scalar form of the same order.
trait AxisReduce: Num {
    fn reduce_axis(kind: ReduceKind, data: &[Self], dims: Dims) -> Vec<Self> {
        match kind {
            ReduceKind::Sum => fold_axis(data, dims, Self::ZERO, Num::add, Num::add),
            ReduceKind::SumSquares => fold_axis(data, dims, Self::ZERO, Self::add_square, Num::add),
            ReduceKind::Prod => fold_axis(data, dims, Self::ONE, Num::mul, Num::mul),
            ReduceKind::Max => fold_axis(data, dims, Self::LOWEST, Num::max, Num::max),
            ReduceKind::Min => fold_axis(data, dims, Self::HIGHEST, Num::min, Num::min),
        }
    }

    /// Contract section `reduce-extrema`: NaN is the extreme, ties give the first index (the
    /// last with `last`). `len > 0`.
    fn argreduce_axis(kind: ArgKind, last: bool, data: &[Self], dims: Dims) -> Vec<i64> {
        let (outer, len, inner) = dims;
        let more_extreme = |x: Self, best: Self| match (x.is_nan(), best.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => match kind {
                ArgKind::ArgMax => x.order(best),
                ArgKind::ArgMin => best.order(x),
            },
        };
        let mut out = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            for i in 0..inner {
                let at = |k: usize| data[(o * len + k) * inner + i];
                let mut best = 0;
                for k in 1..len {
                    match more_extreme(at(k), at(best)) {
                        Ordering::Greater => best = k,
                        Ordering::Equal if last => best = k,
                        _ => {}
                    }
                }
                out.push(best as i64);
            }
        }
        out
    }
}

impl AxisReduce for f32 {
    fn reduce_axis(kind: ReduceKind, data: &[f32], (outer, len, inner): Dims) -> Vec<f32> {
        let mut out = vec![0.0; outer * inner];
        reduce_f32(kind, data, outer, len, inner, &mut out);
        out
    }

    fn argreduce_axis(kind: ArgKind, last: bool, data: &[f32], dims: Dims) -> Vec<i64> {
        let (outer, len, inner) = dims;
        let mut out = vec![0; outer * inner];
        argreduce_f32(kind, last, data, outer, len, inner, &mut out);
        out
    }
}

macro_rules! scalar_axis_reduce {
    ($($t:ty),*) => {$(impl AxisReduce for $t {})*};
}
scalar_axis_reduce!(f64, i8, i16, i32, i64, u8, u16, u32, u64);

/// Runs `$body` with `$T` bound to the element type tensor `$x` is reduced in (its own type, f32
/// for f16 and bf16, u8 for bool), `$data` to its elements as `Vec<$T>`, and `$store` to a
/// closure `(shape, Vec<$T>) -> Result<Tensor>` that stores results in `$x`'s dtype.
macro_rules! with_reduce_type {
    ($x:expr, $T:ident, $data:ident, $store:ident => $body:expr) => {{
        let x: &Tensor = $x;
        let dtype = x.dtype();
        match dtype {
            DType::F16 | DType::BF16 => {
                type $T = f32;
                let $data: Vec<f32> = f32::read(x, "input 0")?.into_owned();
                let $store = |shape: Vec<usize>, v: Vec<f32>| f32::store(dtype, shape, v);
                let _ = &$store;
                $body
            }
            DType::Bool => {
                type $T = u8;
                let $data: Vec<u8> = x.as_bools()?.to_vec();
                let $store = |shape: Vec<usize>, v: Vec<u8>| -> Result<Tensor> {
                    Ok(Tensor::from_bools(shape, v.into_iter().map(|b| b != 0).collect())?)
                };
                let _ = &$store;
                $body
            }
            dt => with_num_type!(dt, $T => {
                let $data: Vec<$T> = x.as_slice::<$T>()?.to_vec();
                let $store = |shape: Vec<usize>, v: Vec<$T>| -> Result<Tensor> {
                    Ok(Tensor::from_vec(shape, v)?)
                };
                let _ = &$store;
                $body
            }, else unsupported!("{dt} tensors")),
        }
    }};
}

/// The output shape of a reduction over sorted `axes`.
fn reduced_shape(shape: &[usize], axes: &[usize], keepdims: bool) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .filter_map(|(a, &d)| match (axes.contains(&a), keepdims) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// Reads `keepdims` (0 or 1, default 1).
fn keepdims(args: &NodeArgs) -> Result<bool> {
    match args.int_or("keepdims", 1)? {
        0 => Ok(false),
        1 => Ok(true),
        other => bail!("attribute \"keepdims\" must be 0 or 1, got {other}"),
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Reduction {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    SumSquare,
    LogSum,
    LogSumExp,
}

impl Reduction {
    /// Whether the result ends in a float function (computed at a float precision).
    fn is_float_only(self) -> bool {
        matches!(
            self,
            Reduction::L2 | Reduction::LogSum | Reduction::LogSumExp
        )
    }

    /// The first opset where the axes are input 1 instead of an attribute.
    fn axes_input_since(self) -> i64 {
        if self == Reduction::Sum { 13 } else { 18 }
    }
}

/// The Reduce* ops.
#[derive(Debug)]
struct Reduce {
    reduction: Reduction,
    /// The `axes` attribute (older opsets).
    attr_axes: Option<Vec<i64>>,
    /// Whether input 1 holds the axes.
    axes_input: bool,
    keepdims: bool,
    noop_with_empty_axes: bool,
    /// Whether exp and log are samebits-math's (operation sets other than `default`).
    correctly_rounded: bool,
}

impl Reduce {
    fn build(ctx: &BuildContext, reduction: Reduction) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        Ok(Box::new(Reduce {
            reduction,
            attr_axes: args.ints("axes")?,
            axes_input: ctx.opset >= reduction.axes_input_since(),
            keepdims: keepdims(&args)?,
            noop_with_empty_axes: args.int_or("noop_with_empty_axes", 0)? != 0,
            correctly_rounded: ctx.operation_set.correctly_rounded_math(),
        }))
    }

    /// The requested axes (empty when none are given).
    fn axes(&self, inputs: &Inputs) -> Result<Vec<i64>> {
        if self.axes_input
            && let Some(t) = inputs.opt_tensor(1)?
        {
            return t
                .to_i64_vec()
                .map_err(|e| OpError::Invalid(format!("input 1 (axes): {e}")));
        }
        Ok(self.attr_axes.clone().unwrap_or_default())
    }

    /// The reduced axes of an input of rank `rank` (every axis when none are requested), or
    /// `None` for the identity (`noop_with_empty_axes`).
    fn axes_of(&self, inputs: &Inputs, rank: usize) -> Result<Option<Vec<usize>>> {
        let requested = self.axes(inputs)?;
        if requested.is_empty() && self.noop_with_empty_axes {
            return Ok(None);
        }
        Ok(Some(if requested.is_empty() {
            (0..rank).collect()
        } else {
            normalize_axes(&requested, rank)?
        }))
    }

    /// Reduces `data` (already in `layout` order) over the middle axis of `layout.dims`.
    fn reduce<T: AxisReduce>(&self, data: Vec<T>, dims: Dims) -> Result<Vec<T>> {
        let len = dims.1;
        Ok(match self.reduction {
            Reduction::Sum => T::reduce_axis(ReduceKind::Sum, &data, dims),
            // contract: reduce-mean
            Reduction::Mean => T::reduce_axis(ReduceKind::Sum, &data, dims)
                .into_iter()
                .map(|s| s.divide(T::from_count(len)))
                .collect(),
            Reduction::Max => T::reduce_axis(ReduceKind::Max, &data, dims),
            Reduction::Min => T::reduce_axis(ReduceKind::Min, &data, dims),
            Reduction::Prod => T::reduce_axis(ReduceKind::Prod, &data, dims),
            Reduction::L1 => {
                let magnitudes: Vec<T> = data.into_iter().map(Num::abs).collect();
                T::reduce_axis(ReduceKind::Sum, &magnitudes, dims)
            }
            Reduction::SumSquare => T::reduce_axis(ReduceKind::SumSquares, &data, dims),
            Reduction::L2 | Reduction::LogSum | Reduction::LogSumExp => {
                unreachable!("float-only reductions go through reduce_real")
            }
        })
    }

    /// The reductions that end in a float function, at working precision `R`.
    fn reduce_real<R: Real + AxisReduce>(&self, data: Vec<R>, dims: Dims) -> Vec<R> {
        let cr = self.correctly_rounded;
        match self.reduction {
            Reduction::L2 => R::reduce_axis(ReduceKind::SumSquares, &data, dims)
                .into_iter()
                .map(Real::sqrt)
                .collect(),
            Reduction::LogSum => R::reduce_axis(ReduceKind::Sum, &data, dims)
                .into_iter()
                .map(|s| s.ln(cr))
                .collect(),
            _ => {
                // contract: reduce-log-sum-exp
                let (_, len, inner) = dims;
                let max = R::reduce_axis(ReduceKind::Max, &data, dims);
                let shift = |m: R| if m.is_finite() { m } else { R::ZERO };
                let exps: Vec<R> = data
                    .iter()
                    .enumerate()
                    .map(|(flat, &x)| {
                        let (o, i) = (flat / (len * inner), flat % inner);
                        (x - shift(max[o * inner + i])).exp(cr)
                    })
                    .collect();
                R::reduce_axis(ReduceKind::Sum, &exps, dims)
                    .into_iter()
                    .zip(max)
                    .map(|(s, m)| s.ln(cr) + shift(m))
                    .collect()
            }
        }
    }
}

impl Op for Reduce {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let Some(Some(ty)) = inputs.first() else {
            return Ok(Vec::new());
        };
        let axes_known = !self.axes_input || inputs.get(1).is_none_or(|t| t.is_none());
        let shape = ty.shape().and_then(|s| s.concrete()).filter(|_| axes_known);
        let shape = match shape {
            Some(shape) => {
                let axes = self.attr_axes.clone().unwrap_or_default();
                if axes.is_empty() && self.noop_with_empty_axes {
                    Some(shape)
                } else if axes.is_empty() {
                    let all: Vec<usize> = (0..shape.len()).collect();
                    Some(reduced_shape(&shape, &all, self.keepdims))
                } else {
                    let axes = normalize_axes(&axes, shape.len())?;
                    Some(reduced_shape(&shape, &axes, self.keepdims))
                }
            }
            None => None,
        };
        Ok(vec![ty.dtype().map(|dt| {
            ValueType::tensor(dt, shape.map(|s| Shape::known(&s)))
        })])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Shaped)
    }

    /// The f32 reductions over adjacent axes (the axes input read on the host); ReduceMean
    /// divides by the count [`Num::from_count`] gives the CPU.
    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], inputs: &Inputs) -> Result<ShapedKernel> {
        let shape = input_shape(shapes, 0)?;
        let kind = match self.reduction {
            Reduction::Sum | Reduction::Mean => ReduceKind::Sum,
            Reduction::Max => ReduceKind::Max,
            Reduction::Min => ReduceKind::Min,
            Reduction::Prod => ReduceKind::Prod,
            Reduction::SumSquare => ReduceKind::SumSquares,
            other => bail!("no device kernel for {other:?}"),
        };
        let axes_given = shapes.get(1).copied().flatten().is_some();
        if self.axes_input && axes_given && inputs.get(1).copied().flatten().is_none() {
            bail!("the axes are not on the host");
        }
        let Some(axes) = self.axes_of(inputs, shape.len())? else {
            bail!("the identity runs on the CPU");
        };
        let layout = Layout::new(shape, &axes);
        if layout.perm.is_some() {
            bail!("axes {axes:?} are not adjacent");
        }
        let (outer, len, inner) = layout.dims;
        Ok(ShapedKernel::Reduce {
            kind,
            outer,
            len,
            inner,
            divisor: (self.reduction == Reduction::Mean).then(|| f32::from_count(len)),
            shape: reduced_shape(shape, &axes, self.keepdims),
        })
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let Some(axes) = self.axes_of(inputs, x.rank())? else {
            return Ok(vec![x.clone().into()]);
        };
        let layout = Layout::new(x.shape(), &axes);
        let out_shape = reduced_shape(x.shape(), &axes, self.keepdims);
        let dtype = x.dtype();
        let is_extremum = matches!(self.reduction, Reduction::Max | Reduction::Min);
        if dtype == DType::Bool && !is_extremum {
            unsupported!("{:?} of bool tensors", self.reduction);
        }
        let out = if self.reduction.is_float_only() {
            with_real_type!(dtype, R => {
                let data = layout.arrange(R::read(x, "input 0")?.into_owned(), x.shape());
                R::store(dtype, out_shape, self.reduce_real(data, layout.dims))?
            }, else {
                // Integers: the float result converted back (truncated), as ONNX's reference.
                let data = layout.arrange(x.to_f64_vec()?, x.shape());
                let values = self.reduce_real(data, layout.dims);
                with_num_type!(dtype, T => {
                    Tensor::from_vec(out_shape, values.into_iter().map(T::from_f64).collect::<Vec<T>>())?
                }, else unsupported!("{:?} of {dtype} tensors", self.reduction))
            })
        } else {
            with_reduce_type!(x, T, data, store => {
                let data = layout.arrange(data, x.shape());
                store(out_shape, self.reduce::<T>(data, layout.dims)?)?
            })
        };
        Ok(vec![out.into()])
    }
}

/// `samebits::SumToShape(g, like)`: `g` summed over the axes along which `like` was broadcast
/// to `g`'s shape (the leading axes `like` lacks, and `like`'s axes of length 1 where `g`'s are
/// longer), in `like`'s shape: ReduceSum over those axes (canonical-sum), so the gradient of a
/// broadcast operand (contract section `gradient`). Only `like`'s shape is read.
#[derive(Debug)]
struct SumToShape;

impl SumToShape {
    /// The axes of `g` that broadcasting `like` to it repeated along.
    fn axes(g: &[usize], like: &[usize]) -> Result<Vec<i64>> {
        let lead = g.len().checked_sub(like.len()).filter(|_| {
            like.iter()
                .zip(&g[g.len().saturating_sub(like.len())..])
                .all(|(&l, &d)| l == d || l == 1)
        });
        let Some(lead) = lead else {
            bail!("SumToShape: shape {like:?} does not broadcast to {g:?}");
        };
        Ok((0..g.len())
            .filter(|&a| a < lead || (like[a - lead] == 1 && g[a] != 1))
            .map(|a| a as i64)
            .collect())
    }
}

impl Op for SumToShape {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let dtype = inputs.first().and_then(|t| t.as_ref()?.dtype());
        let shape = inputs.get(1).and_then(|t| t.as_ref()?.shape().cloned());
        Ok(vec![dtype.map(|dt| ValueType::tensor(dt, shape))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (g, like) = (inputs.tensor(0)?, inputs.tensor(1)?);
        let axes = Self::axes(g.shape(), like.shape())?;
        if axes.is_empty() {
            return Ok(vec![g.clone().into()]);
        }
        let sum = Reduce {
            reduction: Reduction::Sum,
            attr_axes: Some(axes),
            axes_input: false,
            keepdims: true,
            noop_with_empty_axes: false,
            correctly_rounded: false,
        };
        let g_value = Value::from(g.clone());
        let summed = sum.eval(&[Some(&g_value)])?;
        let summed = summed[0]
            .as_tensor()
            .map_err(|e| OpError::Invalid(e.to_string()))?;
        Ok(vec![summed.reshaped(like.shape().to_vec())?.into()])
    }
}

/// ArgMax and ArgMin.
#[derive(Debug)]
struct ArgReduce {
    kind: ArgKind,
    axis: i64,
    keepdims: bool,
    select_last_index: bool,
}

impl ArgReduce {
    fn build(ctx: &BuildContext, kind: ArgKind) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        Ok(Box::new(ArgReduce {
            kind,
            axis: args.int_or("axis", 0)?,
            keepdims: keepdims(&args)?,
            select_last_index: args.int_or("select_last_index", 0)? != 0,
        }))
    }
}

impl Op for ArgReduce {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let shape = inputs.first().and_then(|t| t.as_ref()?.shape()?.concrete());
        let shape = match shape {
            Some(s) => {
                let axis = normalize_axis(self.axis, s.len())?;
                Some(Shape::known(&reduced_shape(&s, &[axis], self.keepdims)))
            }
            None => None,
        };
        Ok(vec![Some(ValueType::tensor(DType::I64, shape))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let axis = normalize_axis(self.axis, x.rank())
            .map_err(|e| OpError::Invalid(format!("attribute \"axis\": {e}")))?;
        let shape = x.shape();
        if shape[axis] == 0 {
            bail!("cannot take {:?} over axis {axis} of length 0", self.kind);
        }
        let dims = Layout::new(shape, &[axis]).dims;
        let out = with_reduce_type!(x, T, data, store => {
            T::argreduce_axis(self.kind, self.select_last_index, &data, dims)
        });
        let out_shape = reduced_shape(shape, &[axis], self.keepdims);
        Ok(vec![Tensor::from_vec(out_shape, out)?.into()])
    }
}

/// CumSum and CumProd: each output is the running sum `s = s + x_k` (product `s = s * x_k`)
/// in index order (reversed with `reverse`), starting at the first term, or at `0` (`1`) before
/// it with `exclusive`.
#[derive(Debug)]
struct Cumulative {
    product: bool,
    exclusive: bool,
    reverse: bool,
}

impl Cumulative {
    fn build(ctx: &BuildContext, product: bool) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        Ok(Box::new(Cumulative {
            product,
            exclusive: args.int_or("exclusive", 0)? != 0,
            reverse: args.int_or("reverse", 0)? != 0,
        }))
    }

    fn name(&self) -> &'static str {
        if self.product { "CumProd" } else { "CumSum" }
    }

    fn running_sums<T: Num>(&self, data: &[T], (outer, len, inner): Dims) -> Vec<T> {
        let (empty, combine): (T, fn(T, T) -> T) = if self.product {
            (T::ONE, Num::mul)
        } else {
            (T::ZERO, Num::add)
        };
        let mut out = vec![empty; data.len()];
        for o in 0..outer {
            for i in 0..inner {
                let at = |k: usize| (o * len + k) * inner + i;
                let mut sum: Option<T> = None;
                for step in 0..len {
                    let k = if self.reverse { len - 1 - step } else { step };
                    let next = match sum {
                        None => data[at(k)],
                        Some(s) => combine(s, data[at(k)]),
                    };
                    out[at(k)] = if self.exclusive {
                        sum.unwrap_or(empty)
                    } else {
                        next
                    };
                    sum = Some(next);
                }
            }
        }
        out
    }
}

impl Op for Cumulative {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![inputs.first().cloned().flatten()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let axis_tensor = inputs.tensor(1)?;
        let axis = match axis_tensor.to_i64_vec().as_deref() {
            Ok([axis]) => *axis,
            _ => bail!(
                "input 1 (axis) must be one integer, got a {} tensor of shape {:?}",
                axis_tensor.dtype(),
                axis_tensor.shape()
            ),
        };
        let axis = normalize_axis(axis, x.rank())
            .map_err(|e| OpError::Invalid(format!("input 1 (axis): {e}")))?;
        let dims = Layout::new(x.shape(), &[axis]).dims;
        let dtype = x.dtype();
        if dtype == DType::Bool {
            unsupported!("{} of bool tensors", self.name());
        }
        let out = with_reduce_type!(x, T, data, store => {
            store(x.shape().to_vec(), self.running_sums::<T>(&data, dims))?
        });
        Ok(vec![out.into()])
    }
}
