//! Convolutions: Conv, ConvTranspose and ConvInteger, 1 to 3 spatial axes.
//!
//! The ops resolve ONNX's attributes (auto_pad, pads, strides, dilations, group, output_shape,
//! output_padding) into the kernels' geometries, check every shape first (the kernels panic on
//! inconsistent geometry by design), and run `conv_f32` / `conv_transpose_f32` of
//! `samebits-kernels` (contract sections `conv` and `conv-transpose`). f16 / bf16 tensors are
//! computed in f32 and rounded once at the store. ConvInteger runs the f32 kernel on the
//! zero-point-shifted integers when every partial sum is exact in f32, and is refused otherwise.
//!
//! `samebits::ConvChain` (emitted by the fusion pass, samebits-passes `fusion.rs`) is a Conv or
//! ConvTranspose followed by an elementwise chain (`fused.rs`) that alone reads its output: the
//! kernel applies the chain to each block of finished outputs through an `OutputMap` (contract
//! section `elementwise-fusion`), or, where the chain's fast path does not apply, the two run
//! one after the other. The same bits either way.

use super::fused::{CONV_CHAIN, ChainInput, ElementwiseChain};
use crate::device_kernel::input_shape;
use crate::registry::Registry;
use crate::spatial::{AutoPad, SpatialAttrs, check_windows_fit};
use crate::staging::{f32_values, known_dtype, known_shape, store_recycled_f32, tensor_type};
use crate::{
    BuildContext, DeviceKernel, Inputs, InputsExt, NodeArgs, Op, Result, ShapedKernel, bail,
    unsupported,
};
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{DType, Graph, RecycledF32, Tensor, Value, ValueType};
use samebits_kernels::{
    ConvGeometry, ConvTransposeGeometry, OutputMap, PackedConvWeights, conv_f32, conv_f32_mapped,
    conv_transpose_f32_mapped,
};
use std::sync::OnceLock;

pub fn register(r: &mut Registry) {
    r.register("", "Conv", |ctx| Ok(Box::new(Conv::parse("Conv", ctx)?)));
    r.register("", "ConvInteger", |ctx| {
        Ok(Box::new(ConvInteger(Conv::parse("ConvInteger", ctx)?)))
    });
    r.register("", "ConvTranspose", |ctx| {
        Ok(Box::new(ConvTranspose::parse(ctx)?))
    });
    r.register(super::fused::DOMAIN, CONV_CHAIN, |ctx| {
        Ok(Box::new(ConvChain::build(ctx)?))
    });
}

/// Batch, channels and spatial sizes of an `[N, C, spatial...]` tensor with 1 to 3 spatial
/// axes; `what` names it in errors.
fn split_nc(op: &str, what: &str, shape: &[usize]) -> Result<(usize, usize, Vec<usize>)> {
    if !(3..=5).contains(&shape.len()) {
        bail!(
            "{op}: {what} must have rank 3 to 5 ([N, C, 1 to 3 spatial axes]), got shape {shape:?}"
        );
    }
    Ok((shape[0], shape[1], shape[2..].to_vec()))
}

/// Conv's attributes, and its weight packed at the first run when it is a constant.
#[derive(Debug)]
struct Conv {
    spatial: SpatialAttrs,
    groups: usize,
    /// `Some` when the weight is a constant of the plan: its packing, made once.
    packed: Option<OnceLock<PackedConvWeights>>,
}

impl Conv {
    fn parse(op: &'static str, ctx: &BuildContext) -> Result<Conv> {
        let args = NodeArgs::new(ctx.node);
        let groups = args.int_or("group", 1)?;
        if groups < 1 {
            bail!("{op}: attribute \"group\" must be >= 1, got {groups}");
        }
        let constant_weight = ctx.constant_inputs.get(1).copied().unwrap_or(false);
        Ok(Conv {
            spatial: SpatialAttrs::parse(op, &args)?,
            groups: groups as usize,
            packed: constant_weight.then(OnceLock::new),
        })
    }

    /// The kernel geometry of input `x` and weight `w` shapes, every constraint checked.
    fn geometry(&self, x: &[usize], w: &[usize]) -> Result<ConvGeometry> {
        let op = self.spatial.op;
        let (batch, in_channels, in_spatial) = split_nc(op, "input X", x)?;
        if w.len() != x.len() {
            bail!("{op}: weight W of shape {w:?} must have the rank of X {x:?}");
        }
        let (out_channels, per_group) = (w[0], w[1]);
        let g = self.groups;
        if per_group * g != in_channels || !out_channels.is_multiple_of(g) {
            bail!(
                "{op}: with group = {g}, W {w:?} needs [M, C/group, k...] with C = {in_channels} \
                 and M divisible by {g}"
            );
        }
        if w[2..].contains(&0) {
            bail!("{op}: weight W of shape {w:?} has an empty kernel");
        }
        let dims = in_spatial.len();
        let kernel = self.spatial.kernel(Some(&w[2..]))?;
        let strides = self.spatial.strides(dims)?;
        let dilations = self.spatial.dilations(dims)?;
        let pads = self
            .spatial
            .window_pads(&in_spatial, &kernel, &strides, &dilations)?;
        check_windows_fit(op, &in_spatial, &kernel, &dilations, &pads)?;
        let geometry = ConvGeometry {
            batch,
            in_channels,
            out_channels,
            groups: g,
            in_spatial,
            kernel,
            strides,
            dilations,
            pads_begin: pads.0,
            pads_end: pads.1,
        };
        check_tensor_size(
            &format!("{op} output"),
            &Conv::output_shape(&geometry),
            DType::F32,
        )?;
        Ok(geometry)
    }

    fn output_shape(geometry: &ConvGeometry) -> Vec<usize> {
        [geometry.batch, geometry.out_channels]
            .into_iter()
            .chain(geometry.out_spatial())
            .collect()
    }

    fn infer_with(
        &self,
        inputs: &[Option<ValueType>],
        dtype: DType,
    ) -> Result<Vec<Option<ValueType>>> {
        let (Some(x), Some(w)) = (known_shape(inputs, 0), known_shape(inputs, 1)) else {
            return Ok(Vec::new());
        };
        let geometry = self.geometry(&x, &w)?;
        Ok(vec![Some(tensor_type(
            dtype,
            &Self::output_shape(&geometry),
        ))])
    }
}

/// Errors unless an optional bias has shape `[channels]`.
fn check_bias(op: &str, bias: Option<&[usize]>, channels: usize) -> Result<()> {
    match bias {
        Some(b) if b != [channels] => {
            bail!("{op}: bias B must have shape [{channels}], got {b:?}")
        }
        _ => Ok(()),
    }
}

impl Op for Conv {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        match known_dtype(inputs, 0) {
            Some(dtype) => self.infer_with(inputs, dtype),
            None => Ok(Vec::new()),
        }
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        Ok(vec![self.compute(inputs, None)?.into()])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Shaped)
    }

    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], _inputs: &Inputs) -> Result<ShapedKernel> {
        let geometry = self.geometry(input_shape(shapes, 0)?, input_shape(shapes, 1)?)?;
        let bias = shapes.get(2).copied().flatten();
        check_bias("Conv", bias, geometry.out_channels)?;
        Ok(ShapedKernel::Conv(geometry))
    }
}

impl Conv {
    /// The output shape for these inputs.
    fn out_shape(&self, inputs: &Inputs) -> Result<Vec<usize>> {
        let (x, w) = (inputs.tensor(0)?, inputs.tensor(1)?);
        Ok(Conv::output_shape(&self.geometry(x.shape(), w.shape())?))
    }

    /// The convolution, with `map` applied to its finished f32 outputs.
    fn compute(&self, inputs: &Inputs, map: Option<&dyn OutputMap>) -> Result<Tensor> {
        let (x, w, b) = (inputs.tensor(0)?, inputs.tensor(1)?, inputs.opt_tensor(2)?);
        let geometry = self.geometry(x.shape(), w.shape())?;
        check_bias("Conv", b.map(Tensor::shape), geometry.out_channels)?;
        if let Some(t) = [Some(w), b]
            .into_iter()
            .flatten()
            .find(|t| t.dtype() != x.dtype())
        {
            bail!(
                "Conv: inputs have different dtypes ({} and {})",
                x.dtype(),
                t.dtype()
            );
        }
        let input = f32_values(x, "Conv input X")?;
        let weight = f32_values(w, "Conv weight W")?;
        let bias = b.map(|b| f32_values(b, "Conv bias B")).transpose()?;
        let shape = Conv::output_shape(&geometry);
        // The kernel writes every output element.
        let mut out = RecycledF32::take(shape.iter().product());
        if !out.is_empty() {
            // A constant weight is packed once (copies only, the same bits as packing per call).
            let packed = self
                .packed
                .as_ref()
                .map(|p| p.get_or_init(|| PackedConvWeights::new(&geometry, &weight)));
            conv_f32_mapped(
                &geometry,
                &input,
                &weight,
                packed,
                bias.as_deref(),
                map,
                &mut out,
            );
        }
        store_recycled_f32(x.dtype(), shape, out)
    }
}

/// ONNX ConvInteger: Conv on u8 / i8 tensors minus their zero points, i32 results.
#[derive(Debug)]
struct ConvInteger(Conv);

/// ConvInteger with the attributes of `ctx`'s node (`op` names it in errors): the exact
/// integer convolution QLinearConv requantizes (inputs X, W, x_zero_point, w_zero_point).
pub(super) fn integer_conv(op: &'static str, ctx: &BuildContext) -> Result<Box<dyn Op>> {
    Ok(Box::new(ConvInteger(Conv::parse(op, ctx)?)))
}

/// Largest magnitude of a partial sum the f32 kernel computes exactly.
const F32_EXACT_INTEGER: f64 = (1u64 << 24) as f64;

/// An 8-bit integer tensor minus its zero point (per tensor, or per output channel for the
/// weight: `channel_len` elements per channel), as exact f32 values.
fn shifted_f32(
    t: &Tensor,
    zero_point: Option<&Tensor>,
    what: &str,
    channel_len: usize,
) -> Result<Vec<f32>> {
    if !matches!(t.dtype(), DType::U8 | DType::I8) {
        unsupported!("ConvInteger {what} of dtype {} (u8 and i8)", t.dtype());
    }
    let values = t.to_i64_vec()?;
    let zero = match zero_point {
        None => vec![0],
        Some(z) if z.dtype() != t.dtype() => {
            bail!(
                "ConvInteger: zero point of {what} has dtype {}, {what} {}",
                z.dtype(),
                t.dtype()
            )
        }
        Some(z) => z.to_i64_vec()?,
    };
    let channels = values.len() / channel_len.max(1);
    if zero.len() != 1 && zero.len() != channels {
        bail!(
            "ConvInteger: zero point of {what} has {} elements; expected 1 or {channels}",
            zero.len()
        );
    }
    Ok(values
        .iter()
        .enumerate()
        .map(|(e, &v)| (v - zero[if zero.len() == 1 { 0 } else { e / channel_len }]) as f32)
        .collect())
}

impl Op for ConvInteger {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        self.0.infer_with(inputs, DType::I32)
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (x, w) = (inputs.tensor(0)?, inputs.tensor(1)?);
        let geometry = self.0.geometry(x.shape(), w.shape())?;
        let reduction = w.numel() / geometry.out_channels.max(1);
        // Every term is at most 255 * 255 in magnitude.
        if reduction as f64 * 255.0 * 255.0 >= F32_EXACT_INTEGER {
            unsupported!("ConvInteger with {reduction} terms per output (exact up to 258)");
        }
        let input = shifted_f32(x, inputs.opt_tensor(2)?, "X", x.numel())?;
        let weight = shifted_f32(w, inputs.opt_tensor(3)?, "W", reduction)?;
        let shape = Conv::output_shape(&geometry);
        let mut out = vec![0.0f32; shape.iter().product()];
        if !out.is_empty() {
            conv_f32(&geometry, &input, &weight, None, &mut out);
        }
        let out: Vec<i32> = out.iter().map(|&v| v as i32).collect();
        Ok(vec![Tensor::from_vec(shape, out)?.into()])
    }
}

/// ConvTranspose's attributes.
#[derive(Debug)]
struct ConvTranspose {
    spatial: SpatialAttrs,
    groups: usize,
    output_padding: Option<Vec<usize>>,
    output_shape: Option<Vec<usize>>,
}

impl ConvTranspose {
    fn parse(ctx: &BuildContext) -> Result<ConvTranspose> {
        let args = NodeArgs::new(ctx.node);
        let Conv {
            spatial, groups, ..
        } = Conv::parse("ConvTranspose", ctx)?;
        let non_negative = |name: &str| -> Result<Option<Vec<usize>>> {
            match args.ints(name)? {
                Some(v) if v.iter().any(|&x| x < 0) => {
                    bail!("ConvTranspose: attribute \"{name}\" must be non-negative, got {v:?}")
                }
                v => Ok(v.map(|v| v.iter().map(|&x| x as usize).collect())),
            }
        };
        Ok(ConvTranspose {
            spatial,
            groups,
            output_padding: non_negative("output_padding")?,
            output_shape: non_negative("output_shape")?,
        })
    }

    /// The kernel geometry: pads from `output_shape` (or, for `SAME_*`, from the target size
    /// `in * stride`) as the ONNX spec writes them, else from `pads`. A target larger than the
    /// unpadded output grows `output_padding` instead (extra positions at the end).
    fn geometry(&self, x: &[usize], w: &[usize]) -> Result<ConvTransposeGeometry> {
        let op = "ConvTranspose";
        let (batch, in_channels, in_spatial) = split_nc(op, "input X", x)?;
        if w.len() != x.len() || w[0] != in_channels || !in_channels.is_multiple_of(self.groups) {
            bail!(
                "{op}: weight W of shape {w:?} must be [C, M/group, k...] with C = {in_channels} \
                 divisible by group = {}",
                self.groups
            );
        }
        if w[2..].contains(&0) || in_spatial.contains(&0) {
            bail!("{op}: empty kernel or input (X {x:?}, W {w:?})");
        }
        let dims = in_spatial.len();
        let kernel = self.spatial.kernel(Some(&w[2..]))?;
        let strides = self.spatial.strides(dims)?;
        let dilations = self.spatial.dilations(dims)?;
        let mut output_padding = match &self.output_padding {
            None => vec![0; dims],
            Some(p) if p.len() == dims => p.clone(),
            Some(p) => bail!("{op}: attribute \"output_padding\" needs {dims} values, got {p:?}"),
        };
        let unpadded: Vec<usize> = (0..dims)
            .map(|d| {
                (in_spatial[d] - 1) * strides[d]
                    + dilations[d] * (kernel[d] - 1)
                    + 1
                    + output_padding[d]
            })
            .collect();
        let target = match (&self.output_shape, self.spatial.auto_pad) {
            (Some(s), _) if s.len() == dims => Some(s.clone()),
            (Some(s), _) if s.len() == dims + 2 => Some(s[2..].to_vec()),
            (Some(s), _) => {
                bail!("{op}: attribute \"output_shape\" needs {dims} values, got {s:?}")
            }
            (None, AutoPad::SameUpper | AutoPad::SameLower) => {
                Some((0..dims).map(|d| in_spatial[d] * strides[d]).collect())
            }
            (None, _) => None,
        };
        let (pads_begin, pads_end) = match target {
            None if self.spatial.auto_pad == AutoPad::Valid => (vec![0; dims], vec![0; dims]),
            None => {
                let pads = self.spatial.explicit_pads(dims)?;
                if let Some(d) = (0..dims).find(|&d| pads.0[d] + pads.1[d] >= unpadded[d]) {
                    bail!(
                        "{op}: pads {:?} remove the whole output on spatial axis {d}",
                        (&pads.0, &pads.1)
                    );
                }
                pads
            }
            Some(target) => {
                let (mut begin, mut end) = (vec![0; dims], vec![0; dims]);
                for d in 0..dims {
                    if target[d] == 0 {
                        bail!("{op}: output_shape {target:?} has an empty axis");
                    }
                    if target[d] > unpadded[d] {
                        output_padding[d] += target[d] - unpadded[d];
                        continue;
                    }
                    let total = unpadded[d] - target[d];
                    let small = total / 2;
                    (begin[d], end[d]) = if self.spatial.auto_pad == AutoPad::SameUpper {
                        (small, total - small)
                    } else {
                        (total - small, small)
                    };
                }
                (begin, end)
            }
        };
        let geometry = ConvTransposeGeometry {
            batch,
            in_channels,
            out_channels: w[1] * self.groups,
            groups: self.groups,
            in_spatial,
            kernel,
            strides,
            dilations,
            pads_begin,
            pads_end,
            output_padding,
        };
        check_tensor_size(
            &format!("{op} output"),
            &Self::output_shape(&geometry),
            DType::F32,
        )?;
        Ok(geometry)
    }

    fn output_shape(geometry: &ConvTransposeGeometry) -> Vec<usize> {
        [geometry.batch, geometry.out_channels]
            .into_iter()
            .chain(geometry.out_spatial())
            .collect()
    }
}

impl Op for ConvTranspose {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let (Some(dtype), Some(x), Some(w)) = (
            known_dtype(inputs, 0),
            known_shape(inputs, 0),
            known_shape(inputs, 1),
        ) else {
            return Ok(Vec::new());
        };
        let geometry = self.geometry(&x, &w)?;
        Ok(vec![Some(tensor_type(
            dtype,
            &Self::output_shape(&geometry),
        ))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        Ok(vec![self.compute(inputs, None)?.into()])
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Shaped)
    }

    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], _inputs: &Inputs) -> Result<ShapedKernel> {
        let geometry = self.geometry(input_shape(shapes, 0)?, input_shape(shapes, 1)?)?;
        let bias = shapes.get(2).copied().flatten();
        check_bias("ConvTranspose", bias, geometry.out_channels)?;
        Ok(ShapedKernel::ConvTranspose(geometry))
    }
}

impl ConvTranspose {
    /// The output shape for these inputs.
    fn out_shape(&self, inputs: &Inputs) -> Result<Vec<usize>> {
        let (x, w) = (inputs.tensor(0)?, inputs.tensor(1)?);
        Ok(Self::output_shape(&self.geometry(x.shape(), w.shape())?))
    }

    /// The transposed convolution, with `map` applied to its finished f32 outputs.
    fn compute(&self, inputs: &Inputs, map: Option<&dyn OutputMap>) -> Result<Tensor> {
        let (x, w, b) = (inputs.tensor(0)?, inputs.tensor(1)?, inputs.opt_tensor(2)?);
        let geometry = self.geometry(x.shape(), w.shape())?;
        check_bias("ConvTranspose", b.map(Tensor::shape), geometry.out_channels)?;
        if let Some(t) = [Some(w), b]
            .into_iter()
            .flatten()
            .find(|t| t.dtype() != x.dtype())
        {
            bail!(
                "ConvTranspose: inputs have different dtypes ({} and {})",
                x.dtype(),
                t.dtype()
            );
        }
        let input = f32_values(x, "ConvTranspose input X")?;
        let weight = f32_values(w, "ConvTranspose weight W")?;
        let bias = b
            .map(|b| f32_values(b, "ConvTranspose bias B"))
            .transpose()?;
        let shape = Self::output_shape(&geometry);
        // The kernel writes every output element.
        let mut out = RecycledF32::take(shape.iter().product());
        if !out.is_empty() {
            conv_transpose_f32_mapped(&geometry, &input, &weight, bias.as_deref(), map, &mut out);
        }
        store_recycled_f32(x.dtype(), shape, out)
    }
}

/// The convolution a [`ConvChain`] starts with.
#[derive(Debug)]
enum Head {
    Conv(Conv),
    Transpose(ConvTranspose),
}

impl Head {
    fn out_shape(&self, inputs: &Inputs) -> Result<Vec<usize>> {
        match self {
            Head::Conv(c) => c.out_shape(inputs),
            Head::Transpose(c) => c.out_shape(inputs),
        }
    }

    fn compute(&self, inputs: &Inputs, map: Option<&dyn OutputMap>) -> Result<Tensor> {
        match self {
            Head::Conv(c) => c.compute(inputs, map),
            Head::Transpose(c) => c.compute(inputs, map),
        }
    }
}

/// `samebits::ConvChain`: attribute `conv` is a graph of one Conv or ConvTranspose node, `body`
/// the elementwise chain (`fused.rs`) with the convolution's output among its inputs. The
/// node's inputs are the convolution's, then the chain's other inputs in body order.
#[derive(Debug)]
struct ConvChain {
    head: Head,
    /// Inputs of the convolution node (X, W and B when given).
    head_inputs: usize,
    chain: ElementwiseChain,
    /// The body input that is the convolution's output.
    mapped: usize,
}

impl ConvChain {
    fn build(ctx: &BuildContext) -> Result<ConvChain> {
        let args = NodeArgs::new(ctx.node);
        let conv: &Graph = args.graph("conv")?;
        let body: &Graph = args.graph("body")?;
        let [node] = conv.nodes.as_slice() else {
            bail!("{CONV_CHAIN}: attribute \"conv\" must hold one node");
        };
        let inner = BuildContext { node, ..*ctx };
        let head = match (node.domain.as_str(), node.op_type.as_str()) {
            ("", "Conv") => Head::Conv(Conv::parse("Conv", &inner)?),
            ("", "ConvTranspose") => Head::Transpose(ConvTranspose::parse(&inner)?),
            _ => bail!(
                "{CONV_CHAIN}: {} is no Conv or ConvTranspose",
                node.describe()
            ),
        };
        let Some(mapped) = body.inputs.iter().position(|v| v.name == node.outputs[0]) else {
            bail!("{CONV_CHAIN}: the chain does not read the convolution's output");
        };
        if ctx.node.inputs.len() + 1 != node.inputs.len() + body.inputs.len() {
            bail!(
                "{CONV_CHAIN}: {} inputs, expected the convolution's {} and the chain's {} \
                 others",
                ctx.node.inputs.len(),
                node.inputs.len(),
                body.inputs.len() - 1
            );
        }
        Ok(ConvChain {
            head,
            head_inputs: node.inputs.len(),
            chain: ElementwiseChain::from_body(body, ctx.opsets, ctx.operation_set)?,
            mapped,
        })
    }

    fn chain_inputs(&self) -> usize {
        self.chain.input_count()
    }

    /// The node input of chain input `i` (not the mapped one).
    fn chain_input(&self, i: usize) -> usize {
        ShapedKernel::conv_chain_input(self.head_inputs, self.mapped, i)
    }
}

impl Op for ConvChain {
    fn infer(&self, _inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![self.chain.output_type()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let count = self.head_inputs + self.chain_inputs() - 1;
        if inputs.len() != count {
            bail!(
                "{CONV_CHAIN}: expected {count} inputs, got {}",
                inputs.len()
            );
        }
        let head_inputs = &inputs[..self.head_inputs];
        if inputs.tensor(0)?.dtype() == DType::F32 {
            let shape = self.head.out_shape(head_inputs)?;
            let chain_inputs: Option<Vec<ChainInput>> = (0..self.chain_inputs())
                .map(|i| {
                    if i == self.mapped {
                        return Some(ChainInput::Mapped(&shape));
                    }
                    let t = inputs.value(self.chain_input(i)).ok()?.as_tensor().ok()?;
                    Some(ChainInput::Tensor(t))
                })
                .collect();
            if let Some(prepared) = chain_inputs.and_then(|c| self.chain.prepare(&c)) {
                return Ok(vec![
                    self.head.compute(head_inputs, Some(&prepared))?.into(),
                ]);
            }
        }
        let y = Value::Tensor(self.head.compute(head_inputs, None)?);
        let fed = (0..self.chain_inputs())
            .map(|i| match i == self.mapped {
                true => Ok(y.clone()),
                false => inputs.value(self.chain_input(i)).cloned(),
            })
            .collect::<Result<Vec<_>>>()?;
        self.chain.run_fallback(fed)
    }

    fn device_kernel(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel::Shaped)
    }

    /// The convolution's kernel, then the chain's over its output (two launches on a device).
    fn shaped_kernel(&self, shapes: &[Option<&[usize]>], inputs: &Inputs) -> Result<ShapedKernel> {
        let head_shapes = &shapes[..self.head_inputs.min(shapes.len())];
        let head_values = &inputs[..self.head_inputs.min(inputs.len())];
        let conv = match &self.head {
            Head::Conv(c) => c.shaped_kernel(head_shapes, head_values)?,
            Head::Transpose(c) => c.shaped_kernel(head_shapes, head_values)?,
        };
        let out = conv.output_shapes().swap_remove(0);
        let chain_shapes = (0..self.chain_inputs())
            .map(|i| match i == self.mapped {
                true => Ok(out.as_slice()),
                false => input_shape(shapes, self.chain_input(i)),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ShapedKernel::ConvChain {
            conv: Box::new(conv),
            conv_inputs: self.head_inputs,
            chain: self.chain.chain_kernel(&chain_shapes)?,
            mapped: self.mapped,
        })
    }
}
