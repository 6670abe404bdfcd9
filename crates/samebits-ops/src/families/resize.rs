//! Resampling: Resize (opsets 10 to 19) and the deprecated Upsample (nearest, N-d linear and
//! cubic interpolation under every coordinate transformation mode, from scales or sizes, on
//! chosen axes, with keep_aspect_ratio_policy and extrapolation), and AffineGrid (opset 20),
//! whose CUDA kernel is its own (`kernels/affine_grid.cu`, [`ShapedKernel::Source`]).
//!
//! Implements contract section `resize`: each axis maps every output coordinate to a list of
//! input taps with f32 weights (computed in f32 in the order written there); an output is its
//! single input element when it has one tap of weight 1 on every axis, and otherwise the
//! `canonical-sum` dot product of the tap weights (products of the per-axis weights, axis order)
//! with the tap values, taps in row-major order over the axes. f16 / bf16 compute in f32 and
//! round once at the store.

use crate::device_kernel::{AxisTaps, input_shape};
use crate::registry::Registry;
use crate::staging::{f32_values, store_f32};
use crate::{
    BuildContext, DeviceKernel, Inputs, InputsExt, NodeArgs, Op, ResizeTaps, Result, ShapedKernel,
    SourceKernel, bail, normalize_axis, unsupported,
};
use rayon::prelude::*;
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{DType, Tensor, Value, ValueType};
use samebits_kernels::canonical_dot;

pub fn register(r: &mut Registry) {
    r.register("", "Resize", resize);
    r.register("", "Upsample", upsample);
    r.register("", "AffineGrid", affine_grid);
    r.register_kernel_source(
        "affine_grid.cu",
        include_str!("../../kernels/affine_grid.cu"),
    );
}

/// AffineGrid: for theta `[N, 2, 3]` and size `[N, C, H, W]`, the grid `[N, H, W, 2]` of
/// `theta[n] · (x_w, y_h, 1)`; for theta `[N, 3, 4]` and size `[N, C, D, H, W]`, the grid
/// `[N, D, H, W, 3]` of `theta[n] · (x_w, y_h, z_d, 1)`. The base coordinates of an axis of
/// length L follow the ONNX function body, in f32: with `align_corners`, `step = 2 / (L - 1)`
/// and `start = -1` (L = 1: the single coordinate -1); without, `step = 2 / L` and
/// `start = -1 + step / 2`; coordinate `i` is `start + i * step` (two roundings). Each output
/// is the `canonical-sum` dot product of the theta row with those coordinates and 1, in that
/// order. f16 / bf16 compute in f32 and round once at the store.
#[derive(Debug)]
struct AffineGrid {
    align_corners: bool,
}

fn affine_grid(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let align_corners = NodeArgs::new(ctx.node).int_or("align_corners", 0)? != 0;
    Ok(Box::new(AffineGrid { align_corners }))
}

/// The base coordinates of an AffineGrid axis of `len` points (the op's docs).
fn affine_grid_axis(len: usize, align_corners: bool) -> Vec<f32> {
    let l = len as f32;
    let (start, step) = match (align_corners, len) {
        (true, 1) => (-1.0, 0.0),
        (true, _) => (-1.0, 2.0 / (l - 1.0)),
        (false, _) => {
            let step = 2.0 / l;
            (-1.0 + step / 2.0, step)
        }
    };
    (0..len).map(|i| start + i as f32 * step).collect()
}

/// An AffineGrid problem: batch, spatial dims `[D, H, W]` (D = 1 for 2-D) and whether it is
/// 3-D, checked against theta's shape.
struct GridShape {
    batch: usize,
    dhw: [usize; 3],
    dims: usize,
}

impl GridShape {
    fn new(theta: &[usize], size: &[i64]) -> Result<GridShape> {
        let size = size
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| crate::OpError::Invalid(format!("size {size:?} holds a negative dim")))?;
        let (dims, dhw) = match *size.as_slice() {
            [_, _, h, w] => (2, [1, h, w]),
            [_, _, d, h, w] => (3, [d, h, w]),
            _ => bail!("size must hold 4 (N, C, H, W) or 5 (N, C, D, H, W) values, got {size:?}"),
        };
        let batch = size[0];
        if theta != [batch, dims, dims + 1] {
            bail!(
                "theta has shape {theta:?}; size {size:?} needs [{batch}, {dims}, {}]",
                dims + 1
            );
        }
        let grid = GridShape { batch, dhw, dims };
        check_tensor_size("AffineGrid output", &grid.output(), DType::F32)?;
        Ok(grid)
    }

    /// `[N, H, W, 2]` or `[N, D, H, W, 3]`.
    fn output(&self) -> Vec<usize> {
        let spatial = &self.dhw[3 - self.dims..];
        [self.batch]
            .into_iter()
            .chain(spatial.iter().copied())
            .chain([self.dims])
            .collect()
    }

    /// The base coordinates of W, H and D, in that order (the kernel's tables).
    fn axes(&self, align_corners: bool) -> Vec<Vec<f32>> {
        let [d, h, w] = self.dhw;
        let mut axes = vec![
            affine_grid_axis(w, align_corners),
            affine_grid_axis(h, align_corners),
        ];
        if self.dims == 3 {
            axes.push(affine_grid_axis(d, align_corners));
        }
        axes
    }
}

impl Op for AffineGrid {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let dtype = inputs.first().cloned().flatten().and_then(|t| t.dtype());
        Ok(vec![dtype.map(|d| ValueType::tensor(d, None))])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Shaped)
    }

    /// theta on the device, size read on the host; the base coordinates as tables.
    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], inputs: &Inputs) -> Result<ShapedKernel> {
        let grid = GridShape::new(input_shape(shapes, 0)?, &inputs.ints(1, "size")?)?;
        let [d, h, w] = grid.dhw;
        Ok(ShapedKernel::Source(SourceKernel::per_element(
            "sb_affine_grid",
            vec![0],
            grid.axes(self.align_corners),
            (
                [grid.batch, d, h, w, grid.dims].map(|v| v as i64).to_vec(),
                Vec::new(),
            ),
            grid.output(),
        )))
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let theta = inputs.tensor(0)?;
        let grid = GridShape::new(theta.shape(), &inputs.ints(1, "size")?)?;
        let values = f32_values(theta, "AffineGrid input theta")?;
        let axes = grid.axes(self.align_corners);
        let dims = grid.dims;
        let [_, h, w] = grid.dhw;
        let shape = grid.output();
        let mut out = vec![0.0f32; shape.iter().product()];
        // One point per chunk: its `dims` coordinates.
        out.par_chunks_mut(dims)
            .enumerate()
            .for_each(|(cell, point)| {
                let (x, y) = (axes[0][cell % w], axes[1][cell / w % h]);
                let mut base = [x, y, 1.0, 1.0];
                if dims == 3 {
                    base[2] = axes[2][cell / (w * h) % grid.dhw[0]];
                }
                let n = cell / grid.dhw.iter().product::<usize>();
                for (j, v) in point.iter_mut().enumerate() {
                    let row = (n * dims + j) * (dims + 1);
                    *v = canonical_dot(&values[row..row + dims + 1], &base[..dims + 1]);
                }
            });
        Ok(vec![store_f32(theta.dtype(), shape, out)?.into()])
    }
}

/// The cubic convolution weight (Keys) of a tap at distance `d` (0 <= d < 2) from the
/// coordinate, for the constant `a` (contract section `resize`; GridSample's taps too).
pub(super) fn cubic_weight(a: f32, d: f32) -> f32 {
    if d <= 1.0 {
        ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0
    } else {
        ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Coordinates {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NearestRounding {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AspectPolicy {
    Stretch,
    NotLarger,
    NotSmaller,
}

/// Resize's attributes, and where its inputs are.
#[derive(Debug)]
struct Resize {
    mode: Mode,
    coordinates: Coordinates,
    nearest: NearestRounding,
    cubic_a: f32,
    exclude_outside: bool,
    extrapolation: f32,
    axes: Option<Vec<i64>>,
    policy: AspectPolicy,
    /// Input index of scales (1 before opset 11, else 2) and of roi (opset 11 on).
    scales_input: usize,
    roi_input: Option<usize>,
    /// Upsample-7 keeps its scales in an attribute.
    scales_attribute: Option<Vec<f32>>,
}

fn parse_mode(op: &str, args: &NodeArgs) -> Result<Mode> {
    Ok(match args.string_or("mode", "nearest".into())?.as_str() {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" => Mode::Linear,
        "cubic" => Mode::Cubic,
        other => bail!("{op}: attribute \"mode\" must be nearest, linear or cubic, got {other:?}"),
    })
}

fn resize(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    if ctx.opset < 11 {
        return Ok(Box::new(Resize::legacy(
            parse_mode("Resize", &args)?,
            1,
            None,
        )));
    }
    if args.int_or("antialias", 0)? != 0 {
        unsupported!("attribute \"antialias\" = 1 (Resize)");
    }
    let coordinates = match args
        .string_or("coordinate_transformation_mode", "half_pixel".into())?
        .as_str()
    {
        "half_pixel" => Coordinates::HalfPixel,
        "half_pixel_symmetric" => Coordinates::HalfPixelSymmetric,
        "pytorch_half_pixel" => Coordinates::PytorchHalfPixel,
        "align_corners" => Coordinates::AlignCorners,
        "asymmetric" => Coordinates::Asymmetric,
        "tf_crop_and_resize" => Coordinates::TfCropAndResize,
        other => bail!(
            "Resize: attribute \"coordinate_transformation_mode\" has the unknown value {other:?}"
        ),
    };
    let nearest = match args
        .string_or("nearest_mode", "round_prefer_floor".into())?
        .as_str()
    {
        "round_prefer_floor" => NearestRounding::RoundPreferFloor,
        "round_prefer_ceil" => NearestRounding::RoundPreferCeil,
        "floor" => NearestRounding::Floor,
        "ceil" => NearestRounding::Ceil,
        other => bail!("Resize: attribute \"nearest_mode\" has the unknown value {other:?}"),
    };
    let policy = match args
        .string_or("keep_aspect_ratio_policy", "stretch".into())?
        .as_str()
    {
        "stretch" => AspectPolicy::Stretch,
        "not_larger" => AspectPolicy::NotLarger,
        "not_smaller" => AspectPolicy::NotSmaller,
        other => {
            bail!("Resize: attribute \"keep_aspect_ratio_policy\" has the unknown value {other:?}")
        }
    };
    Ok(Box::new(Resize {
        mode: parse_mode("Resize", &args)?,
        coordinates,
        nearest,
        cubic_a: args.float_or("cubic_coeff_a", -0.75)?,
        exclude_outside: args.int_or("exclude_outside", 0)? != 0,
        extrapolation: args.float_or("extrapolation_value", 0.0)?,
        axes: args.ints("axes")?,
        policy,
        scales_input: 2,
        roi_input: Some(1),
        scales_attribute: None,
    }))
}

fn upsample(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    let mode = parse_mode("Upsample", &args)?;
    let scales = if ctx.opset < 9 {
        Some(args.floats("scales")?.ok_or_else(|| {
            crate::OpError::Invalid("Upsample: missing attribute \"scales\"".into())
        })?)
    } else {
        None
    };
    Ok(Box::new(Resize::legacy(mode, 1, scales)))
}

impl Resize {
    /// Resize-10 and Upsample: scales only, asymmetric coordinates, nearest rounds down.
    fn legacy(mode: Mode, scales_input: usize, scales_attribute: Option<Vec<f32>>) -> Resize {
        Resize {
            mode,
            coordinates: Coordinates::Asymmetric,
            nearest: NearestRounding::Floor,
            cubic_a: -0.75,
            exclude_outside: false,
            extrapolation: 0.0,
            axes: None,
            policy: AspectPolicy::Stretch,
            scales_input,
            roi_input: None,
            scales_attribute,
        }
    }
}

/// Everything about one axis that its taps depend on.
struct AxisResize {
    in_len: usize,
    out_len: usize,
    /// The output length the coordinate formulas use: `in_len * scale` (unrounded) when
    /// scales are given, else `out_len`.
    out_extent: f32,
    scale: f32,
    roi: (f32, f32),
}

impl Resize {
    /// The input coordinate of output coordinate `x` (contract section `resize`).
    fn source_coordinate(&self, axis: &AxisResize, x: usize) -> f32 {
        let (xf, in_f, out_f, s) = (x as f32, axis.in_len as f32, axis.out_extent, axis.scale);
        match self.coordinates {
            Coordinates::HalfPixel => (xf + 0.5) / s - 0.5,
            Coordinates::HalfPixelSymmetric => {
                let adjustment = axis.out_len as f32 / (s * in_f);
                let center = in_f / 2.0;
                let offset = center * (1.0 - adjustment);
                offset + (xf + 0.5) / s - 0.5
            }
            Coordinates::PytorchHalfPixel => {
                if out_f > 1.0 {
                    (xf + 0.5) / s - 0.5
                } else {
                    0.0
                }
            }
            Coordinates::AlignCorners => {
                if out_f > 1.0 {
                    xf * (in_f - 1.0) / (out_f - 1.0)
                } else {
                    0.0
                }
            }
            Coordinates::Asymmetric => xf / s,
            Coordinates::TfCropAndResize => {
                let (start, end) = axis.roi;
                let out_len = axis.out_len as f32;
                if axis.out_len > 1 {
                    start * (in_f - 1.0) + xf * (end - start) * (in_f - 1.0) / (out_len - 1.0)
                } else {
                    0.5 * (start + end) * (in_f - 1.0)
                }
            }
        }
    }

    fn axis_taps(&self, axis: &AxisResize, stride: usize) -> AxisTaps {
        let last = axis.in_len - 1;
        let clamp = |i: i64| i.clamp(0, last as i64) as usize;
        (0..axis.out_len)
            .map(|x| {
                let c = self.source_coordinate(axis, x);
                if self.coordinates == Coordinates::TfCropAndResize
                    && !(0.0..=last as f32).contains(&c)
                {
                    return None;
                }
                let taps: Vec<(usize, f32)> = match self.mode {
                    Mode::Nearest => {
                        let floor = c.floor();
                        let i = match self.nearest {
                            NearestRounding::Floor => floor,
                            NearestRounding::Ceil => c.ceil(),
                            NearestRounding::RoundPreferFloor if c - floor == 0.5 => floor,
                            NearestRounding::RoundPreferCeil if c - floor == 0.5 => floor + 1.0,
                            _ => c.round(),
                        };
                        vec![(clamp(i as i64), 1.0)]
                    }
                    Mode::Linear => {
                        let c = c.clamp(0.0, last as f32);
                        let floor = c.floor();
                        let t = c - floor;
                        let i = floor as usize;
                        vec![(i, 1.0 - t), ((i + 1).min(last), t)]
                    }
                    Mode::Cubic => {
                        let floor = c.floor();
                        let t = c - floor;
                        let base = floor as i64 - 1;
                        let distances = [1.0 + t, t, 1.0 - t, 2.0 - t];
                        let mut taps: Vec<(i64, f32)> = distances
                            .iter()
                            .enumerate()
                            .map(|(k, &d)| (base + k as i64, cubic_weight(self.cubic_a, d)))
                            .collect();
                        if self.exclude_outside {
                            for tap in &mut taps {
                                if !(0..=last as i64).contains(&tap.0) {
                                    tap.1 = 0.0;
                                }
                            }
                            let total = taps.iter().fold(0.0f32, |s, t| s + t.1);
                            for tap in &mut taps {
                                tap.1 /= total;
                            }
                        }
                        taps.into_iter().map(|(i, w)| (clamp(i), w)).collect()
                    }
                };
                Some(
                    taps.into_iter()
                        .filter(|&(_, w)| w != 0.0)
                        .map(|(i, w)| (i * stride, w))
                        .collect(),
                )
            })
            .collect()
    }

    /// Per-axis sizes, scales and roi from the inputs.
    fn axes_plan(&self, inputs: &Inputs, shape: &[usize]) -> Result<Vec<AxisResize>> {
        let rank = shape.len();
        if rank == 0 {
            bail!("Resize: input X must have rank >= 1");
        }
        let present = |i: usize| -> Result<Option<&Tensor>> {
            Ok(inputs.opt_tensor(i)?.filter(|t| t.numel() > 0))
        };
        let axes: Vec<usize> = match &self.axes {
            None => (0..rank).collect(),
            Some(axes) => axes
                .iter()
                .map(|&a| normalize_axis(a, rank))
                .collect::<Result<_>>()
                .map_err(|e| crate::OpError::Invalid(format!("Resize: attribute \"axes\": {e}")))?,
        };
        let scales: Option<Vec<f32>> = match (&self.scales_attribute, present(self.scales_input)?) {
            (Some(s), _) => Some(s.clone()),
            (None, Some(t)) => Some(f32_values(t, "Resize input scales")?.into_owned()),
            (None, None) => None,
        };
        let sizes = if self.roi_input.is_some() {
            present(3)?
        } else {
            None
        };
        let roi: Option<Vec<f32>> = match self.roi_input.map(present).transpose()?.flatten() {
            Some(t) => Some(f32_values(t, "Resize input roi")?.into_owned()),
            None => None,
        };
        let n = axes.len();
        let mut plan: Vec<AxisResize> = shape
            .iter()
            .map(|&len| AxisResize {
                in_len: len,
                out_len: len,
                out_extent: len as f32,
                scale: 1.0,
                roi: (0.0, 1.0),
            })
            .collect();
        if let Some(roi) = &roi
            && self.coordinates == Coordinates::TfCropAndResize
        {
            if roi.len() != 2 * n {
                bail!(
                    "Resize: input roi needs {} values (start and end per axis), got {}",
                    2 * n,
                    roi.len()
                );
            }
            for (k, &a) in axes.iter().enumerate() {
                plan[a].roi = (roi[k], roi[n + k]);
            }
        }
        match (scales, sizes) {
            (Some(_), Some(_)) => bail!("Resize: give scales or sizes, not both"),
            (None, None) => bail!("Resize: one of the inputs scales and sizes is required"),
            (Some(scales), None) => {
                if scales.len() != n {
                    bail!(
                        "Resize: input scales has {} values; expected {n}",
                        scales.len()
                    );
                }
                for (k, &a) in axes.iter().enumerate() {
                    let s = scales[k];
                    if !(s > 0.0 && s.is_finite()) {
                        bail!("Resize: scales must be positive and finite, got {s} for axis {a}");
                    }
                    let axis = &mut plan[a];
                    let extent = if self.coordinates == Coordinates::TfCropAndResize {
                        axis.in_len as f32 * (axis.roi.1 - axis.roi.0)
                    } else {
                        axis.in_len as f32
                    };
                    axis.scale = s;
                    axis.out_len = (extent * s).floor().max(0.0) as usize;
                    axis.out_extent = axis.in_len as f32 * s;
                }
            }
            (None, Some(sizes)) => {
                let sizes = sizes.to_i64_vec()?;
                if sizes.len() != n || sizes.iter().any(|&s| s < 0) {
                    bail!("Resize: input sizes must hold {n} non-negative values, got {sizes:?}");
                }
                let ratio = |k: usize| sizes[k] as f32 / shape[axes[k]] as f32;
                let common = match self.policy {
                    AspectPolicy::Stretch => None,
                    AspectPolicy::NotLarger => (0..n).map(ratio).reduce(f32::min),
                    AspectPolicy::NotSmaller => (0..n).map(ratio).reduce(f32::max),
                };
                for (k, &a) in axes.iter().enumerate() {
                    let axis = &mut plan[a];
                    match common {
                        None => {
                            axis.out_len = sizes[k] as usize;
                            axis.scale = ratio(k);
                        }
                        Some(scale) => {
                            axis.out_len = (scale * axis.in_len as f32 + 0.5).floor() as usize;
                            axis.scale = scale;
                        }
                    }
                    axis.out_extent = axis.out_len as f32;
                }
            }
        }
        if let Some(axis) = plan.iter().find(|a| a.in_len == 0 && a.out_len > 0) {
            bail!(
                "Resize: cannot resize an empty axis to {} elements",
                axis.out_len
            );
        }
        Ok(plan)
    }
}

impl Resize {
    /// The output shape and each axis' taps (offsets in elements of an input of `shape`).
    fn taps(&self, inputs: &Inputs, shape: &[usize]) -> Result<(Vec<usize>, Vec<AxisTaps>)> {
        let plan = self.axes_plan(inputs, shape)?;
        let out_shape: Vec<usize> = plan.iter().map(|a| a.out_len).collect();
        // Scales or sizes from the file: bounded before the taps and the output are allocated.
        check_tensor_size("Resize output", &out_shape, DType::F32)?;
        let strides = crate::broadcast::strides(shape);
        let taps: Vec<AxisTaps> = plan
            .iter()
            .zip(&strides)
            .map(|(axis, &stride)| {
                if axis.out_len == 0 {
                    Vec::new()
                } else {
                    self.axis_taps(axis, stride)
                }
            })
            .collect();
        Ok((out_shape, taps))
    }
}

impl Op for Resize {
    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Shaped)
    }

    /// The taps, from scales / sizes / roi on the host.
    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], inputs: &Inputs) -> Result<ShapedKernel> {
        let shape = input_shape(shapes, 0)?;
        let (out_shape, axes) = self.taps(inputs, shape)?;
        Ok(ShapedKernel::Resize(ResizeTaps {
            in_shape: shape.to_vec(),
            out_shape,
            axes,
            extrapolation: self.extrapolation,
        }))
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let values = f32_values(x, "Resize input X")?;
        let (out_shape, taps) = self.taps(inputs, x.shape())?;
        let strides = crate::broadcast::strides(x.shape());
        let total: usize = out_shape.iter().product();
        let mut out = vec![0.0f32; total];
        let rank = out_shape.len();
        if total > 0 && rank >= 2 && leading_axes_copied(&taps[..rank - 2], x.shape(), &strides) {
            let in_plane = x.shape()[rank - 2..].iter().product();
            let rows = (&taps[rank - 2], &taps[rank - 1]);
            self.resize_planes(rows, &values, in_plane, &mut out);
        } else if total > 0 {
            out.par_chunks_mut(out_shape[rank - 1])
                .enumerate()
                .for_each(|(row, dst)| {
                    // The taps of the outer axes for this row.
                    let mut outer: Vec<&[(usize, f32)]> = Vec::with_capacity(rank);
                    let mut rest = row;
                    let mut extrapolate = false;
                    for a in (0..rank.saturating_sub(1)).rev() {
                        match &taps[a][rest % out_shape[a]] {
                            Some(t) => outer.push(t),
                            None => extrapolate = true,
                        }
                        rest /= out_shape[a];
                    }
                    outer.reverse();
                    let (mut weights, mut terms, mut counters) =
                        (Vec::new(), Vec::new(), Vec::new());
                    for (i, slot) in dst.iter_mut().enumerate() {
                        let (Some(inner), false) = (&taps[rank - 1][i], extrapolate) else {
                            *slot = self.extrapolation;
                            continue;
                        };
                        weights.clear();
                        terms.clear();
                        let buffers = (&mut weights, &mut terms, &mut counters);
                        gather_taps(&outer, inner, &values, buffers);
                        *slot = match (&weights[..], &terms[..]) {
                            ([w], [v]) if *w == 1.0 => *v,
                            _ => canonical_dot(&weights, &terms),
                        };
                    }
                });
        }
        Ok(vec![store_f32(x.dtype(), out_shape, out)?.into()])
    }
}

/// Whether these axes keep their input length and every output coordinate has the single tap
/// of weight 1 at the same input coordinate (the axes are copied, not resized).
fn leading_axes_copied(taps: &[AxisTaps], shape: &[usize], strides: &[usize]) -> bool {
    taps.iter()
        .zip(shape)
        .zip(strides)
        .all(|((axis, &len), &stride)| {
            axis.len() == len
                && axis
                    .iter()
                    .enumerate()
                    .all(|(x, t)| t.as_deref() == Some(&[(x * stride, 1.0)][..]))
        })
}

impl Resize {
    /// The general path's result when only the last two axes are resized: each plane of
    /// `in_plane` input elements gives one `rows.len() x cols.len()` output plane. An output's
    /// taps are its row's taps times its column's taps (weights `row * column`, the leading
    /// axes' weights being 1), a single tap of weight 1 is a copy, and otherwise the
    /// `canonical-sum` dot product of at most 16 taps (one reduction tile: `p = fma(w, v, p)`
    /// from `+0.0`). When every tap is such a copy (nearest), columns gather through an index
    /// table and output rows with the source row of the previous one are copied.
    fn resize_planes(
        &self,
        (rows, cols): (&AxisTaps, &AxisTaps),
        values: &[f32],
        in_plane: usize,
        out: &mut [f32],
    ) {
        let copy_of = |t: &Option<Vec<(usize, f32)>>| match t.as_deref() {
            Some(&[(offset, 1.0)]) => Some(offset),
            _ => None,
        };
        let row_sources: Option<Vec<usize>> = rows.iter().map(copy_of).collect();
        let col_sources: Option<Vec<usize>> = cols.iter().map(copy_of).collect();
        let (out_h, out_w) = (rows.len(), cols.len());
        let planes = values
            .par_chunks(in_plane)
            .zip(out.par_chunks_mut(out_h * out_w));
        if let (Some(row_sources), Some(col_sources)) = (row_sources, col_sources) {
            planes.for_each(|(plane, dst)| {
                for (r, &source) in row_sources.iter().enumerate() {
                    let (done, line) = dst.split_at_mut(r * out_w);
                    let line = &mut line[..out_w];
                    if r > 0 && row_sources[r - 1] == source {
                        line.copy_from_slice(&done[(r - 1) * out_w..]);
                        continue;
                    }
                    let src = &plane[source..];
                    for (v, &c) in line.iter_mut().zip(&col_sources) {
                        *v = src[c];
                    }
                }
            });
            return;
        }
        planes.for_each(|(plane, dst)| {
            for (row, line) in rows.iter().zip(dst.chunks_exact_mut(out_w)) {
                for (v, col) in line.iter_mut().zip(cols) {
                    let (Some(row), Some(col)) = (row, col) else {
                        *v = self.extrapolation;
                        continue;
                    };
                    *v = match (&row[..], &col[..]) {
                        (&[(ro, rw)], &[(co, cw)]) if rw * cw == 1.0 => plane[ro + co],
                        _ => {
                            let mut p = 0.0f32;
                            for &(ro, rw) in row {
                                for &(co, cw) in col {
                                    p = (rw * cw).mul_add(plane[ro + co], p);
                                }
                            }
                            p
                        }
                    };
                }
            }
        });
    }
}

/// The weights and values of every tap of one output, row-major over the axes: the outer axes'
/// tap lists, then the innermost axis' list. A weight is the product of its axes' weights,
/// left to right. `counters` is scratch for the odometer over the outer axes.
fn gather_taps(
    outer: &[&[(usize, f32)]],
    inner: &[(usize, f32)],
    values: &[f32],
    (weights, terms, counters): (&mut Vec<f32>, &mut Vec<f32>, &mut Vec<usize>),
) {
    if outer.iter().any(|list| list.is_empty()) {
        return;
    }
    counters.clear();
    counters.resize(outer.len(), 0);
    loop {
        let mut offset = 0;
        let mut weight: Option<f32> = None;
        for (list, &c) in outer.iter().zip(counters.iter()) {
            let (o, w) = list[c];
            offset += o;
            weight = Some(weight.map_or(w, |acc| acc * w));
        }
        for &(o, w) in inner {
            weights.push(weight.map_or(w, |acc| acc * w));
            terms.push(values[offset + o]);
        }
        // Advance the outer odometer, last axis fastest.
        let mut a = outer.len();
        loop {
            if a == 0 {
                return;
            }
            a -= 1;
            counters[a] += 1;
            if counters[a] < outer[a].len() {
                break;
            }
            counters[a] = 0;
        }
    }
}
