//! Indexing ops: reads and writes at computed positions (Gather, GatherElements, GatherND,
//! Scatter, ScatterElements, ScatterND, Slice, Compress, ReverseSequence, OneHot, Trilu) and ops
//! that order or find elements (NonZero, TopK, Unique).
//!
//! Positions are computed first, as flat element offsets checked against the data (an index out
//! of range is an error naming it, never a panic); the elements are then moved by the generic
//! mover in `layout.rs`, so every dtype works. Scatter reductions compute in the data type, one
//! operation per update, in the order of the updates (f16/bf16 in f32, rounded once); float max
//! and min are `canonical_max` / `canonical_min` (contract section `reduce-extrema`).
//!
//! Order used by TopK and Unique: numbers compare numerically, `-0.0 == +0.0`, and NaN is
//! greater than every number and equal to itself. TopK breaks ties by the lower index; Unique
//! treats equal values (so all NaNs, and both zeros) as one value.

use super::{input_dtype, output_of};
use crate::device_kernel::input_shape;
use crate::layout::{BlockGather, Movable, MoveKernel, StridedView, move_elements};
use crate::registry::Registry;
use crate::{
    BuildContext, DeviceKernel, Inputs, InputsExt, NodeArgs, Op, OpError, Result,
    SOURCE_TABLE_EXACT, ShapedKernel, SourceKernel, bail, normalize_axis, unsupported,
};
use half::{bf16, f16};
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{DType, Tensor, Value, ValueType, with_numeric_type};
use samebits_kernels::{canonical_max, canonical_min};
use std::cmp::Ordering;

pub fn register(r: &mut Registry) {
    r.register("", "Gather", |ctx| Ok(Box::new(Gather(axis_or(ctx, 0)?))));
    r.register_kernel_source("gather.cu", include_str!("../../kernels/gather.cu"));
    r.register("", "GatherElements", |ctx| {
        Ok(Box::new(GatherElements(axis_or(ctx, 0)?)))
    });
    r.register("", "GatherND", |ctx| {
        Ok(Box::new(GatherNd(
            NodeArgs::new(ctx.node).int_or("batch_dims", 0)?,
        )))
    });
    r.register("", "ScatterND", |ctx| {
        Ok(Box::new(ScatterNd(reduction(ctx)?)))
    });
    r.register("", "ScatterElements", |ctx| {
        Ok(Box::new(ScatterElements {
            axis: axis_or(ctx, 0)?,
            reduction: reduction(ctx)?,
        }))
    });
    r.register("", "Scatter", |ctx| {
        Ok(Box::new(ScatterElements {
            axis: axis_or(ctx, 0)?,
            reduction: Reduction::None,
        }))
    });
    r.register("", "Slice", slice);
    r.register("", "Trilu", |ctx| {
        Ok(Box::new(Trilu {
            upper: NodeArgs::new(ctx.node).int_or("upper", 1)? != 0,
        }))
    });
    r.register("", "OneHot", |ctx| Ok(Box::new(OneHot(axis_or(ctx, -1)?))));
    r.register("", "NonZero", |_| Ok(Box::new(NonZero)));
    r.register("", "Compress", |ctx| {
        Ok(Box::new(Compress(NodeArgs::new(ctx.node).int("axis")?)))
    });
    r.register("", "ReverseSequence", reverse_sequence);
    r.register("", "TopK", top_k);
    r.register("", "Unique", |ctx| {
        let args = NodeArgs::new(ctx.node);
        Ok(Box::new(Unique {
            axis: args.int("axis")?,
            sorted: args.int_or("sorted", 1)? != 0,
        }))
    });
}

fn axis_or(ctx: &BuildContext, default: i64) -> Result<i64> {
    NodeArgs::new(ctx.node).int_or("axis", default)
}

/// `axis` normalised against `rank`, with an error naming the attribute.
fn attribute_axis(axis: i64, rank: usize) -> Result<usize> {
    normalize_axis(axis, rank).map_err(|e| OpError::Invalid(format!("attribute \"axis\": {e}")))
}

/// Resolves index `i` (negative counts from the end) into an axis of size `n`.
fn resolve_index(i: i64, n: usize, what: &str) -> Result<usize> {
    let r = if i < 0 { i + n as i64 } else { i };
    if r < 0 || r >= n as i64 {
        bail!("{what}: index {i} is out of range for a dim of size {n}");
    }
    Ok(r as usize)
}

/// The dims of `shape` before `axis`, at it, and after it, as element counts.
fn split_at_axis(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = shape[..axis].iter().product();
    let inner = shape[axis + 1..].iter().product();
    (outer, shape[axis], inner)
}

fn same_dtype(inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
    Ok(output_of(input_dtype(inputs, 0)))
}

#[derive(Debug)]
struct Gather(i64);

impl Op for Gather {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let data = inputs.tensor(0)?;
        let g = self.geometry(data.shape(), inputs)?;
        let (n, inner) = (g.len, g.inner);
        let starts = (0..g.outer)
            .flat_map(|o| g.picked.iter().map(move |&k| (o * n + k) * inner))
            .collect();
        let kernel = BlockGather {
            block: inner,
            starts,
        };
        Ok(vec![move_elements(&[data], g.shape, &kernel)?.into()])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Shaped)
    }

    /// Data on the device (float32), the indices on the host: the picked indices become the
    /// kernel's table (`kernels/gather.cu`).
    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], inputs: &Inputs) -> Result<ShapedKernel> {
        let g = self.geometry(input_shape(shapes, 0)?, inputs)?;
        if g.len >= SOURCE_TABLE_EXACT {
            bail!("an axis of {SOURCE_TABLE_EXACT} or more elements is gathered on the CPU");
        }
        let ints = [g.outer, g.len, g.inner, g.picked.len()].map(|v| v as i64);
        Ok(ShapedKernel::Source(SourceKernel::per_element(
            "sb_gather",
            vec![0],
            vec![g.picked.into_iter().map(|k| k as f32).collect()],
            (ints.to_vec(), Vec::new()),
            g.shape,
        )))
    }
}

/// What Gather computes for data of one shape: the data as `[outer, len, inner]` around the
/// axis, the index picked along it for each index element (resolved, in range), and the
/// output's shape.
struct GatherGeometry {
    outer: usize,
    len: usize,
    inner: usize,
    picked: Vec<usize>,
    shape: Vec<usize>,
}

impl Gather {
    /// The geometry for data of `data_shape`, the indices read from input 1 on the host.
    fn geometry(&self, data_shape: &[usize], inputs: &Inputs) -> Result<GatherGeometry> {
        let indices = inputs.tensor(1)?;
        let axis = attribute_axis(self.0, data_shape.len())?;
        let (outer, len, inner) = split_at_axis(data_shape, axis);
        let picked = inputs
            .ints(1, "indices")?
            .into_iter()
            .map(|i| resolve_index(i, len, "indices"))
            .collect::<Result<Vec<_>>>()?;
        let mut shape = data_shape[..axis].to_vec();
        shape.extend_from_slice(indices.shape());
        shape.extend_from_slice(&data_shape[axis + 1..]);
        Ok(GatherGeometry {
            outer,
            len,
            inner,
            picked,
            shape,
        })
    }
}

/// For each element of `index_shape` (row-major), the flat offset in `data_shape` of the same
/// multi-index with the `axis` coordinate replaced by the resolved index. Used by GatherElements
/// and ScatterElements.
fn element_targets(
    data_shape: &[usize],
    index_shape: &[usize],
    indices: &[i64],
    axis: usize,
) -> Result<Vec<usize>> {
    if index_shape.len() != data_shape.len() {
        bail!("indices of shape {index_shape:?} must have the rank of data {data_shape:?}");
    }
    if let Some(d) = (0..data_shape.len()).find(|&d| d != axis && index_shape[d] > data_shape[d]) {
        bail!("indices of shape {index_shape:?} exceed data {data_shape:?} along axis {d}");
    }
    let strides = crate::broadcast::strides(data_shape);
    let mut idx = vec![0usize; index_shape.len()];
    let mut out = Vec::with_capacity(indices.len());
    for &i in indices {
        let k = resolve_index(i, data_shape[axis], "indices")?;
        let offset: usize = (0..idx.len())
            .map(|d| (if d == axis { k } else { idx[d] }) * strides[d])
            .sum();
        out.push(offset);
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < index_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(out)
}

#[derive(Debug)]
struct GatherElements(i64);

impl Op for GatherElements {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let data = inputs.tensor(0)?;
        let indices = inputs.tensor(1)?;
        let axis = attribute_axis(self.0, data.rank())?;
        let starts = element_targets(
            data.shape(),
            indices.shape(),
            &inputs.ints(1, "indices")?,
            axis,
        )?;
        let kernel = BlockGather { block: 1, starts };
        Ok(vec![
            move_elements(&[data], indices.shape().to_vec(), &kernel)?.into(),
        ])
    }
}

/// The blocks addressed by ND indices (GatherND, ScatterND): the block size, the flat start of
/// each addressed block in the data, and the shape of the index tuples (indices without their
/// last dim).
fn nd_blocks(
    data_shape: &[usize],
    index_shape: &[usize],
    indices: &[i64],
    batch_dims: usize,
) -> Result<(usize, Vec<usize>, Vec<usize>)> {
    let q = index_shape.len();
    let Some(&k) = index_shape.last() else {
        bail!("indices must have rank >= 1");
    };
    let r = data_shape.len();
    if batch_dims >= q || batch_dims >= r || k < 1 || k > r - batch_dims {
        bail!(
            "indices of shape {index_shape:?} with batch_dims {batch_dims} cannot address data of shape {data_shape:?}"
        );
    }
    if index_shape[..batch_dims] != data_shape[..batch_dims] {
        bail!(
            "batch dims of indices {index_shape:?} and data {data_shape:?} differ (batch_dims {batch_dims})"
        );
    }
    let strides = crate::broadcast::strides(data_shape);
    let batch_stride = strides
        .get(batch_dims.wrapping_sub(1))
        .filter(|_| batch_dims > 0)
        .copied()
        .unwrap_or(0);
    let block: usize = data_shape[batch_dims + k..].iter().product();
    let tuples_per_batch: usize = index_shape[batch_dims..q - 1].iter().product();
    let starts = indices
        .chunks_exact(k)
        .enumerate()
        .map(|(t, tuple)| {
            let batch = t.checked_div(tuples_per_batch).unwrap_or(0);
            tuple
                .iter()
                .enumerate()
                .try_fold(batch * batch_stride, |acc, (j, &i)| {
                    let d = batch_dims + j;
                    Ok(acc + resolve_index(i, data_shape[d], "indices")? * strides[d])
                })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((block, starts, index_shape[..q - 1].to_vec()))
}

#[derive(Debug)]
struct GatherNd(i64);

impl Op for GatherNd {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let data = inputs.tensor(0)?;
        let indices = inputs.tensor(1)?;
        let Ok(batch_dims) = usize::try_from(self.0) else {
            bail!("attribute \"batch_dims\" = {} must not be negative", self.0)
        };
        let (block, starts, mut shape) = nd_blocks(
            data.shape(),
            indices.shape(),
            &inputs.ints(1, "indices")?,
            batch_dims,
        )?;
        let k = indices.shape()[indices.rank() - 1];
        shape.extend_from_slice(&data.shape()[batch_dims + k..]);
        let kernel = BlockGather { block, starts };
        Ok(vec![move_elements(&[data], shape, &kernel)?.into()])
    }
}

#[derive(Copy, Clone, Debug, PartialEq)]
enum Reduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

fn reduction(ctx: &BuildContext) -> Result<Reduction> {
    Ok(
        match NodeArgs::new(ctx.node)
            .string_or("reduction", "none".into())?
            .as_str()
        {
            "none" => Reduction::None,
            "add" => Reduction::Add,
            "mul" => Reduction::Mul,
            "max" => Reduction::Max,
            "min" => Reduction::Min,
            other => bail!("attribute \"reduction\" = {other:?} is not none, add, mul, max or min"),
        },
    )
}

/// An element type scatter reductions combine.
trait Combine: Copy {
    fn combine(self, update: Self, r: Reduction) -> Self;
}

macro_rules! int_combine {
    ($($t:ty),*) => {$(
        impl Combine for $t {
            fn combine(self, u: Self, r: Reduction) -> Self {
                match r {
                    Reduction::None => u,
                    Reduction::Add => self.wrapping_add(u),
                    Reduction::Mul => self.wrapping_mul(u),
                    Reduction::Max => self.max(u),
                    Reduction::Min => self.min(u),
                }
            }
        }
    )*};
}
int_combine!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_combine {
    ($($t:ty),*) => {$(
        impl Combine for $t {
            fn combine(self, u: Self, r: Reduction) -> Self {
                match r {
                    Reduction::None => u,
                    Reduction::Add => self + u,
                    Reduction::Mul => self * u,
                    Reduction::Max => canonical_max(self, u),
                    Reduction::Min => canonical_min(self, u),
                }
            }
        }
    )*};
}
float_combine!(f32, f64);

macro_rules! half_combine {
    ($($t:ty),*) => {$(
        impl Combine for $t {
            fn combine(self, u: Self, r: Reduction) -> Self {
                <$t>::from_f32(self.to_f32().combine(u.to_f32(), r))
            }
        }
    )*};
}
half_combine!(f16, bf16);

/// Writes `updates[src..src + block]` over `data[dst..dst + block]` for each `(dst, src)`, in
/// order (the last write to a position wins).
struct ScatterCopy<'a> {
    block: usize,
    targets: &'a [(usize, usize)],
}

impl MoveKernel for ScatterCopy<'_> {
    fn run<E: Movable>(&self, inputs: &[&[E]]) -> Result<Vec<E>> {
        let mut out = inputs[0].to_vec();
        for &(d, s) in self.targets {
            out[d..d + self.block].clone_from_slice(&inputs[1][s..s + self.block]);
        }
        Ok(out)
    }
}

/// Scatters `updates` into a copy of `data` at `targets` (checked in range by the caller),
/// combining by `reduction`.
fn scatter(
    data: &Tensor,
    updates: &Tensor,
    block: usize,
    targets: &[(usize, usize)],
    reduction: Reduction,
) -> Result<Tensor> {
    if reduction == Reduction::None {
        let kernel = ScatterCopy { block, targets };
        return move_elements(&[data, updates], data.shape().to_vec(), &kernel);
    }
    if data.dtype() != updates.dtype() {
        bail!(
            "data ({}) and updates ({}) have different dtypes",
            data.dtype(),
            updates.dtype()
        );
    }
    with_numeric_type!(data.dtype(), T => {
        let mut out = data.as_slice::<T>()?.to_vec();
        let upd = updates.as_slice::<T>()?;
        for &(d, s) in targets {
            for j in 0..block {
                out[d + j] = out[d + j].combine(upd[s + j], reduction);
            }
        }
        Ok(Tensor::from_vec(data.shape().to_vec(), out)?)
    }, else unsupported!("scatter reduction {reduction:?} on {}", data.dtype()))
}

#[derive(Debug)]
struct ScatterNd(Reduction);

impl Op for ScatterNd {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (data, indices, updates) = (inputs.tensor(0)?, inputs.tensor(1)?, inputs.tensor(2)?);
        let (block, starts, mut expected) = nd_blocks(
            data.shape(),
            indices.shape(),
            &inputs.ints(1, "indices")?,
            0,
        )?;
        let k = indices.shape()[indices.rank() - 1];
        expected.extend_from_slice(&data.shape()[k..]);
        if updates.shape() != expected {
            bail!(
                "updates have shape {:?}, indices {:?} into data {:?} need {expected:?}",
                updates.shape(),
                indices.shape(),
                data.shape()
            );
        }
        let targets: Vec<(usize, usize)> = starts
            .into_iter()
            .enumerate()
            .map(|(t, d)| (d, t * block))
            .collect();
        Ok(vec![
            scatter(data, updates, block, &targets, self.0)?.into(),
        ])
    }
}

#[derive(Debug)]
struct ScatterElements {
    axis: i64,
    reduction: Reduction,
}

impl Op for ScatterElements {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (data, indices, updates) = (inputs.tensor(0)?, inputs.tensor(1)?, inputs.tensor(2)?);
        if indices.shape() != updates.shape() {
            bail!(
                "indices {:?} and updates {:?} must have the same shape",
                indices.shape(),
                updates.shape()
            );
        }
        let axis = attribute_axis(self.axis, data.rank())?;
        let dst = element_targets(
            data.shape(),
            indices.shape(),
            &inputs.ints(1, "indices")?,
            axis,
        )?;
        let targets: Vec<(usize, usize)> =
            dst.into_iter().enumerate().map(|(s, d)| (d, s)).collect();
        Ok(vec![
            scatter(data, updates, 1, &targets, self.reduction)?.into(),
        ])
    }
}

/// Slice: starts/ends/axes/steps from attributes before opset 10, from inputs after.
#[derive(Debug)]
struct Slice {
    attributes: Option<SliceAttributes>,
}

/// The `starts`, `ends` and optional `axes` attributes of Slice before opset 10.
type SliceAttributes = (Vec<i64>, Vec<i64>, Option<Vec<i64>>);

fn slice(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    let attributes = if ctx.opset < 10 {
        let required = |name: &str| {
            args.ints(name)?
                .ok_or_else(|| OpError::Invalid(format!("missing attribute \"{name}\"")))
        };
        Some((required("starts")?, required("ends")?, args.ints("axes")?))
    } else {
        None
    };
    Ok(Box::new(Slice { attributes }))
}

/// The first index and length of a slice of an axis of size `n` (ONNX clamping rules).
fn slice_range(start: i64, end: i64, step: i64, n: usize) -> (i64, usize) {
    if n == 0 {
        return (0, 0);
    }
    let n = n as i64;
    let wrap = |v: i64| if v < 0 { v.saturating_add(n) } else { v };
    let (start, end) = if step > 0 {
        (wrap(start).clamp(0, n), wrap(end).clamp(0, n))
    } else {
        (wrap(start).clamp(0, n - 1), wrap(end).clamp(-1, n - 1))
    };
    let span = if step > 0 { end - start } else { start - end };
    let len = if span <= 0 {
        0
    } else {
        (span as u64).div_ceil(step.unsigned_abs())
    };
    (start, len as usize)
}

impl Op for Slice {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let view = self.view(x.shape(), inputs)?;
        Ok(vec![move_elements(&[x], view.shape.clone(), &view)?.into()])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Shaped)
    }

    /// Starts, ends, axes and steps from the attributes or inputs 1 to 4 on the host.
    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], inputs: &Inputs) -> Result<ShapedKernel> {
        let view = self.view(input_shape(shapes, 0)?, inputs)?;
        Ok(ShapedKernel::Copy {
            outputs: vec![view.shape.clone()],
            parts: vec![view.copy_part(0, 0)],
        })
    }
}

impl Slice {
    /// The sliced view of a dense tensor of `shape`.
    fn view(&self, shape: &[usize], inputs: &Inputs) -> Result<StridedView> {
        let (starts, ends, axes, steps) = match &self.attributes {
            Some((s, e, a)) => (s.clone(), e.clone(), a.clone(), None),
            None => (
                inputs.ints(1, "starts")?,
                inputs.ints(2, "ends")?,
                inputs.opt_ints(3, "axes")?,
                inputs.opt_ints(4, "steps")?,
            ),
        };
        let rank = shape.len();
        let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
        let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
        if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
            bail!(
                "starts {starts:?}, ends {ends:?}, axes {axes:?} and steps {steps:?} must have the same length"
            );
        }
        let mut view = StridedView::dense(shape);
        let mut seen = vec![false; rank];
        for k in 0..starts.len() {
            let a = normalize_axis(axes[k], rank)
                .map_err(|e| OpError::Invalid(format!("axes: {e}")))?;
            if std::mem::replace(&mut seen[a], true) {
                bail!("axes {axes:?} name axis {a} twice");
            }
            if steps[k] == 0 {
                bail!("steps {steps:?}: a step is 0");
            }
            let (first, len) = slice_range(starts[k], ends[k], steps[k], shape[a]);
            if len > 0 {
                view.offset += first as usize * view.strides[a] as usize;
            }
            view.strides[a] *= steps[k] as isize;
            view.shape[a] = len;
        }
        Ok(view)
    }
}

/// Keeps the upper (`j - i >= k`) or lower (`j - i <= k`) triangle of the last two dims and
/// zeroes the rest.
#[derive(Debug)]
struct Trilu {
    upper: bool,
}

struct TriluKernel {
    rows: usize,
    cols: usize,
    k: i64,
    upper: bool,
}

impl MoveKernel for TriluKernel {
    fn run<E: Movable>(&self, inputs: &[&[E]]) -> Result<Vec<E>> {
        let mut out = inputs[0].to_vec();
        for (p, v) in out.iter_mut().enumerate() {
            let (i, j) = ((p / self.cols) % self.rows, p % self.cols);
            let diagonal = j as i64 - i as i64;
            let keep = if self.upper {
                diagonal >= self.k
            } else {
                diagonal <= self.k
            };
            if !keep {
                *v = E::default();
            }
        }
        Ok(out)
    }
}

impl Op for Trilu {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        if x.rank() < 2 {
            bail!("input must have rank >= 2, has shape {:?}", x.shape());
        }
        let k = match inputs.opt_ints(1, "k")?.as_deref() {
            None => 0,
            Some([k]) => *k,
            Some(other) => bail!("k must hold one value, holds {other:?}"),
        };
        if x.dtype() == DType::String {
            unsupported!("Trilu on strings");
        }
        let kernel = TriluKernel {
            rows: x.shape()[x.rank() - 2],
            cols: x.shape()[x.rank() - 1],
            k,
            upper: self.upper,
        };
        Ok(vec![
            move_elements(&[x], x.shape().to_vec(), &kernel)?.into(),
        ])
    }
}

#[derive(Debug)]
struct OneHot(i64);

impl Op for OneHot {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(output_of(input_dtype(inputs, 2)))
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (indices, depth, values) = (inputs.tensor(0)?, inputs.tensor(1)?, inputs.tensor(2)?);
        let depth = match depth.to_f64_vec()?.as_slice() {
            [d] if *d >= 1.0 && d.is_finite() => *d as usize,
            other => bail!("depth must be one positive number, is {other:?}"),
        };
        if values.numel() != 2 {
            bail!("values must hold [off, on], has shape {:?}", values.shape());
        }
        let r = indices.rank() as i64;
        let axis = if self.0 < 0 { self.0 + r + 1 } else { self.0 };
        if !(0..=r).contains(&axis) {
            bail!(
                "attribute \"axis\" = {} is out of range for output rank {}",
                self.0,
                r + 1
            );
        }
        let axis = axis as usize;
        let mut shape = indices.shape().to_vec();
        shape.insert(axis, depth);
        // The hot-position table holds one usize per output element.
        check_tensor_size("OneHot output", &shape, DType::I64)?;
        let outer: usize = indices.shape()[..axis].iter().product();
        let inner: usize = indices.shape()[axis..].iter().product();
        // Indices may be floats; they are truncated toward zero, as Cast would.
        let hot: Vec<Option<usize>> = indices
            .to_f64_vec()?
            .into_iter()
            .map(|v| {
                let i = v.trunc() as i64;
                let i = if i < 0 { i + depth as i64 } else { i };
                (0..depth as i64).contains(&i).then_some(i as usize)
            })
            .collect();
        let mut starts = Vec::with_capacity(outer * depth * inner);
        for o in 0..outer {
            for d in 0..depth {
                starts.extend((0..inner).map(|i| usize::from(hot[o * inner + i] == Some(d))));
            }
        }
        let kernel = BlockGather { block: 1, starts };
        Ok(vec![move_elements(&[values], shape, &kernel)?.into()])
    }
}

/// Whether each element of `t` is non-zero (non-empty for strings).
fn nonzero_mask(t: &Tensor) -> Result<Vec<bool>> {
    Ok(match t.dtype() {
        DType::Bool => t.as_bools()?.iter().map(|&b| b != 0).collect(),
        DType::String => t.as_strings()?.iter().map(|s| !s.is_empty()).collect(),
        dt => with_numeric_type!(dt, T => {
            t.as_slice::<T>()?.iter().map(|v| *v != T::default()).collect()
        }, else unsupported!("non-zero test of {dt} elements")),
    })
}

#[derive(Debug)]
struct NonZero;

impl Op for NonZero {
    fn infer(&self, _inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(output_of(Some(DType::I64)))
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let mask = nonzero_mask(x)?;
        let positions: Vec<usize> = (0..mask.len()).filter(|&p| mask[p]).collect();
        let strides = crate::broadcast::strides(x.shape());
        let mut out = Vec::with_capacity(positions.len() * x.rank());
        for (d, &s) in strides.iter().enumerate() {
            out.extend(positions.iter().map(|&p| ((p / s) % x.shape()[d]) as i64));
        }
        Ok(vec![
            Tensor::from_vec(vec![x.rank(), positions.len()], out)?.into(),
        ])
    }
}

#[derive(Debug)]
struct Compress(Option<i64>);

impl Op for Compress {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let condition = inputs.tensor(1)?;
        let keep = condition
            .as_bools()
            .map_err(|e| OpError::Invalid(format!("condition: {e}")))?;
        let (x, axis) = match self.0 {
            Some(a) => (x.clone(), attribute_axis(a, x.rank())?),
            None => (x.reshaped(vec![x.numel()])?, 0),
        };
        let (outer, n, inner) = split_at_axis(x.shape(), axis);
        if keep.len() > n {
            bail!("condition has {} entries, the axis only {n}", keep.len());
        }
        let picked: Vec<usize> = (0..keep.len()).filter(|&i| keep[i] != 0).collect();
        let mut shape = x.shape().to_vec();
        shape[axis] = picked.len();
        let starts = (0..outer)
            .flat_map(|o| picked.iter().map(move |&k| (o * n + k) * inner))
            .collect();
        let kernel = BlockGather {
            block: inner,
            starts,
        };
        Ok(vec![move_elements(&[&x], shape, &kernel)?.into()])
    }
}

#[derive(Debug)]
struct ReverseSequence {
    batch_axis: usize,
    time_axis: usize,
}

fn reverse_sequence(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    let (b, t) = (args.int_or("batch_axis", 1)?, args.int_or("time_axis", 0)?);
    if !matches!((b, t), (0, 1) | (1, 0)) {
        bail!(
            "attributes \"batch_axis\" = {b} and \"time_axis\" = {t} must be 0 and 1 in some order"
        );
    }
    Ok(Box::new(ReverseSequence {
        batch_axis: b as usize,
        time_axis: t as usize,
    }))
}

impl Op for ReverseSequence {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        if x.rank() < 2 {
            bail!("input must have rank >= 2, has shape {:?}", x.shape());
        }
        let lens = inputs.ints(1, "sequence_lens")?;
        let (batch, time) = (x.shape()[self.batch_axis], x.shape()[self.time_axis]);
        if lens.len() != batch {
            bail!(
                "sequence_lens has {} entries for a batch of {batch}",
                lens.len()
            );
        }
        if let Some(l) = lens.iter().find(|&&l| l < 0 || l as usize > time) {
            bail!("sequence_lens holds {l}, outside 0..={time}");
        }
        let block: usize = x.shape()[2..].iter().product();
        let d1 = x.shape()[1];
        let mut starts = Vec::with_capacity(batch * time);
        for i0 in 0..x.shape()[0] {
            for i1 in 0..d1 {
                let mut ij = [i0, i1];
                let (b, t) = (ij[self.batch_axis], ij[self.time_axis]);
                let len = lens[b] as usize;
                if t < len {
                    ij[self.time_axis] = len - 1 - t;
                }
                starts.push((ij[0] * d1 + ij[1]) * block);
            }
        }
        let kernel = BlockGather { block, starts };
        Ok(vec![
            move_elements(&[x], x.shape().to_vec(), &kernel)?.into(),
        ])
    }
}

/// The order of this file's documentation: NaN above every number and equal to itself.
fn total_order<T: PartialOrd>(a: &T, b: &T) -> Ordering {
    a.partial_cmp(b).unwrap_or_else(|| {
        let is_nan = |v: &T| v.partial_cmp(v).is_none();
        is_nan(a).cmp(&is_nan(b))
    })
}

/// A comparison of two flat elements of `t` by [`total_order`].
type ElementOrder<'a> = Box<dyn Fn(usize, usize) -> Ordering + 'a>;

fn element_order(t: &Tensor) -> Result<ElementOrder<'_>> {
    Ok(match t.dtype() {
        DType::Bool => {
            let v = t.as_bools()?;
            Box::new(move |a, b| v[a].cmp(&v[b]))
        }
        DType::String => {
            let v = t.as_strings()?;
            Box::new(move |a, b| v[a].cmp(&v[b]))
        }
        dt => with_numeric_type!(dt, T => {
            let v = t.as_slice::<T>()?;
            Box::new(move |a, b| total_order(&v[a], &v[b]))
        }, else unsupported!("ordering of {dt} elements")),
    })
}

#[derive(Debug)]
struct TopK {
    axis: i64,
    largest: bool,
    /// The `k` attribute before opset 10; input 1 after.
    attribute_k: Option<i64>,
}

fn top_k(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    Ok(Box::new(TopK {
        axis: args.int_or("axis", -1)?,
        largest: args.int_or("largest", 1)? != 0,
        attribute_k: if ctx.opset < 10 {
            Some(args.req_int("k")?)
        } else {
            None
        },
    }))
}

impl Op for TopK {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let mut out = same_dtype(inputs)?;
        out.push(Some(ValueType::tensor(DType::I64, None)));
        Ok(out)
    }

    /// Always returns the selection sorted (`sorted = 0` leaves the order to us).
    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let k = match self.attribute_k {
            Some(k) => k,
            None => match inputs.ints(1, "K")?.as_slice() {
                [k] => *k,
                other => bail!("K must hold one value, holds {other:?}"),
            },
        };
        let axis = attribute_axis(self.axis, x.rank())?;
        let (outer, n, inner) = split_at_axis(x.shape(), axis);
        let k = usize::try_from(k)
            .ok()
            .filter(|&k| k <= n)
            .ok_or_else(|| OpError::Invalid(format!("K = {k} is outside 0..={n} (axis {axis})")))?;
        let order = element_order(x)?;
        let mut picked = vec![0usize; outer * k * inner];
        let mut candidates: Vec<usize> = Vec::with_capacity(n);
        for o in 0..outer {
            for i in 0..inner {
                let at = |j: usize| (o * n + j) * inner + i;
                let rank = |a: &usize, b: &usize| {
                    let by_value = order(at(*a), at(*b));
                    let by_value = if self.largest {
                        by_value.reverse()
                    } else {
                        by_value
                    };
                    by_value.then(a.cmp(b))
                };
                candidates.clear();
                candidates.extend(0..n);
                if k > 0 && k < n {
                    candidates.select_nth_unstable_by(k - 1, rank);
                }
                candidates.truncate(k);
                candidates.sort_unstable_by(rank);
                for (r, &j) in candidates.iter().enumerate() {
                    picked[(o * k + r) * inner + i] = j;
                }
            }
        }
        let mut shape = x.shape().to_vec();
        shape[axis] = k;
        let starts = picked
            .iter()
            .enumerate()
            .map(|(p, &j)| {
                let (o, i) = (p / (k * inner), p % inner);
                (o * n + j) * inner + i
            })
            .collect();
        let values = move_elements(&[x], shape.clone(), &BlockGather { block: 1, starts })?;
        let indices = picked.into_iter().map(|j| j as i64).collect();
        Ok(vec![
            values.into(),
            Tensor::from_vec(shape, indices)?.into(),
        ])
    }
}

#[derive(Debug)]
struct Unique {
    axis: Option<i64>,
    sorted: bool,
}

impl Op for Unique {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let mut out = same_dtype(inputs)?;
        out.extend(std::iter::repeat_n(
            Some(ValueType::tensor(DType::I64, None)),
            3,
        ));
        Ok(out)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let (x, axis) = match self.axis {
            Some(a) => (x.clone(), attribute_axis(a, x.rank())?),
            None => (x.reshaped(vec![x.numel()])?, 0),
        };
        let (outer, n, inner) = split_at_axis(x.shape(), axis);
        let order = element_order(&x)?;
        // Slices along the axis compare lexicographically, element by element.
        let compare = |a: usize, b: usize| {
            (0..outer)
                .flat_map(|o| (0..inner).map(move |i| (o * n) * inner + i))
                .map(|base| order(base + a * inner, base + b * inner))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        };
        let mut by_value: Vec<usize> = (0..n).collect();
        by_value.sort_by(|&a, &b| compare(a, b));
        // Groups of equal slices, each listed from its first occurrence (the sort is stable).
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for &s in &by_value {
            match groups.last_mut() {
                Some(g) if compare(g[0], s).is_eq() => g.push(s),
                _ => groups.push(vec![s]),
            }
        }
        if !self.sorted {
            groups.sort_by_key(|g| g[0]);
        }
        let mut inverse = vec![0i64; n];
        for (u, g) in groups.iter().enumerate() {
            for &s in g {
                inverse[s] = u as i64;
            }
        }
        let first: Vec<usize> = groups.iter().map(|g| g[0]).collect();
        let mut shape = x.shape().to_vec();
        shape[axis] = first.len();
        let starts = (0..outer)
            .flat_map(|o| first.iter().map(move |&k| (o * n + k) * inner))
            .collect();
        let kernel = BlockGather {
            block: inner,
            starts,
        };
        let y = move_elements(&[&x], shape, &kernel)?;
        let u = first.len();
        let as_i64 = |v: Vec<i64>| Tensor::from_vec(vec![v.len()], v);
        Ok(vec![
            y.into(),
            as_i64(first.iter().map(|&f| f as i64).collect())?.into(),
            as_i64(inverse)?.into(),
            Tensor::from_vec(vec![u], groups.iter().map(|g| g.len() as i64).collect())?.into(),
        ])
    }
}
