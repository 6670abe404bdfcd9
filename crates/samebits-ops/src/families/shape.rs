//! Shape ops: ops that rearrange elements without computing with them (Reshape, Squeeze,
//! Unsqueeze, Flatten, Expand, Transpose, Concat, Split, Tile, Pad, CenterCropPad,
//! DepthToSpace, SpaceToDepth) and ops that report shapes (Shape, Size). They work on every
//! dtype: reshapes share the input's bytes, and every other op is a [`StridedView`] or a
//! [`MoveKernel`] run by the generic element mover in `layout.rs`. Moves are exact, so these
//! ops are reproducible by construction.

use super::{input_dtype, output_of};
use crate::broadcast::{broadcast_shapes, broadcast_strides};
use crate::device_kernel::input_shape;
use crate::layout::{Interleave, Movable, MoveKernel, StridedView, move_elements};
use crate::registry::Registry;
use crate::{
    BuildContext, CopyPart, DeviceKernel, Inputs, InputsExt, NodeArgs, Op, OpError, Result,
    SOURCE_TABLE_EXACT, ShapedKernel, SourceKernel, bail, normalize_axis,
};
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{DType, Tensor, Value, ValueType, checked_numel};

pub fn register(r: &mut Registry) {
    r.register("", "Reshape", reshape);
    r.register("", "Shape", shape);
    r.register("", "Size", |_| Ok(Box::new(Size)));
    r.register("", "Squeeze", |ctx| {
        Ok(Box::new(Squeeze(axes_attribute(ctx)?)))
    });
    r.register("", "Unsqueeze", |ctx| {
        Ok(Box::new(Unsqueeze(axes_attribute(ctx)?)))
    });
    r.register("", "Flatten", |ctx| {
        Ok(Box::new(Flatten(
            NodeArgs::new(ctx.node).int_or("axis", 1)?,
        )))
    });
    r.register("", "Expand", |_| Ok(Box::new(Expand)));
    r.register("", "Transpose", |ctx| {
        Ok(Box::new(Transpose(NodeArgs::new(ctx.node).ints("perm")?)))
    });
    r.register("", "Concat", |ctx| {
        Ok(Box::new(Concat(NodeArgs::new(ctx.node).req_int("axis")?)))
    });
    r.register("", "Split", split);
    r.register("", "Tile", |_| Ok(Box::new(Tile)));
    r.register("", "Pad", pad);
    r.register_kernel_source("pad.cu", include_str!("../../kernels/pad.cu"));
    r.register("", "CenterCropPad", |ctx| {
        let axes = NodeArgs::new(ctx.node).ints("axes")?;
        Ok(Box::new(CenterCropPad { axes }))
    });
    r.register("", "DepthToSpace", depth_to_space);
    r.register("", "SpaceToDepth", |ctx| {
        Ok(Box::new(SpaceToDepth(block_size(ctx)?)))
    });
}

/// The `axes` attribute of Squeeze/Unsqueeze before opset 13 (`None`: read input 1 instead).
fn axes_attribute(ctx: &BuildContext) -> Result<Option<Vec<i64>>> {
    if ctx.opset >= 13 {
        return Ok(None);
    }
    Ok(Some(NodeArgs::new(ctx.node).ints_or("axes", Vec::new())?))
}

/// Normalises a list of possibly negative axes against `rank`; errors on duplicates.
fn normalize_axes(axes: &[i64], rank: usize, what: &str) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = normalize_axis(a, rank).map_err(|e| OpError::Invalid(format!("{what}: {e}")))?;
        if out.contains(&n) {
            bail!("{what} {axes:?} name axis {a} twice");
        }
        out.push(n);
    }
    Ok(out)
}

/// Converts shape-like i64 values (from an input named `what`) to dims, refusing negatives.
fn dims_from(values: &[i64], what: &str) -> Result<Vec<usize>> {
    values
        .iter()
        .map(|&d| {
            usize::try_from(d)
                .map_err(|_| OpError::Invalid(format!("{what} {values:?} holds negative {d}")))
        })
        .collect()
}

/// The output type of ops whose output has the dtype of input 0.
fn same_dtype(inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
    Ok(output_of(input_dtype(inputs, 0)))
}

/// Reshape: 0 copies the input dim (unless `allowzero`), -1 is inferred.
#[derive(Debug)]
struct Reshape {
    /// The `shape` attribute before opset 5; input 1 after.
    attribute_shape: Option<Vec<i64>>,
    allow_zero: bool,
}

fn reshape(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    Ok(Box::new(Reshape {
        attribute_shape: if ctx.opset < 5 {
            Some(args.ints_or("shape", Vec::new())?)
        } else {
            None
        },
        allow_zero: args.int_or("allowzero", 0)? != 0,
    }))
}

/// The output shape of Reshape of `input` to `target` (ONNX's 0 and -1 rules).
pub fn reshape_target(input: &[usize], target: &[i64], allow_zero: bool) -> Result<Vec<usize>> {
    let numel = checked_numel(input)?;
    let mut out = Vec::with_capacity(target.len());
    let mut inferred = None;
    for (i, &d) in target.iter().enumerate() {
        out.push(match d {
            -1 if inferred.is_some() => bail!("shape {target:?} has more than one -1"),
            -1 => {
                inferred = Some(i);
                1
            }
            0 if !allow_zero => match input.get(i) {
                Some(&n) => n,
                None => {
                    bail!("shape {target:?}: 0 at index {i} copies a dim the input {input:?} lacks")
                }
            },
            d if d < 0 => bail!("shape {target:?} holds {d}"),
            d => d as usize,
        });
    }
    if allow_zero && inferred.is_some() && target.contains(&0) {
        bail!("shape {target:?} has both -1 and 0 with allowzero=1");
    }
    let known = checked_numel(&out)?;
    if let Some(i) = inferred {
        if known == 0 || !numel.is_multiple_of(known) {
            bail!("cannot infer the -1 of shape {target:?} for an input of shape {input:?}");
        }
        out[i] = numel / known;
    } else if known != numel {
        bail!("cannot reshape {input:?} ({numel} elements) to {target:?} ({known} elements)");
    }
    Ok(out)
}

impl Op for Reshape {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        Ok(vec![
            x.reshaped(self.view_shape(x.shape(), inputs)?)?.into(),
        ])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::View)
    }

    fn view_shape(&self, shape: &[usize], inputs: &Inputs) -> Result<Vec<usize>> {
        let target = match &self.attribute_shape {
            Some(s) => s.clone(),
            None => inputs.ints(1, "shape")?,
        };
        reshape_target(shape, &target, self.allow_zero)
    }
}

/// Shape, with the `start`/`end` range of opset 15 (clamped to `[0, rank]`).
#[derive(Debug)]
struct ShapeOp {
    start: i64,
    end: Option<i64>,
}

fn shape(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    Ok(Box::new(ShapeOp {
        start: args.int_or("start", 0)?,
        end: args.int("end")?,
    }))
}

impl Op for ShapeOp {
    fn infer(&self, _inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(output_of(Some(DType::I64)))
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        self.of_shape(inputs.tensor(0)?.shape())
    }

    fn outputs_from_shapes(&self, shapes: &[&[usize]]) -> Option<Result<Vec<Value>>> {
        Some(self.of_shape(shapes.first()?))
    }
}

impl ShapeOp {
    /// The output for an input of shape `dims`: the dims from `start` to `end`.
    fn of_shape(&self, dims: &[usize]) -> Result<Vec<Value>> {
        let rank = dims.len() as i64;
        let clamp = |i: i64| (if i < 0 { i + rank } else { i }).clamp(0, rank) as usize;
        let (start, end) = (clamp(self.start), clamp(self.end.unwrap_or(rank)));
        let picked: Vec<i64> = dims[start..end.max(start)]
            .iter()
            .map(|&d| d as i64)
            .collect();
        Ok(vec![Tensor::from_vec(vec![picked.len()], picked)?.into()])
    }
}

#[derive(Debug)]
struct Size;

impl Op for Size {
    fn infer(&self, _inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(output_of(Some(DType::I64)))
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        size_of_shape(inputs.tensor(0)?.shape())
    }

    fn outputs_from_shapes(&self, shapes: &[&[usize]]) -> Option<Result<Vec<Value>>> {
        Some(size_of_shape(shapes.first()?))
    }
}

/// Size's output for an input of shape `dims`: its element count.
fn size_of_shape(dims: &[usize]) -> Result<Vec<Value>> {
    Ok(vec![Tensor::scalar(checked_numel(dims)? as i64).into()])
}

/// Squeeze: axes from the attribute (before opset 13) or input 1; none removes every unit dim.
#[derive(Debug)]
struct Squeeze(Option<Vec<i64>>);

impl Op for Squeeze {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        Ok(vec![
            x.reshaped(self.view_shape(x.shape(), inputs)?)?.into(),
        ])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::View)
    }

    fn view_shape(&self, dims: &[usize], inputs: &Inputs) -> Result<Vec<usize>> {
        let axes = match &self.0 {
            Some(a) => a.clone(),
            None => inputs.opt_ints(1, "axes")?.unwrap_or_default(),
        };
        Ok(if axes.is_empty() {
            dims.iter().copied().filter(|&d| d != 1).collect()
        } else {
            let axes = normalize_axes(&axes, dims.len(), "axes")?;
            if let Some(&a) = axes.iter().find(|&&a| dims[a] != 1) {
                bail!("axes: cannot squeeze axis {a} of shape {dims:?}: its size is not 1");
            }
            (0..dims.len())
                .filter(|i| !axes.contains(i))
                .map(|i| dims[i])
                .collect()
        })
    }
}

/// Unsqueeze: axes (of the output) from the attribute (before opset 13) or input 1.
#[derive(Debug)]
struct Unsqueeze(Option<Vec<i64>>);

impl Op for Unsqueeze {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        Ok(vec![
            x.reshaped(self.view_shape(x.shape(), inputs)?)?.into(),
        ])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::View)
    }

    fn view_shape(&self, dims: &[usize], inputs: &Inputs) -> Result<Vec<usize>> {
        let axes = match &self.0 {
            Some(a) => a.clone(),
            None => inputs.ints(1, "axes")?,
        };
        let rank = dims.len() + axes.len();
        let axes = normalize_axes(&axes, rank, "axes")?;
        let mut rest = dims.iter();
        Ok((0..rank)
            .map(|i| {
                if axes.contains(&i) {
                    1
                } else {
                    *rest.next().expect("rank counts the input dims")
                }
            })
            .collect())
    }
}

/// Flatten to 2-D around `axis` (in `[-rank, rank]`).
#[derive(Debug)]
struct Flatten(i64);

impl Op for Flatten {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        Ok(vec![
            x.reshaped(self.view_shape(x.shape(), inputs)?)?.into(),
        ])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::View)
    }

    fn view_shape(&self, dims: &[usize], _inputs: &Inputs) -> Result<Vec<usize>> {
        let rank = dims.len() as i64;
        let axis = if self.0 < 0 { self.0 + rank } else { self.0 };
        if !(0..=rank).contains(&axis) {
            bail!(
                "attribute \"axis\" = {} is out of range for rank {rank}",
                self.0
            );
        }
        let (outer, inner) = dims.split_at(axis as usize);
        Ok(vec![checked_numel(outer)?, checked_numel(inner)?])
    }
}

#[derive(Debug)]
struct Expand;

impl Op for Expand {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let view = expanded_view(x.shape(), inputs)?;
        Ok(vec![move_elements(&[x], view.shape.clone(), &view)?.into()])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Shaped)
    }

    /// The target shape from input 1 on the host.
    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], inputs: &Inputs) -> Result<ShapedKernel> {
        let view = expanded_view(input_shape(shapes, 0)?, inputs)?;
        Ok(ShapedKernel::Copy {
            outputs: vec![view.shape.clone()],
            parts: vec![view.copy_part(0, 0)],
        })
    }
}

/// Expand's output as a view of the dense input of `shape` (stride 0 along broadcast axes),
/// the target shape read from input 1.
fn expanded_view(shape: &[usize], inputs: &Inputs) -> Result<StridedView> {
    let target = dims_from(&inputs.ints(1, "shape")?, "shape")?;
    let out = broadcast_shapes(&[shape, &target])?;
    Ok(StridedView {
        offset: 0,
        strides: broadcast_strides(shape, &out)
            .into_iter()
            .map(|s| s as isize)
            .collect(),
        shape: out,
    })
}

/// Transpose by `perm` (default: reversed dims).
#[derive(Debug)]
struct Transpose(Option<Vec<i64>>);

/// Checks that `perm` is a permutation of `0..rank`.
fn permutation(perm: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut seen = vec![false; rank];
    let mut out = Vec::with_capacity(rank);
    for &p in perm {
        match usize::try_from(p).ok().filter(|&p| p < rank) {
            Some(p) if !seen[p] => {
                seen[p] = true;
                out.push(p);
            }
            _ => bail!("attribute \"perm\" = {perm:?} is not a permutation of 0..{rank}"),
        }
    }
    if out.len() != rank {
        bail!("attribute \"perm\" = {perm:?} is not a permutation of 0..{rank}");
    }
    Ok(out)
}

impl Op for Transpose {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let view = self.view(x.shape())?;
        Ok(vec![move_elements(&[x], view.shape.clone(), &view)?.into()])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Shaped)
    }

    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], _inputs: &Inputs) -> Result<ShapedKernel> {
        let view = self.view(input_shape(shapes, 0)?)?;
        Ok(ShapedKernel::Copy {
            outputs: vec![view.shape.clone()],
            parts: vec![view.copy_part(0, 0)],
        })
    }
}

impl Transpose {
    /// The transposed view of a dense tensor of `shape`.
    fn view(&self, shape: &[usize]) -> Result<StridedView> {
        let perm = match &self.0 {
            Some(p) => permutation(p, shape.len())?,
            None => (0..shape.len()).rev().collect(),
        };
        Ok(StridedView::dense(shape).permuted(&perm))
    }
}

#[derive(Debug)]
struct Concat(i64);

impl Op for Concat {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let tensors = (0..inputs.len())
            .map(|i| inputs.tensor(i))
            .collect::<Result<Vec<_>>>()?;
        let shapes: Vec<&[usize]> = tensors.iter().map(|t| t.shape()).collect();
        let (shape, axis) = self.output_shape(&shapes)?;
        let outer = checked_numel(&shape[..axis])?;
        let kernel = Interleave {
            outer,
            row_lens: tensors
                .iter()
                .map(|t| checked_numel(&t.shape()[axis..]))
                .collect::<samebits_ir::Result<_>>()?,
        };
        Ok(vec![move_elements(&tensors, shape, &kernel)?.into()])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Shaped)
    }

    /// Input `i` as rows of `[outer, row_i]` copied into columns `start_i ..` of the output's
    /// `[outer, Σ row_i]` rows.
    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], _inputs: &Inputs) -> Result<ShapedKernel> {
        let shapes = (0..shapes.len())
            .map(|i| input_shape(shapes, i))
            .collect::<Result<Vec<_>>>()?;
        let (shape, axis) = self.output_shape(&shapes)?;
        let outer: usize = shape[..axis].iter().product();
        let total: usize = shape[axis..].iter().product();
        let mut start = 0;
        let parts = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let row: usize = s[axis..].iter().product();
                let part = CopyPart {
                    input: i,
                    output: 0,
                    shape: vec![outer, row],
                    src_offset: 0,
                    src_strides: vec![row as isize, 1],
                    dst_offset: start,
                    dst_strides: vec![total as isize, 1],
                };
                start += row;
                part
            })
            .collect();
        Ok(ShapedKernel::Copy {
            outputs: vec![shape],
            parts,
        })
    }
}

impl Concat {
    /// The output shape and the (normalized) axis, every input checked against input 0.
    fn output_shape(&self, shapes: &[&[usize]]) -> Result<(Vec<usize>, usize)> {
        let Some(first) = shapes.first() else {
            bail!("Concat needs at least one input")
        };
        let axis = normalize_axis(self.0, first.len())
            .map_err(|e| OpError::Invalid(format!("attribute \"axis\": {e}")))?;
        let mut shape = first.to_vec();
        shape[axis] = 0;
        for (i, t) in shapes.iter().enumerate() {
            let same_rest =
                t.len() == shape.len() && (0..shape.len()).all(|d| d == axis || t[d] == shape[d]);
            if !same_rest {
                bail!(
                    "input {i} has shape {t:?}, which does not match input 0's {first:?} off axis {axis}"
                );
            }
            shape[axis] += t[axis];
        }
        Ok((shape, axis))
    }
}

/// Split: sizes from input 1 (opset 13+) or the `split` attribute; else `num_outputs` chunks of
/// `ceil(dim / n)` (opset 18+, the last one smaller) or equal parts, one per node output.
#[derive(Debug)]
struct Split {
    axis: i64,
    attribute_split: Option<Vec<i64>>,
    num_outputs: Option<i64>,
    outputs: usize,
}

fn split(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    let num_outputs = args.int("num_outputs")?;
    if let Some(n) = num_outputs
        && n as usize != ctx.node.outputs.len()
    {
        bail!(
            "attribute \"num_outputs\" = {n}, but the node has {} outputs",
            ctx.node.outputs.len()
        );
    }
    Ok(Box::new(Split {
        axis: args.int_or("axis", 0)?,
        attribute_split: args.ints("split")?,
        num_outputs,
        outputs: ctx.node.outputs.len(),
    }))
}

impl Op for Split {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![
            input_dtype(inputs, 0)
                .map(|d| ValueType::tensor(d, None));
            self.outputs
        ])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        self.views(x.shape(), inputs)?
            .into_iter()
            .map(|view| Ok(move_elements(&[x], view.shape.clone(), &view)?.into()))
            .collect()
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Shaped)
    }

    /// The split sizes from the attribute or input 1 on the host.
    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], inputs: &Inputs) -> Result<ShapedKernel> {
        let views = self.views(input_shape(shapes, 0)?, inputs)?;
        Ok(ShapedKernel::Copy {
            outputs: views.iter().map(|v| v.shape.clone()).collect(),
            parts: views
                .iter()
                .enumerate()
                .map(|(o, v)| v.copy_part(0, o))
                .collect(),
        })
    }
}

impl Split {
    /// One view of a dense tensor of `shape` per output.
    fn views(&self, shape: &[usize], inputs: &Inputs) -> Result<Vec<StridedView>> {
        let axis = normalize_axis(self.axis, shape.len())
            .map_err(|e| OpError::Invalid(format!("attribute \"axis\": {e}")))?;
        let dim = shape[axis];
        let sizes = match (inputs.opt_ints(1, "split")?, self.attribute_split.clone()) {
            (Some(s), _) | (None, Some(s)) => dims_from(&s, "split")?,
            (None, None) => {
                let parts = self.num_outputs.map_or(self.outputs, |n| n as usize).max(1);
                let chunk = if self.num_outputs.is_some() {
                    dim.div_ceil(parts)
                } else if dim.is_multiple_of(parts) {
                    dim / parts
                } else {
                    bail!("axis {axis} of size {dim} does not split into {parts} equal parts")
                };
                (0..parts)
                    .map(|i| chunk.min(dim.saturating_sub(i * chunk)))
                    .collect()
            }
        };
        if sizes.iter().sum::<usize>() != dim || sizes.len() != self.outputs {
            bail!(
                "split {sizes:?} must have one entry per output ({}) summing to axis {axis}'s size {dim}",
                self.outputs
            );
        }
        let base = StridedView::dense(shape);
        let mut start = 0;
        Ok(sizes
            .into_iter()
            .map(|len| {
                let mut view = base.clone();
                view.offset = start * base.strides[axis] as usize;
                view.shape[axis] = len;
                start += len;
                view
            })
            .collect())
    }
}

#[derive(Debug)]
struct Tile;

impl Op for Tile {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let repeats = dims_from(&inputs.ints(1, "repeats")?, "repeats")?;
        if repeats.len() != x.rank() {
            bail!(
                "repeats {repeats:?} must have one entry per dim of the input {:?}",
                x.shape()
            );
        }
        // The output is the view [r0, d0, r1, d1, ...] with stride 0 along each repeat.
        let dense = StridedView::dense(x.shape());
        let mut view = StridedView {
            offset: 0,
            shape: Vec::new(),
            strides: Vec::new(),
        };
        let mut out = Vec::new();
        for ((&r, &d), &s) in repeats.iter().zip(x.shape()).zip(&dense.strides) {
            view.shape.extend([r, d]);
            view.strides.extend([0, s]);
            out.push(
                r.checked_mul(d)
                    .ok_or_else(|| OpError::Invalid(format!("repeats {repeats:?} overflow")))?,
            );
        }
        Ok(vec![move_elements(&[x], out, &view)?.into()])
    }
}

#[derive(Copy, Clone, Debug, PartialEq)]
enum PadMode {
    Constant,
    Reflect,
    Edge,
    Wrap,
}

/// Pad: pads (and the constant value) from attributes before opset 11, from inputs after;
/// `axes` (opset 18) limits the pads to some axes.
#[derive(Debug)]
struct Pad {
    mode: PadMode,
    /// `pads` and `value` attributes before opset 11.
    attributes: Option<(Vec<i64>, f32)>,
}

fn pad(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    let mode = match args.string_or("mode", "constant".into())?.as_str() {
        "constant" => PadMode::Constant,
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        "wrap" => PadMode::Wrap,
        other => bail!("attribute \"mode\" = {other:?} is not constant, reflect, edge or wrap"),
    };
    let attributes = if ctx.opset < 11 {
        let name = if ctx.opset < 2 { "paddings" } else { "pads" };
        let pads = args
            .ints(name)?
            .ok_or_else(|| OpError::Invalid(format!("missing attribute \"{name}\"")))?;
        Some((pads, args.float_or("value", 0.0)?))
    } else {
        None
    };
    Ok(Box::new(Pad { mode, attributes }))
}

/// Every axis's source map ([`pad_axis_map`]) for padding a tensor of `shape` and `dtype` by
/// `per_axis` (before, after), after checking that the padded output's size fits
/// [`check_tensor_size`], so hostile pads are refused before any map is built.
fn padded_axis_maps(
    op: &str,
    shape: &[usize],
    dtype: DType,
    per_axis: &[(i64, i64)],
    mode: PadMode,
) -> Result<Vec<Vec<Option<usize>>>> {
    let out_shape = shape
        .iter()
        .zip(per_axis)
        .map(|(&n, &(b, e))| {
            (n as i64)
                .checked_add(b)
                .and_then(|v| v.checked_add(e))
                .and_then(|v| usize::try_from(v).ok())
                .ok_or_else(|| {
                    OpError::Invalid(format!(
                        "pads {b} and {e} do not leave a valid size for an axis of {n} elements"
                    ))
                })
        })
        .collect::<Result<Vec<_>>>()?;
    check_tensor_size(&format!("{op} output"), &out_shape, dtype)?;
    shape
        .iter()
        .zip(per_axis)
        .map(|(&n, &(b, e))| pad_axis_map(n, b, e, mode))
        .collect()
}

/// For one axis of input size `n` padded by `before`/`after`, the input index each output index
/// reads (`None`: the constant).
fn pad_axis_map(n: usize, before: i64, after: i64, mode: PadMode) -> Result<Vec<Option<usize>>> {
    let out = n as i64 + before + after;
    if out < 0 {
        bail!("pads {before} and {after} remove more than the {n} elements of an axis");
    }
    if n == 0 && out > 0 && mode != PadMode::Constant {
        bail!("{mode:?} padding of an empty axis");
    }
    let n = n as i64;
    Ok((0..out)
        .map(|o| {
            let i = o - before;
            let inside = (0..n).contains(&i);
            let src = match mode {
                _ if inside => i,
                PadMode::Constant => return None,
                PadMode::Edge => i.clamp(0, n - 1),
                PadMode::Wrap => i.rem_euclid(n),
                PadMode::Reflect if n == 1 => 0,
                PadMode::Reflect => {
                    let period = 2 * (n - 1);
                    let j = i.rem_euclid(period);
                    if j < n { j } else { period - j }
                }
            };
            Some(src as usize)
        })
        .collect())
}

/// Writes the padded output: each output element reads its source through the per-axis maps,
/// or the fill value (input 1 when `fill_from_input`, else zero bits).
struct PadKernel {
    in_strides: Vec<usize>,
    maps: Vec<Vec<Option<usize>>>,
    fill_from_input: bool,
}

impl MoveKernel for PadKernel {
    fn run<E: Movable>(&self, inputs: &[&[E]]) -> Result<Vec<E>> {
        let fill = if self.fill_from_input {
            inputs[1][0].clone()
        } else {
            E::default()
        };
        let src = inputs[0];
        let n: usize = self.maps.iter().map(Vec::len).product();
        let mut out = Vec::with_capacity(n);
        if n == 0 {
            return Ok(out);
        }
        let rank = self.maps.len();
        if rank == 0 {
            return Ok(vec![src[0].clone()]);
        }
        let mut idx = vec![0usize; rank - 1];
        loop {
            let base: Option<usize> = idx.iter().enumerate().try_fold(0, |acc, (d, &i)| {
                self.maps[d][i].map(|s| acc + s * self.in_strides[d])
            });
            let inner = &self.maps[rank - 1];
            match base {
                None => out.extend(std::iter::repeat_n(fill.clone(), inner.len())),
                Some(b) => out.extend(inner.iter().map(|s| match s {
                    Some(s) => src[b + s].clone(),
                    None => fill.clone(),
                })),
            }
            let mut d = rank - 1;
            loop {
                if d == 0 {
                    return Ok(out);
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < self.maps[d].len() {
                    break;
                }
                idx[d] = 0;
            }
        }
    }
}

/// What Pad computes for one input: every axis's source map and the fill value (`None`: zero
/// bits), resolved once for the CPU's evaluation and the device kernel.
struct PadGeometry {
    maps: Vec<Vec<Option<usize>>>,
    fill: Option<Tensor>,
}

impl Pad {
    /// The geometry of padding an input of `shape` and `dtype`, pads and fill read from the
    /// attributes or the host inputs 1 to 3.
    fn geometry(&self, shape: &[usize], dtype: DType, inputs: &Inputs) -> Result<PadGeometry> {
        let rank = shape.len();
        let (pads, fill) = match &self.attributes {
            Some((pads, value)) => {
                let fill = super::cast::cast_tensor(&Tensor::scalar(*value), dtype)?;
                (pads.clone(), (*value != 0.0).then_some(fill))
            }
            None => (
                inputs.ints(1, "pads")?,
                inputs.opt_tensor(2)?.cloned().filter(|t| t.numel() > 0),
            ),
        };
        let axes = match inputs.opt_ints(3, "axes")? {
            Some(a) => normalize_axes(&a, rank, "axes")?,
            None => (0..rank).collect(),
        };
        if pads.len() != 2 * axes.len() {
            bail!(
                "pads {pads:?} must hold 2 entries per padded axis ({} axes)",
                axes.len()
            );
        }
        let mut per_axis = vec![(0i64, 0i64); rank];
        for (k, &a) in axes.iter().enumerate() {
            per_axis[a] = (pads[k], pads[k + axes.len()]);
        }
        let maps = padded_axis_maps("Pad", shape, dtype, &per_axis, self.mode)?;
        Ok(PadGeometry { maps, fill })
    }
}

impl Op for Pad {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let PadGeometry { maps, fill } = self.geometry(x.shape(), x.dtype(), inputs)?;
        let out_shape: Vec<usize> = maps.iter().map(Vec::len).collect();
        let kernel = PadKernel {
            in_strides: crate::broadcast::strides(x.shape()),
            maps,
            fill_from_input: fill.is_some(),
        };
        let out = match &fill {
            Some(f) => move_elements(&[x, f], out_shape, &kernel),
            None => move_elements(&[x], out_shape, &kernel),
        };
        Ok(vec![out?.into()])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Shaped)
    }

    /// X on the device (float32), everything else on the host: the axis maps become the
    /// kernel's tables (`-1`: the fill), the fill its one float.
    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], inputs: &Inputs) -> Result<ShapedKernel> {
        let shape = input_shape(shapes, 0)?;
        let PadGeometry { maps, fill } = self.geometry(shape, DType::F32, inputs)?;
        let fill = match &fill {
            Some(f) => f.as_slice::<f32>()?[0],
            None => 0.0,
        };
        let output: Vec<usize> = maps.iter().map(Vec::len).collect();
        if shape
            .iter()
            .chain(&output)
            .any(|&n| n >= SOURCE_TABLE_EXACT)
        {
            bail!("an axis of {SOURCE_TABLE_EXACT} or more elements is padded on the CPU");
        }
        let tables = maps
            .iter()
            .map(|m| m.iter().map(|s| s.map_or(-1.0, |s| s as f32)).collect())
            .collect();
        let ints = [shape.len()]
            .into_iter()
            .chain(output.iter().copied())
            .chain(shape.iter().copied())
            .map(|v| v as i64)
            .collect();
        Ok(ShapedKernel::Source(SourceKernel::per_element(
            "sb_pad",
            vec![0],
            tables,
            (ints, vec![fill]),
            output,
        )))
    }
}

/// CenterCropPad: each listed axis is cropped or zero-padded to its target length, centered;
/// an odd difference puts the extra element at the end (ONNX's reference slicing).
#[derive(Debug)]
struct CenterCropPad {
    /// The axes `shape` lists, all of them when absent.
    axes: Option<Vec<i64>>,
}

impl Op for CenterCropPad {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let target = dims_from(&inputs.ints(1, "shape")?, "input 1 (shape)")?;
        let axes = match &self.axes {
            Some(a) => normalize_axes(a, x.rank(), "attribute \"axes\"")?,
            None => (0..x.rank()).collect(),
        };
        if target.len() != axes.len() {
            bail!(
                "input 1 (shape) holds {} lengths for {} axes",
                target.len(),
                axes.len()
            );
        }
        let mut per_axis = vec![(0i64, 0i64); x.rank()];
        for (&a, &want) in axes.iter().zip(&target) {
            let (n, want) = (x.shape()[a] as i64, want as i64);
            let before = if want >= n {
                (want - n) / 2
            } else {
                -((n - want) / 2)
            };
            per_axis[a] = (before, want - n - before);
        }
        let maps = padded_axis_maps(
            "CenterCropPad",
            x.shape(),
            x.dtype(),
            &per_axis,
            PadMode::Constant,
        )?;
        let out_shape: Vec<usize> = maps.iter().map(Vec::len).collect();
        let kernel = PadKernel {
            in_strides: crate::broadcast::strides(x.shape()),
            maps,
            fill_from_input: false,
        };
        Ok(vec![move_elements(&[x], out_shape, &kernel)?.into()])
    }
}

fn block_size(ctx: &BuildContext) -> Result<usize> {
    let b = NodeArgs::new(ctx.node).req_int("blocksize")?;
    if b <= 0 {
        bail!("attribute \"blocksize\" = {b} must be positive");
    }
    Ok(b as usize)
}

/// DepthToSpace in DCR (depth-column-row, default) or CRD order.
#[derive(Debug)]
struct DepthToSpace {
    block: usize,
    crd: bool,
}

fn depth_to_space(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let mode = NodeArgs::new(ctx.node).string_or("mode", "DCR".into())?;
    let crd = match mode.as_str() {
        "DCR" => false,
        "CRD" => true,
        other => bail!("attribute \"mode\" = {other:?} is not DCR or CRD"),
    };
    Ok(Box::new(DepthToSpace {
        block: block_size(ctx)?,
        crd,
    }))
}

/// The `[N, C, H, W]` dims of a 4-D input.
fn nchw(x: &Tensor) -> Result<[usize; 4]> {
    match *x.shape() {
        [n, c, h, w] => Ok([n, c, h, w]),
        _ => bail!("input must be 4-D [N, C, H, W], has shape {:?}", x.shape()),
    }
}

impl Op for DepthToSpace {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let [n, c, h, w] = nchw(x)?;
        let b = self.block;
        let b2 = b.saturating_mul(b);
        if !c.is_multiple_of(b2) {
            bail!("channels {c} are not a multiple of blocksize² = {b}²");
        }
        let c_out = c / b2;
        let view = if self.crd {
            StridedView::dense(&[n, c_out, b, b, h, w]).permuted(&[0, 1, 4, 2, 5, 3])
        } else {
            StridedView::dense(&[n, b, b, c_out, h, w]).permuted(&[0, 3, 4, 1, 5, 2])
        };
        let out = vec![n, c_out, h * b, w * b];
        Ok(vec![move_elements(&[x], out, &view)?.into()])
    }
}

#[derive(Debug)]
struct SpaceToDepth(usize);

impl Op for SpaceToDepth {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        same_dtype(inputs)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let [n, c, h, w] = nchw(x)?;
        let b = self.0;
        if !h.is_multiple_of(b) || !w.is_multiple_of(b) {
            bail!("height {h} and width {w} must be multiples of blocksize {b}");
        }
        let view = StridedView::dense(&[n, c, h / b, b, w / b, b]).permuted(&[0, 3, 5, 1, 2, 4]);
        let out = vec![n, c * b * b, h / b, w / b];
        Ok(vec![move_elements(&[x], out, &view)?.into()])
    }
}
