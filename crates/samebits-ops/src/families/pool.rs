//! Pooling: MaxPool (with its optional Indices output), AveragePool, LpPool, the global
//! forms GlobalMaxPool, GlobalAveragePool, GlobalLpPool, and MaxUnpool (MaxPool's inverse
//! scatter: an exact element move).
//!
//! Max and average pooling run `pool_f32` / `global_pool_f32` of `samebits-kernels` (contract
//! section `pool`). MaxPool's Indices and LpPool walk the same windows here
//! ([`samebits_kernels::Taps`]): a window's taps in row-major kernel order, only taps inside the
//! input; LpPool's norm is written in contract section `pool` ([`lp_norm`]). f16 / bf16 compute
//! in f32 and round once at the store; MaxPool also takes u8 / i8, exact in f32.

use std::borrow::Cow;

use crate::device_kernel::input_shape;
use crate::layout::{Movable, MoveKernel, move_elements};
use crate::registry::Registry;
use crate::spatial::{SpatialAttrs, check_windows_fit};
use crate::staging::{f32_values, known_dtype, known_shape, store_recycled_f32, tensor_type};
use crate::{
    BuildContext, DeviceKernel, Inputs, InputsExt, NodeArgs, Op, Result, ShapedKernel, bail,
};
use rayon::prelude::*;
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{DType, RecycledF32, Tensor, Value, ValueType};
use samebits_kernels::{PoolGeometry, PoolKind, canonical_dot, global_pool_f32, pool_f32};

pub fn register(r: &mut Registry) {
    r.register("", "MaxUnpool", MaxUnpool::build);
    r.register("", "MaxPool", |ctx| pool(ctx, "MaxPool", WindowOp::Max));
    r.register("", "AveragePool", |ctx| {
        let include = NodeArgs::new(ctx.node).int_or("count_include_pad", 0)? != 0;
        pool(ctx, "AveragePool", WindowOp::Average(include))
    });
    r.register("", "LpPool", |ctx| {
        let p = lp_order("LpPool", ctx)?;
        pool(ctx, "LpPool", WindowOp::Lp(p))
    });
    r.register("", "GlobalMaxPool", |_| {
        Ok(Box::new(GlobalPool(WindowOp::Max)))
    });
    r.register("", "GlobalAveragePool", |_| {
        Ok(Box::new(GlobalPool(WindowOp::Average(false))))
    });
    r.register("", "GlobalLpPool", |ctx| {
        Ok(Box::new(GlobalPool(WindowOp::Lp(lp_order(
            "GlobalLpPool",
            ctx,
        )?))))
    });
}

/// What a window computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WindowOp {
    Max,
    /// `count_include_pad`.
    Average(bool),
    /// The p-norm of an integer order p >= 1.
    Lp(u32),
}

fn lp_order(op: &str, ctx: &BuildContext) -> Result<u32> {
    match NodeArgs::new(ctx.node).int_or("p", 2)? {
        p if (1..=i64::from(u32::MAX)).contains(&p) => Ok(p as u32),
        p => bail!("{op}: attribute \"p\" must be a positive integer, got {p}"),
    }
}

/// The p-norm of a window's taps (contract section `pool`): with `a = |x|`, the canonical dot
/// product of `a^(p-1)` (repeated multiplication, left to right; 1 for p = 1) with `a`, then
/// the p-th root: the sum itself, `sqrt`, `cbrt`, else `exp(log(s) / p)`, all correctly rounded.
fn lp_norm(p: u32, taps: &[f32], powers: &mut Vec<f32>, magnitudes: &mut Vec<f32>) -> f32 {
    magnitudes.clear();
    magnitudes.extend(taps.iter().map(|v| v.abs()));
    powers.clear();
    powers.extend(magnitudes.iter().map(|&a| (2..p).fold(a, |acc, _| acc * a)));
    if p == 1 {
        powers.fill(1.0);
    }
    let sum = canonical_dot(powers, magnitudes);
    match p {
        1 => sum,
        2 => sum.sqrt(),
        3 => samebits_math::cbrt(sum),
        _ => samebits_math::exp(samebits_math::log(sum) / p as f32),
    }
}

/// The input as f32: f32 / f16 / bf16, and u8 / i8 where `small_ints` (exact).
fn pool_input<'a>(x: &'a Tensor, op: &str, small_ints: bool) -> Result<Cow<'a, [f32]>> {
    match x.dtype() {
        DType::U8 | DType::I8 if small_ints => Ok(Cow::Owned(
            x.to_i64_vec()?.iter().map(|&v| v as f32).collect(),
        )),
        _ => f32_values(x, &format!("{op} input X")),
    }
}

/// f32 results stored as `dtype` (u8 / i8 values are input values, stored exactly).
fn pool_output(dtype: DType, shape: Vec<usize>, data: RecycledF32) -> Result<Tensor> {
    Ok(match dtype {
        DType::U8 => Tensor::from_vec(shape, data.iter().map(|&v| v as u8).collect())?,
        DType::I8 => Tensor::from_vec(shape, data.iter().map(|&v| v as i8).collect())?,
        _ => store_recycled_f32(dtype, shape, data)?,
    })
}

/// MaxPool, AveragePool or LpPool with its window attributes.
#[derive(Debug)]
struct Pool {
    spatial: SpatialAttrs,
    op: WindowOp,
    ceil_mode: bool,
    /// MaxPool's Indices: column-major positions within a plane instead of row-major.
    column_major_indices: bool,
    /// Whether the node asks for MaxPool's second output, Indices (computed only then).
    indices: bool,
}

fn pool(ctx: &BuildContext, name: &'static str, op: WindowOp) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    let spatial = SpatialAttrs::parse(name, &args)?;
    if spatial.kernel_shape.is_none() {
        bail!("{name}: missing attribute \"kernel_shape\"");
    }
    Ok(Box::new(Pool {
        spatial,
        op,
        ceil_mode: args.int_or("ceil_mode", 0)? != 0,
        column_major_indices: args.int_or("storage_order", 0)? != 0,
        indices: ctx.node.outputs.get(1).is_some_and(|o| !o.is_empty()),
    }))
}

impl Pool {
    fn geometry(&self, x: &[usize]) -> Result<PoolGeometry> {
        let op = self.spatial.op;
        if !(3..=5).contains(&x.len()) {
            bail!("{op}: input X must have rank 3 to 5 ([N, C, 1 to 3 spatial axes]), got {x:?}");
        }
        let in_spatial = x[2..].to_vec();
        let dims = in_spatial.len();
        let kernel = self.spatial.kernel(None)?;
        if kernel.len() != dims {
            bail!(
                "{op}: attribute \"kernel_shape\" {kernel:?} needs {dims} values for input {x:?}"
            );
        }
        let strides = self.spatial.strides(dims)?;
        let dilations = self.spatial.dilations(dims)?;
        let pads = self
            .spatial
            .window_pads(&in_spatial, &kernel, &strides, &dilations)?;
        check_windows_fit(op, &in_spatial, &kernel, &dilations, &pads)?;
        let geometry = PoolGeometry {
            batch: x[0],
            channels: x[1],
            in_spatial,
            kernel,
            strides,
            dilations,
            pads_begin: pads.0,
            pads_end: pads.1,
            ceil_mode: self.ceil_mode,
        };
        check_tensor_size(
            &format!("{op} output"),
            &Pool::output_shape(&geometry),
            DType::F32,
        )?;
        Ok(geometry)
    }

    fn output_shape(geometry: &PoolGeometry) -> Vec<usize> {
        [geometry.batch, geometry.channels]
            .into_iter()
            .chain(geometry.out_spatial())
            .collect()
    }
}

/// Row-major position of `[d, h, w]` in a plane of widened size `input`.
fn row_major(input: [usize; 3], [d, h, w]: [usize; 3]) -> usize {
    (d * input[1] + h) * input[2] + w
}

/// Column-major position in the plane: the first spatial axis varies fastest (the widened
/// leading axes have size 1, so this holds for every rank).
fn column_major(input: [usize; 3], [d, h, w]: [usize; 3]) -> usize {
    let [id, ih, _] = input;
    d + id * (h + ih * w)
}

impl Pool {
    /// MaxPool's Indices: for each output, the flat input index of the first tap in its window
    /// holding the maximum `max` (by bits; the first NaN when the maximum is NaN).
    fn max_indices(&self, geometry: &PoolGeometry, x: &[f32], maxima: &[f32]) -> Vec<i64> {
        let taps = geometry.taps();
        let (in_len, out_len) = (taps.input_len(), taps.output_len());
        maxima
            .par_iter()
            .enumerate()
            .map(|(e, &max)| {
                let (plane, o) = (e / out_len, e % out_len);
                let values = &x[plane * in_len..(plane + 1) * in_len];
                let mut found = None;
                taps.for_each_tap(o, |pos| {
                    let v = values[row_major(taps.input, pos)];
                    if found.is_none()
                        && (v.to_bits() == max.to_bits() || (v.is_nan() && max.is_nan()))
                    {
                        found = Some(pos);
                    }
                });
                let pos = found.unwrap_or([0; 3]);
                let within = if self.column_major_indices {
                    column_major(taps.input, pos)
                } else {
                    row_major(taps.input, pos)
                };
                (plane * in_len + within) as i64
            })
            .collect()
    }

    /// LpPool: the norm of each window's taps inside the input.
    fn lp_pool(&self, p: u32, geometry: &PoolGeometry, x: &[f32], out: &mut [f32]) {
        let taps = geometry.taps();
        let (in_len, out_len) = (taps.input_len(), taps.output_len());
        // Planes by index, as the other pools take them: a window-free or empty input plane
        // (length 0) has no chunks to zip with.
        if out.is_empty() {
            return;
        }
        out.par_chunks_mut(out_len)
            .enumerate()
            .for_each(|(n, out_plane)| {
                let plane = &x[n * in_len..(n + 1) * in_len];
                let (mut values, mut powers, mut magnitudes) = (Vec::new(), Vec::new(), Vec::new());
                for (o, slot) in out_plane.iter_mut().enumerate() {
                    values.clear();
                    taps.for_each_tap(o, |pos| values.push(plane[row_major(taps.input, pos)]));
                    *slot = lp_norm(p, &values, &mut powers, &mut magnitudes);
                }
            });
    }
}

impl Op for Pool {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let (Some(dtype), Some(x)) = (known_dtype(inputs, 0), known_shape(inputs, 0)) else {
            return Ok(Vec::new());
        };
        let shape = Self::output_shape(&self.geometry(&x)?);
        Ok(vec![
            Some(tensor_type(dtype, &shape)),
            Some(tensor_type(DType::I64, &shape)),
        ])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let geometry = self.geometry(x.shape())?;
        let values = pool_input(x, self.spatial.op, self.op == WindowOp::Max)?;
        let shape = Self::output_shape(&geometry);
        // Every pooling kernel writes every output element.
        let mut out = RecycledF32::take(shape.iter().product());
        if !out.is_empty() {
            match self.op {
                WindowOp::Max => pool_f32(&geometry, PoolKind::Max, &values, &mut out),
                WindowOp::Average(count_include_pad) => pool_f32(
                    &geometry,
                    PoolKind::Average { count_include_pad },
                    &values,
                    &mut out,
                ),
                WindowOp::Lp(p) => self.lp_pool(p, &geometry, &values, &mut out),
            }
        }
        let mut results = Vec::new();
        if self.op == WindowOp::Max && self.indices {
            let indices = self.max_indices(&geometry, &values, &out);
            results.push(Tensor::from_vec(shape.clone(), indices)?);
        }
        results.insert(0, pool_output(x.dtype(), shape, out)?);
        Ok(results.into_iter().map(Value::from).collect())
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        self.kind().map(|_| DeviceKernel::Shaped)
    }

    /// MaxPool's Y (not its Indices) and AveragePool.
    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], _inputs: &Inputs) -> Result<ShapedKernel> {
        let geometry = self.geometry(input_shape(shapes, 0)?)?;
        match self.kind() {
            Some(kind) => Ok(ShapedKernel::Pool(geometry, kind)),
            None => bail!("{}: no device kernel", self.spatial.op),
        }
    }
}

impl Pool {
    /// The `pool_f32` kind of this op (LpPool has none).
    fn kind(&self) -> Option<PoolKind> {
        match self.op {
            WindowOp::Max => Some(PoolKind::Max),
            WindowOp::Average(count_include_pad) => Some(PoolKind::Average { count_include_pad }),
            WindowOp::Lp(_) => None,
        }
    }
}

/// GlobalMaxPool, GlobalAveragePool, GlobalLpPool: one window over each whole plane.
#[derive(Debug)]
struct GlobalPool(WindowOp);

impl GlobalPool {
    fn output_shape(x: &[usize]) -> Result<Vec<usize>> {
        if x.len() < 2 {
            bail!("global pooling: input X must have rank >= 2 ([N, C, ...]), got {x:?}");
        }
        Ok(x.iter()
            .enumerate()
            .map(|(i, &d)| if i < 2 { d } else { 1 })
            .collect())
    }
}

impl Op for GlobalPool {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let (Some(dtype), Some(x)) = (known_dtype(inputs, 0), known_shape(inputs, 0)) else {
            return Ok(Vec::new());
        };
        Ok(vec![Some(tensor_type(dtype, &Self::output_shape(&x)?))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let shape = Self::output_shape(x.shape())?;
        let values = pool_input(x, "global pooling", self.0 == WindowOp::Max)?;
        let planes = shape[0] * shape[1];
        let len = x.shape()[2..].iter().product::<usize>();
        // Every arm writes every element.
        let mut out = RecycledF32::take(planes);
        match self.0 {
            WindowOp::Max => global_pool_f32(PoolKind::Max, &values, planes, len, &mut out),
            WindowOp::Average(_) => global_pool_f32(
                PoolKind::Average {
                    count_include_pad: false,
                },
                &values,
                planes,
                len,
                &mut out,
            ),
            WindowOp::Lp(p) if len > 0 => {
                let (mut powers, mut magnitudes) = (Vec::new(), Vec::new());
                for (slot, plane) in out.iter_mut().zip(values.chunks_exact(len)) {
                    *slot = lp_norm(p, plane, &mut powers, &mut magnitudes);
                }
            }
            // The norm of no elements.
            WindowOp::Lp(_) => out.fill(0.0),
        }
        Ok(vec![pool_output(x.dtype(), shape, out)?.into()])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        (!matches!(self.0, WindowOp::Lp(_))).then_some(DeviceKernel::Shaped)
    }

    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], _inputs: &Inputs) -> Result<ShapedKernel> {
        let x = input_shape(shapes, 0)?;
        let shape = Self::output_shape(x)?;
        let kind = match self.0 {
            WindowOp::Max => PoolKind::Max,
            WindowOp::Average(_) => PoolKind::Average {
                count_include_pad: false,
            },
            WindowOp::Lp(_) => bail!("GlobalLpPool: no device kernel"),
        };
        Ok(ShapedKernel::GlobalPool {
            kind,
            planes: shape[0] * shape[1],
            len: x[2..].iter().product(),
            shape,
        })
    }
}

/// MaxUnpool: a zero tensor of the unpooled shape (per spatial axis
/// `(in - 1) * stride - pad_begin - pad_end + kernel`) with `X[k]` written at the flat index
/// `indices[k]`, in the order of `k` (a repeated index keeps the last element); with
/// `output_shape` (input 2), that tensor is then zero-padded at the end of each axis to it (as
/// ONNX's reference and test data do).
#[derive(Debug)]
struct MaxUnpool {
    kernel: Vec<i64>,
    strides: Vec<i64>,
    pads: Vec<i64>,
}

impl MaxUnpool {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        let kernel = args
            .ints("kernel_shape")?
            .ok_or_else(|| crate::OpError::Invalid("missing attribute \"kernel_shape\"".into()))?;
        let strides = args.ints_or("strides", vec![1; kernel.len()])?;
        let pads = args.ints_or("pads", vec![0; 2 * kernel.len()])?;
        if strides.len() != kernel.len() || pads.len() != 2 * kernel.len() {
            bail!("strides {strides:?} and pads {pads:?} do not fit kernel_shape {kernel:?}");
        }
        Ok(Box::new(MaxUnpool {
            kernel,
            strides,
            pads,
        }))
    }

    /// The output shape without `output_shape`.
    fn inferred_shape(&self, x: &[usize]) -> Result<Vec<usize>> {
        let spatial = self.kernel.len();
        if x.len() != spatial + 2 {
            bail!("input 0 (X) has shape {x:?}; kernel_shape names {spatial} spatial axes");
        }
        let mut shape = x[..2].to_vec();
        for d in 0..spatial {
            let len =
                (x[d + 2] as i64 - 1) * self.strides[d] - self.pads[d] - self.pads[d + spatial]
                    + self.kernel[d];
            if len < 0 {
                bail!("spatial axis {d} of the output would have negative length {len}");
            }
            shape.push(len as usize);
        }
        Ok(shape)
    }
}

/// Scatters the elements of input 0 to `targets` in a zero tensor of the unpooled shape, then
/// places it at the start of a zero tensor of `padded` shape.
struct UnpoolKernel {
    targets: Vec<usize>,
    unpooled: Vec<usize>,
    padded: Vec<usize>,
}

impl MoveKernel for UnpoolKernel {
    fn run<E: Movable>(&self, inputs: &[&[E]]) -> Result<Vec<E>> {
        let out_strides = crate::broadcast::strides(&self.padded);
        let in_strides = crate::broadcast::strides(&self.unpooled);
        let mut out = vec![E::default(); self.padded.iter().product()];
        for (v, &t) in inputs[0].iter().zip(&self.targets) {
            let at: usize = in_strides
                .iter()
                .zip(&out_strides)
                .zip(&self.unpooled)
                .map(|((&is, &os), &n)| (t / is) % n * os)
                .sum();
            out[at] = v.clone();
        }
        Ok(out)
    }
}

impl Op for MaxUnpool {
    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let indices = inputs.ints(1, "I")?;
        if indices.len() != x.numel() {
            bail!(
                "input 1 (I) holds {} indices for the {} elements of X",
                indices.len(),
                x.numel()
            );
        }
        let unpooled = self.inferred_shape(x.shape())?;
        let padded = match inputs.opt_ints(2, "output_shape")? {
            Some(s) => {
                let fits = s.len() == unpooled.len()
                    && s.iter().zip(&unpooled).all(|(&d, &u)| d >= u as i64);
                if !fits {
                    bail!(
                        "output_shape {s:?} must have rank {} and hold the unpooled shape {unpooled:?}",
                        unpooled.len()
                    );
                }
                s.iter().map(|&d| d as usize).collect()
            }
            None => unpooled.clone(),
        };
        let len: usize = unpooled.iter().product();
        let targets = indices
            .iter()
            .map(|&i| match usize::try_from(i) {
                Ok(t) if t < len => Ok(t),
                _ => Err(crate::OpError::Invalid(format!(
                    "index {i} is outside the {len} elements of the unpooled shape {unpooled:?}"
                ))),
            })
            .collect::<Result<Vec<_>>>()?;
        let kernel = UnpoolKernel {
            targets,
            unpooled,
            padded: padded.clone(),
        };
        let y = move_elements(&[x], padded, &kernel)?;
        Ok(vec![y.into()])
    }
}
