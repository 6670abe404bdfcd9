//! Normalizations: LayerNormalization, RMSNormalization, BatchNormalization,
//! InstanceNormalization, GroupNormalization, LpNormalization, MeanVarianceNormalization and
//! LRN (local response normalization across channels).
//!
//! Each op evaluates the formula written for it in docs/contract.md, section `normalization`:
//! statistics are canonical sums and dot products over one row of the normalized elements
//! (`canonical-sum`), every other step one IEEE operation in the written order. Rows are
//! independent, so a row's bits do not depend on the batch size or the thread count.

use super::activation::pow_f32;
use super::numeric::{Layout, Real, normalize_axes, permute, with_real_type};
use crate::broadcast::{broadcast_shapes, expand};
use crate::device_kernel::input_shape;
use crate::registry::Registry;
use crate::{
    BuildContext, ChainKernel, ChainLayout, ChainOp, ChainOperand, ChainStep, DeviceKernel, Inputs,
    InputsExt, NodeArgs, Op, OpError, Result, ShapedKernel, bail, normalize_axis, unsupported,
};
use rayon::prelude::*;
use samebits_ir::{DType, Tensor, Value, ValueType};

pub fn register(r: &mut Registry) {
    r.register("", "LayerNormalization", |ctx| {
        RowNorm::build(ctx, RowNormKind::Layer)
    });
    r.register("", "RMSNormalization", |ctx| {
        RowNorm::build(ctx, RowNormKind::Rms)
    });
    r.register("", "BatchNormalization", BatchNorm::build);
    r.register("", "InstanceNormalization", |ctx| {
        ChannelNorm::build(ctx, ChannelGroups::PerChannel)
    });
    r.register("", "GroupNormalization", |ctx| {
        let groups = NodeArgs::new(ctx.node).req_int("num_groups")?;
        ChannelNorm::build(ctx, ChannelGroups::Groups(groups))
    });
    r.register("", "LpNormalization", LpNorm::build);
    r.register("", "MeanVarianceNormalization", Mvn::build);
    r.register("", "LRN", Lrn::build);
}

/// Rows of `len` elements processed in parallel: `f(row_index, row_out)`.
fn for_each_row<R: Real>(out: &mut [R], len: usize, f: impl Fn(usize, &mut [R]) + Sync) {
    if len == 0 {
        return;
    }
    out.par_chunks_mut(len)
        .enumerate()
        .for_each(|(r, row)| f(r, row));
}

/// `mean = canonical_sum(x) / n`; `var = canonical_dot(d, d) / n` with `d = x - mean`
/// (contract: normalization). Returns `(mean, var)`; `d` is left in `centered`.
fn moments<R: Real>(x: &[R], centered: &mut [R]) -> (R, R) {
    let n = R::from_count(x.len());
    let mean = R::sum_strided(x, 1, x.len()) / n;
    for (d, &v) in centered.iter_mut().zip(x) {
        *d = v - mean;
    }
    let var = R::dot_strided(centered, 1, centered, 1, x.len()) / n;
    (mean, var)
}

/// `1 / sqrt(v + eps)`.
pub(super) fn rsqrt_eps<R: Real>(v: R, eps: R) -> R {
    R::ONE / (v + eps).sqrt()
}

/// Reads the `epsilon` attribute.
fn epsilon(args: &NodeArgs, default: f32) -> Result<f32> {
    args.float_or("epsilon", default)
}

/// Input `i` (a per-row parameter such as scale or bias) broadcast to `shape`, at precision `R`.
fn broadcast_param<R: Real>(t: &Tensor, i: usize, name: &str, shape: &[usize]) -> Result<Vec<R>> {
    let what = format!("input {i} ({name})");
    let values = R::read(t, &what)?;
    match broadcast_shapes(&[t.shape(), shape]) {
        Ok(b) if b == shape => Ok(expand(&values, t.shape(), shape)),
        _ => bail!(
            "{what} of shape {:?} does not broadcast to the normalized shape {shape:?}",
            t.shape()
        ),
    }
}

/// A per-channel parameter: input `i` must hold exactly `count` elements.
fn channel_param<R: Real>(inputs: &Inputs, i: usize, name: &str, count: usize) -> Result<Vec<R>> {
    let t = inputs.tensor(i)?;
    if t.numel() != count {
        bail!(
            "input {i} ({name}) must hold {count} elements (one per channel), has shape {:?}",
            t.shape()
        );
    }
    Ok(R::read(t, &format!("input {i} ({name})"))?.into_owned())
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum RowNormKind {
    /// LayerNormalization: centered, with bias; outputs Mean and InvStdDev.
    Layer,
    /// RMSNormalization: not centered, no bias.
    Rms,
}

/// LayerNormalization and RMSNormalization over the axes `axis..rank`.
#[derive(Debug)]
struct RowNorm {
    kind: RowNormKind,
    axis: i64,
    epsilon: f32,
}

impl RowNorm {
    fn build(ctx: &BuildContext, kind: RowNormKind) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        let stash = args.int_or("stash_type", 1)?;
        if stash != 1 {
            unsupported!("attribute \"stash_type\" = {stash} (only 1, float, is implemented)");
        }
        Ok(Box::new(RowNorm {
            kind,
            axis: args.int_or("axis", -1)?,
            epsilon: epsilon(&args, 1e-5)?,
        }))
    }

    fn eval_as<R: Real>(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let axis = normalize_axis(self.axis, x.rank())
            .map_err(|e| OpError::Invalid(format!("attribute \"axis\": {e}")))?;
        let norm_shape = &x.shape()[axis..];
        let len: usize = norm_shape.iter().product();
        let rows: usize = x.shape()[..axis].iter().product();
        let data = R::read(x, "input 0 (X)")?;
        let scale = broadcast_param::<R>(inputs.tensor(1)?, 1, "scale", norm_shape)?;
        let bias = match (self.kind, inputs.opt_tensor(2)?) {
            (RowNormKind::Layer, Some(b)) => Some(broadcast_param::<R>(b, 2, "B", norm_shape)?),
            _ => None,
        };
        let eps = R::from_f32(self.epsilon);
        let mut out = vec![R::ZERO; data.len()];
        let mut stats = vec![(R::ZERO, R::ZERO); rows];
        let kind = self.kind;
        // contract: normalization (LayerNormalization, RMSNormalization)
        out.par_chunks_mut(len.max(1))
            .zip(stats.par_iter_mut())
            .enumerate()
            .for_each(|(r, (y, stat))| {
                let row = &data[r * len..(r + 1) * len];
                let n = R::from_count(len);
                match kind {
                    RowNormKind::Layer => {
                        let (mean, var) = moments(row, y);
                        let rstd = rsqrt_eps(var, eps);
                        for (k, v) in y.iter_mut().enumerate() {
                            let scaled = (*v * rstd) * scale[k];
                            *v = match &bias {
                                Some(b) => scaled + b[k],
                                None => scaled,
                            };
                        }
                        *stat = (mean, rstd);
                    }
                    RowNormKind::Rms => {
                        let ms = R::dot_strided(row, 1, row, 1, len) / n;
                        let rrms = rsqrt_eps(ms, eps);
                        for (k, v) in y.iter_mut().enumerate() {
                            *v = (row[k] * rrms) * scale[k];
                        }
                        *stat = (R::ZERO, rrms);
                    }
                }
            });
        let y = R::store(x.dtype(), x.shape().to_vec(), out)?;
        if self.kind == RowNormKind::Rms {
            return Ok(vec![y.into()]);
        }
        let mut stat_shape = x.shape()[..axis].to_vec();
        stat_shape.resize(x.rank(), 1);
        let stash = if x.dtype() == DType::F64 {
            DType::F64
        } else {
            DType::F32
        };
        let (mean, rstd): (Vec<R>, Vec<R>) = stats.into_iter().unzip();
        Ok(vec![
            y.into(),
            R::store(stash, stat_shape.clone(), mean)?.into(),
            R::store(stash, stat_shape, rstd)?.into(),
        ])
    }
}

impl Op for RowNorm {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![inputs.first().cloned().flatten()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        with_real_type!(inputs.tensor(0)?.dtype(), R => self.eval_as::<R>(inputs),
            else unsupported!("{:?} normalization of {} tensors", self.kind, inputs.tensor(0)?.dtype()))
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        let (axis, epsilon) = (self.axis, self.epsilon);
        Some(match self.kind {
            RowNormKind::Layer => DeviceKernel::LayerNorm { axis, epsilon },
            RowNormKind::Rms => DeviceKernel::RmsNorm { axis, epsilon },
        })
    }
}

/// `[N, C, spatial...]` as `(N, C, spatial size)`, or an error naming the input.
fn nc_dims(x: &Tensor) -> Result<(usize, usize, usize)> {
    if x.rank() < 2 {
        bail!(
            "input 0 (X) must have at least 2 dims [N, C, ...], has shape {:?}",
            x.shape()
        );
    }
    Ok((x.shape()[0], x.shape()[1], x.shape()[2..].iter().product()))
}

/// Which statistics a BatchNormalization node normalizes with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BatchNormMode {
    /// The given mean and variance.
    Inference,
    /// The batch's, with updated running statistics as further outputs (`training_mode = 1`).
    Training,
}

/// The mode of a BatchNormalization `node` at default-domain `opset`: `training_mode` (default
/// 0) from opset 7 on; before it `is_test` (default 0, training), whose training form (with
/// its own running-statistics outputs) is not implemented. `spatial = 0` (per-activation
/// statistics, opsets 1–8) is not implemented either.
pub(crate) fn batch_norm_mode(node: &samebits_ir::Node, opset: i64) -> Result<BatchNormMode> {
    let args = NodeArgs::new(node);
    if opset < 9 {
        let spatial = args.int_or("spatial", 1)?;
        if spatial != 1 {
            unsupported!(
                "attribute \"spatial\" = {spatial} (per-activation statistics, opsets 1-8)"
            );
        }
    }
    if opset < 7 {
        let is_test = args.int_or("is_test", 0)?;
        if is_test == 0 {
            unsupported!(
                "attribute \"is_test\" = 0 (training mode before opset 7); only is_test = 1"
            );
        }
        return Ok(BatchNormMode::Inference);
    }
    Ok(if args.int_or("training_mode", 0)? != 0 {
        BatchNormMode::Training
    } else {
        BatchNormMode::Inference
    })
}

/// BatchNormalization: inference with the given statistics, or `training_mode` with batch
/// statistics and updated running statistics.
#[derive(Debug)]
struct BatchNorm {
    epsilon: f32,
    momentum: f32,
    training: bool,
}

impl BatchNorm {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        Ok(Box::new(BatchNorm {
            epsilon: epsilon(&args, 1e-5)?,
            momentum: args.float_or("momentum", 0.9)?,
            training: batch_norm_mode(ctx.node, ctx.opset)? == BatchNormMode::Training,
        }))
    }

    fn eval_as<R: Real>(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let (n, c, spatial) = nc_dims(x)?;
        let data = R::read(x, "input 0 (X)")?;
        let scale = channel_param::<R>(inputs, 1, "scale", c)?;
        let bias = channel_param::<R>(inputs, 2, "B", c)?;
        let input_mean = channel_param::<R>(inputs, 3, "input_mean", c)?;
        let input_var = channel_param::<R>(inputs, 4, "input_var", c)?;
        let eps = R::from_f32(self.epsilon);
        // contract: normalization (BatchNormalization)
        let (mean, var) = if self.training {
            // Channel-major copy: each channel's terms in (n, spatial) row-major order.
            let by_channel = permute(&data, &[n, c, spatial], &[1, 0, 2]);
            let count = n * spatial;
            let mut centered = vec![R::ZERO; count];
            (0..c)
                .map(|ch| moments(&by_channel[ch * count..(ch + 1) * count], &mut centered))
                .unzip()
        } else {
            (input_mean.clone(), input_var.clone())
        };
        let rstd: Vec<R> = var.iter().map(|&v| rsqrt_eps(v, eps)).collect();
        let mut out = vec![R::ZERO; data.len()];
        for_each_row(&mut out, spatial, |row, y| {
            let ch = row % c;
            let src = &data[row * spatial..(row + 1) * spatial];
            for (v, &s) in y.iter_mut().zip(src) {
                *v = ((s - mean[ch]) * rstd[ch]) * scale[ch] + bias[ch];
            }
        });
        let y = R::store(x.dtype(), x.shape().to_vec(), out)?;
        if !self.training {
            return Ok(vec![y.into()]);
        }
        let m = R::from_f32(self.momentum);
        let one_minus = R::from_f32(1.0 - self.momentum);
        let running = |old: &[R], new: &[R]| -> Vec<R> {
            old.iter()
                .zip(new)
                .map(|(&o, &b)| o * m + b * one_minus)
                .collect()
        };
        let stat_dtype = inputs.tensor(3)?.dtype();
        Ok(vec![
            y.into(),
            R::store(stat_dtype, vec![c], running(&input_mean, &mean))?.into(),
            R::store(stat_dtype, vec![c], running(&input_var, &var))?.into(),
        ])
    }
}

impl Op for BatchNorm {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![inputs.first().cloned().flatten()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        with_real_type!(inputs.tensor(0)?.dtype(), R => self.eval_as::<R>(inputs),
            else unsupported!("BatchNormalization of {} tensors", inputs.tensor(0)?.dtype()))
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        (!self.training).then_some(DeviceKernel::Shaped)
    }

    /// Inference: the one-step chain `((x - mean) * rstd) * scale + bias` per channel.
    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], _inputs: &Inputs) -> Result<ShapedKernel> {
        let x = input_shape(shapes, 0)?;
        if self.training || x.len() < 2 {
            bail!("BatchNormalization: no device kernel for training or rank < 2");
        }
        for i in 1..5 {
            if input_shape(shapes, i)?.iter().product::<usize>() != x[1] {
                bail!("BatchNormalization: input {i} must hold one value per channel");
            }
        }
        let mut layouts = vec![ChainLayout::Channel; 5];
        layouts[0] = ChainLayout::Full;
        Ok(ShapedKernel::Chain(ChainKernel {
            shape: x.to_vec(),
            layouts,
            steps: vec![ChainStep {
                op: ChainOp::BatchNorm {
                    epsilon: self.epsilon,
                },
                operands: (0..5).map(ChainOperand::Input).collect(),
            }],
        }))
    }
}

#[derive(Clone, Copy, Debug)]
enum ChannelGroups {
    /// InstanceNormalization: each channel its own group.
    PerChannel,
    /// GroupNormalization with `num_groups`.
    Groups(i64),
}

/// InstanceNormalization and GroupNormalization: statistics over each (image, group of
/// channels), then a per-channel (or, GroupNormalization-18 style, per-group) scale and bias.
#[derive(Debug)]
struct ChannelNorm {
    groups: ChannelGroups,
    epsilon: f32,
}

impl ChannelNorm {
    fn build(ctx: &BuildContext, groups: ChannelGroups) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        if let ChannelGroups::Groups(g) = groups
            && g <= 0
        {
            bail!("attribute \"num_groups\" must be positive, got {g}");
        }
        Ok(Box::new(ChannelNorm {
            groups,
            epsilon: epsilon(&args, 1e-5)?,
        }))
    }

    fn eval_as<R: Real>(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let (_, c, spatial) = nc_dims(x)?;
        let groups = match self.groups {
            ChannelGroups::PerChannel => c,
            ChannelGroups::Groups(g) => g as usize,
        };
        if c % groups != 0 {
            bail!("attribute \"num_groups\" = {groups} does not divide the {c} channels");
        }
        let per_group = c / groups;
        let param_len = match inputs.tensor(1)?.numel() {
            len if len == groups => groups,
            _ => c,
        };
        let scale = channel_param::<R>(inputs, 1, "scale", param_len)?;
        let bias = channel_param::<R>(inputs, 2, "B", param_len)?;
        let data = R::read(x, "input 0 (X)")?;
        let eps = R::from_f32(self.epsilon);
        let len = per_group * spatial;
        let mut out = vec![R::ZERO; data.len()];
        // contract: normalization (InstanceNormalization, GroupNormalization)
        for_each_row(&mut out, len, |row, y| {
            let (_, var) = moments(&data[row * len..(row + 1) * len], y);
            let rstd = rsqrt_eps(var, eps);
            for (k, v) in y.iter_mut().enumerate() {
                let ch = (row % groups) * per_group + k / spatial.max(1);
                let p = if param_len == c { ch } else { ch / per_group };
                *v = (*v * rstd) * scale[p] + bias[p];
            }
        });
        Ok(vec![R::store(x.dtype(), x.shape().to_vec(), out)?.into()])
    }
}

impl Op for ChannelNorm {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![inputs.first().cloned().flatten()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        with_real_type!(inputs.tensor(0)?.dtype(), R => self.eval_as::<R>(inputs),
            else unsupported!("{:?} normalization of {} tensors", self.groups, inputs.tensor(0)?.dtype()))
    }
}

/// LpNormalization: `y = x / norm` along `axis` (`0` where `norm = 0`), `norm` the canonical L1
/// sum or the square root of the canonical sum of squares.
#[derive(Debug)]
struct LpNorm {
    axis: i64,
    p: i64,
}

impl LpNorm {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        let p = args.int_or("p", 2)?;
        if p != 1 && p != 2 {
            bail!("attribute \"p\" must be 1 or 2, got {p}");
        }
        Ok(Box::new(LpNorm {
            axis: args.int_or("axis", -1)?,
            p,
        }))
    }

    fn eval_as<R: Real>(&self, x: &Tensor) -> Result<Tensor> {
        let axis = normalize_axis(self.axis, x.rank())
            .map_err(|e| OpError::Invalid(format!("attribute \"axis\": {e}")))?;
        let (outer, len, inner) = Layout::new(x.shape(), &[axis]).dims;
        let data = R::read(x, "input 0")?;
        let mut out = vec![R::ZERO; data.len()];
        // contract: normalization (LpNormalization)
        for o in 0..outer {
            for i in 0..inner {
                let base = o * len * inner + i;
                let row = &data[base..];
                let norm = if self.p == 1 {
                    let magnitudes: Vec<R> = (0..len).map(|k| row[k * inner].abs()).collect();
                    R::sum_strided(&magnitudes, 1, len)
                } else {
                    R::dot_strided(row, inner, row, inner, len).sqrt()
                };
                for k in 0..len {
                    out[base + k * inner] = if norm == R::ZERO {
                        R::ZERO
                    } else {
                        row[k * inner] / norm
                    };
                }
            }
        }
        R::store(x.dtype(), x.shape().to_vec(), out)
    }
}

impl Op for LpNorm {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![inputs.first().cloned().flatten()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let y = with_real_type!(x.dtype(), R => self.eval_as::<R>(x)?,
            else unsupported!("LpNormalization of {} tensors", x.dtype()));
        Ok(vec![y.into()])
    }
}

/// LRN: `y = x / (bias + (alpha / size) * sq) ^ beta`, `sq` the canonical sum of squares of
/// the channels `c - (size - 1) / 2 ..= c + size / 2` that exist, at the same image and
/// position (contract: normalization, LRN).
#[derive(Debug)]
struct Lrn {
    alpha: f32,
    beta: f32,
    bias: f32,
    size: usize,
}

impl Lrn {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        let size = args.req_int("size")?;
        if size < 1 {
            bail!("attribute \"size\" must be at least 1, got {size}");
        }
        Ok(Box::new(Lrn {
            alpha: args.float_or("alpha", 1e-4)?,
            beta: args.float_or("beta", 0.75)?,
            bias: args.float_or("bias", 1.0)?,
            size: size as usize,
        }))
    }
}

impl Op for Lrn {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![inputs.first().cloned().flatten()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        if x.dtype() == DType::F64 {
            unsupported!("LRN of f64 tensors");
        }
        let (_, c, len) = nc_dims(x)?;
        let data = f32::read(x, "input 0")?;
        let scale = self.alpha / self.size as f32;
        let (below, above) = ((self.size - 1) / 2, self.size / 2);
        let mut out = vec![0.0f32; data.len()];
        for_each_row(&mut out, c * len, |image, block| {
            let src = &data[image * c * len..(image + 1) * c * len];
            for ch in 0..c {
                let (first, end) = (ch.saturating_sub(below), (ch + above + 1).min(c));
                for j in 0..len {
                    let window = &src[first * len + j..];
                    let sq = f32::dot_strided(window, len, window, len, end - first);
                    let base = self.bias + scale * sq;
                    block[ch * len + j] = src[ch * len + j] / pow_f32(base, self.beta);
                }
            }
        });
        Ok(vec![f32::store(x.dtype(), x.shape().to_vec(), out)?.into()])
    }
}

/// MeanVarianceNormalization over `axes` (default `[0, 2, 3]`):
/// `y = d / (sqrt(var) + 1e-9)` with the statistics of [`moments`].
#[derive(Debug)]
struct Mvn {
    axes: Vec<i64>,
}

/// The ONNX function's epsilon, added to the standard deviation.
const MVN_EPSILON: f32 = 1e-9;

impl Mvn {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        Ok(Box::new(Mvn {
            axes: NodeArgs::new(ctx.node).ints_or("axes", vec![0, 2, 3])?,
        }))
    }

    fn eval_as<R: Real>(&self, x: &Tensor) -> Result<Tensor> {
        let axes = normalize_axes(&self.axes, x.rank())?;
        let layout = Layout::new(x.shape(), &axes);
        let (outer, len, inner) = layout.dims;
        let data = layout.arrange(R::read(x, "input 0")?.into_owned(), x.shape());
        let eps = R::from_f32(MVN_EPSILON);
        let mut out = vec![R::ZERO; data.len()];
        let mut row = vec![R::ZERO; len];
        let mut centered = vec![R::ZERO; len];
        // contract: normalization (MeanVarianceNormalization)
        for o in 0..outer {
            for i in 0..inner {
                let at = |k: usize| (o * len + k) * inner + i;
                for (k, r) in row.iter_mut().enumerate() {
                    *r = data[at(k)];
                }
                let (_, var) = moments(&row, &mut centered);
                let std = var.sqrt() + eps;
                for (k, &d) in centered.iter().enumerate() {
                    out[at(k)] = d / std;
                }
            }
        }
        let out = match &layout.perm {
            Some(perm) => {
                let arranged: Vec<usize> = perm.iter().map(|&p| x.shape()[p]).collect();
                let mut inverse = vec![0; perm.len()];
                for (i, &p) in perm.iter().enumerate() {
                    inverse[p] = i;
                }
                permute(&out, &arranged, &inverse)
            }
            None => out,
        };
        R::store(x.dtype(), x.shape().to_vec(), out)
    }
}

impl Op for Mvn {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![inputs.first().cloned().flatten()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let y = with_real_type!(x.dtype(), R => self.eval_as::<R>(x)?,
            else unsupported!("MeanVarianceNormalization of {} tensors", x.dtype()));
        Ok(vec![y.into()])
    }
}
