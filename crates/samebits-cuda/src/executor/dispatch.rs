//! From a step's [`DeviceKernel`] (the op's own parsed attributes) and its inputs' dtypes and
//! shapes to a device [`Launch`], and running it. A step whose inputs the kernel does not take
//! (another dtype, a shape outside the kernel's layouts, extra outputs) gets no launch and falls
//! back to the op's CPU evaluation; the semantics stay those of the op (samebits-ops).
//! Attention's past keys and values may be cache storages (`DeviceValue::Kv`), which its
//! launch extends in place (`attention.rs`).

use samebits_ggml::GgmlType;
use samebits_ir::{DType, Tensor};
use samebits_kernels::REDUCTION_TILE;
use samebits_ops::{
    AttentionHeads, BinaryKernel, DeviceKernel, MatrixProducts, RotaryShape, StridedView,
    UnaryKernel, gemm_c_strides, gemm_products, matmul_products, normalize_axis,
};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::attention::{
    AttentionProduct, AttentionShape, HeadsLayout, KvLease, KvPast, KvSite, attention_rows,
    attention_split_fits,
};
use crate::backend::CudaBackend;
use crate::buffer::DeviceBuffer;
use crate::elementwise::{BroadcastLayout, cast_source};
use crate::error::{CudaError, Result};
use crate::fast::Kernels;
use crate::gemm::{DeviceMat, GemmEpilogue, GemmShape};
use crate::gguf::{GGUF_GEMM_MIN_ROWS, GgufMatrix, GgufProducts, GgufRotary, gguf_supported};
use crate::reduce::row_len_supported;

use super::{DeviceValue, fused};

/// What the executor knows of an input before moving it: its dtype and shape, and its host
/// value when it has one (integer indices are checked there).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ArgInfo<'a> {
    pub dtype: DType,
    pub shape: &'a [usize],
    pub host: Option<&'a Tensor>,
}

/// A strided matrix view without its buffer: offset, batch, row and column strides.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct MatLayout {
    batch_stride: usize,
    row_stride: usize,
    col_stride: usize,
}

impl MatLayout {
    fn view(self, buffer: &DeviceBuffer) -> DeviceMat<'_> {
        DeviceMat {
            buffer,
            offset: 0,
            batch_stride: self.batch_stride,
            row_stride: self.row_stride,
            col_stride: self.col_stride,
        }
    }
}

/// An interleaved rotary embedding fused into a GGUF product: head size, rotary width, table
/// width.
pub(crate) type FusedRotary = (usize, usize, usize);

/// One device operation with every dimension resolved.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Launch {
    /// Cast of an integer or bool tensor (input 0, raw bytes on the device) to float32.
    CastToF32 {
        from: DType,
    },
    Unary(UnaryKernel),
    Binary {
        op: BinaryKernel,
        a: Vec<usize>,
        b: Vec<usize>,
    },
    /// MatMul and Gemm: `C = epilogue(A B)`; input 2, when present, is Gemm's C.
    Gemm {
        shape: GemmShape,
        a: MatLayout,
        b: MatLayout,
        /// Gemm's `(alpha, beta, C layout)`; `None` for MatMul (no epilogue).
        alpha_beta: Option<(f32, f32, Option<MatLayout>)>,
        out_shape: Vec<usize>,
    },
    /// Rows of `len` elements `inner` apart (1: contiguous rows).
    Softmax {
        len: usize,
        inner: usize,
        log: bool,
    },
    LayerNorm {
        epsilon: f32,
    },
    RmsNorm {
        epsilon: f32,
    },
    /// MatMulGguf; with `add` (MatMulGgufAdd), input 2 is a tensor of the output's shape added
    /// to the product (a fused residual Add).
    Gguf {
        ggml_type: GgmlType,
        rows: usize,
        cols: usize,
        out_shape: Vec<usize>,
        add: bool,
    },
    /// `samebits::GgufProducts` in one launch (`executor/fused.rs`): input 0 the activations,
    /// 1 the RMSNorm scale, then one weight per matrix, then the rotary cos / sin tables; one
    /// output per matrix, or the one output `(g * sigmoid(g)) * u` of a gate and an up matrix
    /// with `gate`.
    GgufProducts {
        ggml_type: GgmlType,
        cols: usize,
        epsilon: f32,
        /// Rows of each matrix and its interleaved rotary, if any.
        matrices: Vec<(usize, Option<FusedRotary>)>,
        gate: bool,
        out_shapes: Vec<Vec<usize>>,
    },
    /// SiluGate: `(g * sigmoid(g)) * u` of inputs g, u of one shape.
    SiluMul,
    /// GatherGguf: input 0 the weight bytes, input 1 the i64 indices (checked in range).
    Gather {
        ggml_type: GgmlType,
        rows: usize,
        cols: usize,
        count: usize,
        out_shape: Vec<usize>,
    },
    Rotary {
        layout: HeadsLayout,
        width: usize,
        rot: usize,
        interleaved: bool,
    },
    /// Attention with its past (inputs 4, 5) extended by the new keys and values; outputs Y,
    /// present_key, present_value. With `product` (`executor/fused.rs`), output 0 is instead
    /// the GGUF product of Y with the weights of input 6 (that type, rows and output shape)
    /// plus input 7 (a residual term), computed by the attention launch.
    Attention {
        q: HeadsLayout,
        k: HeadsLayout,
        v: HeadsLayout,
        y: HeadsLayout,
        y_shape: Vec<usize>,
        causal: bool,
        scale: f32,
        product: Option<(GgmlType, usize, Vec<usize>)>,
    },
}

impl Launch {
    /// Whether input `i` moves to the device as raw bytes (quantized weights, indices) rather
    /// than f32.
    pub(crate) fn takes_bytes(&self, i: usize) -> bool {
        match self {
            Launch::Gguf { .. } => i == 1,
            Launch::GgufProducts { matrices, .. } => (2..2 + matrices.len()).contains(&i),
            Launch::Gather { .. } => i <= 1,
            Launch::CastToF32 { .. } => i == 0,
            Launch::Attention {
                product: Some(_), ..
            } => i == 6,
            _ => false,
        }
    }

    /// Whether input `i` may stay a cache storage (Attention's past) instead of a dense tensor.
    pub(crate) fn takes_kv(&self, i: usize) -> bool {
        matches!(self, Launch::Attention { .. }) && (i == 4 || i == 5)
    }
}

/// Argument `i` if it is present and float32.
pub(super) fn f32_arg<'a>(args: &[Option<ArgInfo<'a>>], i: usize) -> Option<ArgInfo<'a>> {
    args.get(i)
        .copied()
        .flatten()
        .filter(|a| a.dtype == DType::F32)
}

/// The launch of `kernel` on these inputs, or `None` to fall back to the CPU: one row per
/// kernel, the match exhaustive, so a new [`DeviceKernel`] does not compile without its row.
/// (`View` and `Shaped` steps are resolved by the executor, `shaped.rs`, not here.)
pub(crate) fn plan_launch(
    kernel: DeviceKernel,
    args: &[Option<ArgInfo<'_>>],
    outputs: usize,
) -> Option<Launch> {
    use DeviceKernel as K;
    match kernel {
        // Run by the executor itself, one launch for every sequence (`ragged.rs`).
        K::RaggedAttention { .. } => None,
        K::Attention {
            is_causal,
            q_num_heads,
            kv_num_heads,
            scale,
        } => attention(args, outputs, is_causal, (q_num_heads, kv_num_heads), scale),
        K::AttentionProduct { .. } => fused::attention_product(kernel, args, outputs),
        K::GgufProducts(k) => fused::gguf_products(&k, args),
        // Every other kernel computes one output.
        _ if outputs != 1 => None,
        K::Unary(u) => unary(args, u),
        K::CastToF32 => {
            let x = args.first().copied().flatten()?;
            (args.len() == 1 && cast_source(x.dtype).is_some())
                .then_some(Launch::CastToF32 { from: x.dtype })
        }
        K::Binary(op) => binary(args, op),
        K::MatMul => matmul(args),
        K::Gemm {
            trans_a,
            trans_b,
            alpha,
            beta,
        } => gemm_op(args, (trans_a, trans_b), alpha, beta),
        K::Softmax {
            axis,
            log,
            coerce_2d,
        } => softmax(args, axis, log, coerce_2d),
        K::LayerNorm { axis, epsilon } => layer_norm(args, axis, epsilon),
        K::RmsNorm { axis, epsilon } => rms_norm(args, axis, epsilon),
        K::MatMulGguf {
            ggml_type,
            rows,
            cols,
        } => gguf_product(args, ggml_type, rows, cols),
        K::MatMulGgufAdd {
            ggml_type,
            rows,
            cols,
        } => gguf_product_add(args, ggml_type, rows, cols),
        K::SiluGate => silu_gate(args),
        K::GatherGguf {
            ggml_type,
            rows,
            cols,
        } => gather_gguf(args, ggml_type, rows, cols),
        K::Rotary {
            interleaved,
            num_heads,
            rotary_dim,
        } => rotary(args, interleaved, num_heads, rotary_dim),
        K::View | K::Shaped => None,
    }
}

/// Elementwise `f(x)`.
fn unary(args: &[Option<ArgInfo<'_>>], u: UnaryKernel) -> Option<Launch> {
    if args.len() != 1 {
        return None;
    }
    f32_arg(args, 0)?;
    Some(Launch::Unary(u))
}

/// `a op b` with NumPy broadcasting.
fn binary(args: &[Option<ArgInfo<'_>>], op: BinaryKernel) -> Option<Launch> {
    let (a, b) = (f32_arg(args, 0)?, f32_arg(args, 1)?);
    if args.len() != 2 {
        return None;
    }
    BroadcastLayout::new(a.shape, b.shape).ok()?;
    Some(Launch::Binary {
        op,
        a: a.shape.to_vec(),
        b: b.shape.to_vec(),
    })
}

/// ONNX MatMul, its products resolved by samebits-ops' `matmul_products`.
fn matmul(args: &[Option<ArgInfo<'_>>]) -> Option<Launch> {
    if args.len() != 2 {
        return None;
    }
    let (products, out_shape) =
        matmul_products(f32_arg(args, 0)?.shape, f32_arg(args, 1)?.shape).ok()?;
    gemm_launch(&products, None, out_shape)
}

/// ONNX Gemm (A, B and the optional C).
fn gemm_op(
    args: &[Option<ArgInfo<'_>>],
    trans: (bool, bool),
    alpha: f32,
    beta: f32,
) -> Option<Launch> {
    if !(2..=3).contains(&args.len()) {
        return None;
    }
    let c = match args.get(2).copied().flatten() {
        Some(_) => Some(f32_arg(args, 2)?.shape),
        None => None,
    };
    gemm(
        f32_arg(args, 0)?.shape,
        f32_arg(args, 1)?.shape,
        c,
        trans,
        alpha,
        beta,
    )
}

/// Softmax or LogSoftmax along `axis` (rows contiguous), or over the coerced 2-D rows.
fn softmax(args: &[Option<ArgInfo<'_>>], axis: i64, log: bool, coerce_2d: bool) -> Option<Launch> {
    if args.len() != 1 {
        return None;
    }
    let shape = f32_arg(args, 0)?.shape;
    let axis = normalize_axis(axis, shape.len()).ok()?;
    let (len, inner): (usize, usize) = if coerce_2d {
        (shape[axis..].iter().product(), 1)
    } else {
        (shape[axis], shape[axis + 1..].iter().product())
    };
    (row_len_supported(len) && shape.iter().product::<usize>() > 0).then_some(Launch::Softmax {
        len,
        inner,
        log,
    })
}

/// LayerNormalization (output 0) with a per-row scale and optional bias.
fn layer_norm(args: &[Option<ArgInfo<'_>>], axis: i64, epsilon: f32) -> Option<Launch> {
    if !(2..=3).contains(&args.len()) {
        return None;
    }
    let norm = normalized_shape(f32_arg(args, 0)?.shape, axis)?;
    per_row_parameter(f32_arg(args, 1)?.shape, norm)?;
    if args.get(2).copied().flatten().is_some() {
        per_row_parameter(f32_arg(args, 2)?.shape, norm)?;
    }
    Some(Launch::LayerNorm { epsilon })
}

/// RMSNormalization with a per-row scale.
fn rms_norm(args: &[Option<ArgInfo<'_>>], axis: i64, epsilon: f32) -> Option<Launch> {
    if args.len() != 2 {
        return None;
    }
    let norm = normalized_shape(f32_arg(args, 0)?.shape, axis)?;
    per_row_parameter(f32_arg(args, 1)?.shape, norm)?;
    Some(Launch::RmsNorm { epsilon })
}

/// `samebits::MatMulGguf` over ggml rows of a type the device dequantizes.
fn gguf_product(
    args: &[Option<ArgInfo<'_>>],
    ggml_type: GgmlType,
    rows: usize,
    cols: usize,
) -> Option<Launch> {
    if args.len() != 2 {
        return None;
    }
    let x = f32_arg(args, 0)?.shape;
    let w = args[1].filter(|w| w.dtype == DType::U8)?;
    let row_bytes = ggml_type.row_bytes(cols)?;
    let m = x.iter().rev().skip(1).product::<usize>();
    let fits = gguf_supported(ggml_type)
        && x.last() == Some(&cols)
        && cols > 0
        && m > 0
        && m <= 65_535
        && w.shape.iter().product::<usize>() == rows * row_bytes;
    fits.then(|| Launch::Gguf {
        ggml_type,
        rows,
        cols,
        out_shape: x[..x.len() - 1].iter().copied().chain([rows]).collect(),
        add: false,
    })
}

/// `samebits::MatMulGgufAdd`: the product, then input 2 (of the product's shape) added.
fn gguf_product_add(
    args: &[Option<ArgInfo<'_>>],
    ggml_type: GgmlType,
    rows: usize,
    cols: usize,
) -> Option<Launch> {
    if args.len() != 3 {
        return None;
    }
    let Launch::Gguf {
        out_shape,
        add: false,
        ..
    } = gguf_product(&args[..2], ggml_type, rows, cols)?
    else {
        return None;
    };
    (f32_arg(args, 2)?.shape == out_shape.as_slice()).then_some(Launch::Gguf {
        ggml_type,
        rows,
        cols,
        out_shape,
        add: true,
    })
}

/// `samebits::SiluGate` of two tensors of one shape.
fn silu_gate(args: &[Option<ArgInfo<'_>>]) -> Option<Launch> {
    if args.len() != 2 {
        return None;
    }
    let (g, u) = (f32_arg(args, 0)?, f32_arg(args, 1)?);
    (g.shape == u.shape).then_some(Launch::SiluMul)
}

/// `samebits::GatherGguf` with indices on the host, every one in range.
fn gather_gguf(
    args: &[Option<ArgInfo<'_>>],
    ggml_type: GgmlType,
    rows: usize,
    cols: usize,
) -> Option<Launch> {
    if args.len() != 2 {
        return None;
    }
    let w = args[0].filter(|w| w.dtype == DType::U8)?;
    let ids = args[1].filter(|a| a.dtype == DType::I64)?;
    // Indices are checked on the host (an index out of range is the CPU op's error).
    let in_range = ids
        .host?
        .as_slice::<i64>()
        .ok()?
        .iter()
        .all(|&i| i >= -(rows as i64) && i < rows as i64);
    let fits = gguf_supported(ggml_type)
        && in_range
        && cols > 0
        && w.shape.iter().product::<usize>() == rows * ggml_type.row_bytes(cols)?;
    fits.then(|| Launch::Gather {
        ggml_type,
        rows,
        cols,
        count: ids.shape.iter().product(),
        out_shape: ids.shape.iter().copied().chain([cols]).collect(),
    })
}

/// ONNX RotaryEmbedding without position_ids, its shape resolved by samebits-ops'
/// `RotaryShape`.
fn rotary(
    args: &[Option<ArgInfo<'_>>],
    interleaved: bool,
    num_heads: usize,
    rotary_dim: usize,
) -> Option<Launch> {
    if args.len() != 3 {
        return None;
    }
    let cos = f32_arg(args, 1)?.shape;
    let RotaryShape {
        heads: layout,
        rot,
        width,
        cache_rows,
    } = RotaryShape::resolve(
        f32_arg(args, 0)?.shape,
        [cos, f32_arg(args, 2)?.shape],
        i64::try_from(num_heads).ok()?,
        i64::try_from(rotary_dim).ok()?,
    )
    .ok()?;
    // Without position_ids: one cache row per token, read from a 2-D or 3-D cache.
    let fits =
        width > 0 && cache_rows >= layout.batch * layout.seq && (cos.len() == 2 || cos.len() == 3);
    fits.then_some(Launch::Rotary {
        layout,
        width,
        rot,
        interleaved,
    })
}

/// ONNX Attention: Q, K, V (3-D with the head attributes, or 4-D), no mask, optional past
/// key and value (4-D, given together), no `nonpad_kv_seqlen`; every output computed.
pub(super) fn attention(
    args: &[Option<ArgInfo<'_>>],
    outputs: usize,
    causal: bool,
    (q_heads, kv_heads): (usize, usize),
    scale: Option<f32>,
) -> Option<Launch> {
    let f32_arg = |i: usize| f32_arg(args, i);
    let absent = |i: usize| args.get(i).copied().flatten().is_none();
    if !(3..=6).contains(&args.len()) || outputs != 3 || !absent(3) || args.len() > 6 {
        return None;
    }
    // Past keys and values come 4-D (dense or a cache storage).
    let past = match (absent(4), absent(5)) {
        (true, true) => None,
        (false, false) => {
            let (pk, pv) = (f32_arg(4)?.shape, f32_arg(5)?.shape);
            if pk.len() != 4 || pv.len() != 4 {
                return None;
            }
            Some([pk, pv])
        }
        _ => return None,
    };
    let heads = AttentionHeads::resolve(
        [f32_arg(0)?.shape, f32_arg(1)?.shape, f32_arg(2)?.shape],
        past,
        i64::try_from(q_heads).ok()?,
        i64::try_from(kv_heads).ok()?,
    )
    .ok()?;
    let scale = heads.scale(scale);
    let AttentionHeads {
        q,
        k,
        v,
        past,
        y,
        y_shape,
    } = heads;
    if q.size == 0 || v.size == 0 || q.seq == 0 {
        return None;
    }
    // Score rows of the whole sequence must fit one block's shared memory.
    attention_rows(q.heads / k.heads, past + k.seq, q.size, v.size)?;
    Some(Launch::Attention {
        q,
        k,
        v,
        y,
        y_shape,
        causal,
        scale,
        product: None,
    })
}

/// The normalized trailing shape `shape[axis..]` of a row norm, if the row kernels take it.
fn normalized_shape(shape: &[usize], axis: i64) -> Option<&[usize]> {
    let axis = normalize_axis(axis, shape.len()).ok()?;
    let norm = &shape[axis..];
    let rows: usize = shape[..axis].iter().product();
    (rows > 0 && row_len_supported(norm.iter().product())).then_some(norm)
}

/// `Some` when a scale / bias of `shape` is one value per element of the normalized shape
/// `norm` (the same shape, or with leading unit axes dropped); other broadcasts fall back.
fn per_row_parameter(shape: &[usize], norm: &[usize]) -> Option<()> {
    let lead = norm.len().checked_sub(shape.len())?;
    (norm[lead..] == *shape && norm[..lead].iter().all(|&d| d == 1)).then_some(())
}

/// The GEMM launch of `products` (resolved by samebits-ops), when every operand's batch
/// follows one stride; a broadcast batch needing per-product offsets stays on the CPU.
fn gemm_launch(
    products: &MatrixProducts,
    alpha_beta: Option<(f32, f32, Option<MatLayout>)>,
    out_shape: Vec<usize>,
) -> Option<Launch> {
    let (a_batch, b_batch) = products.batch_strides()?;
    let layout = |batch_stride: usize, (row_stride, col_stride): (usize, usize)| MatLayout {
        batch_stride,
        row_stride,
        col_stride,
    };
    let MatrixProducts { m, n, k, .. } = *products;
    Some(Launch::Gemm {
        shape: GemmShape {
            batch: products.count(),
            m,
            n,
            k,
        },
        a: layout(a_batch, products.a_strides),
        b: layout(b_batch, products.b_strides),
        alpha_beta,
        out_shape,
    })
}

/// ONNX Gemm on matrices, C broadcast to `[m, n]` by `gemm_c_strides` (samebits-ops).
fn gemm(
    a: &[usize],
    b: &[usize],
    c: Option<&[usize]>,
    (trans_a, trans_b): (bool, bool),
    alpha: f32,
    beta: f32,
) -> Option<Launch> {
    let products = gemm_products(a, b, trans_a, trans_b).ok()?;
    let (m, n) = (products.m, products.n);
    let c_layout = match c {
        Some(c) => {
            let (row_stride, col_stride) = gemm_c_strides(c, m, n).ok()?;
            Some(MatLayout {
                batch_stride: 0,
                row_stride,
                col_stride,
            })
        }
        None => None,
    };
    gemm_launch(&products, Some((alpha, beta, c_layout)), vec![m, n])
}

/// Queries from which an attention block takes every query head of a KV group.
pub(crate) const GROUPED_ATTENTION_MIN_QUERIES: usize = 16;

/// Score rows longer than this (the cache storage's capacity) split the keys of a decode
/// step's query over blocks.
const SPLIT_MIN_KEYS: usize = 256;

/// Bytes of dequantized weight copies a process keeps (prefill speed for device memory).
const DEQUANTIZED_BUDGET: usize = 4 << 30;

/// Takes `bytes` of the dequantized-weights budget, if that much is left.
fn reserve_dequantized(bytes: usize) -> bool {
    static USED: AtomicUsize = AtomicUsize::new(0);
    USED.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
        (used + bytes <= DEQUANTIZED_BUDGET).then_some(used + bytes)
    })
    .is_ok()
}

/// The f32 input `i` of a launch.
pub(super) fn f32_input<'a>(
    inputs: &[Option<&'a DeviceValue>],
    i: usize,
) -> Result<(&'a DeviceBuffer, &'a [usize])> {
    match inputs.get(i).copied().flatten() {
        Some(DeviceValue::F32 { buffer, shape }) => Ok((buffer, shape)),
        _ => Err(CudaError::Invalid(format!(
            "input {i} is not a float32 device tensor"
        ))),
    }
}

/// The keys (input 4) or values (input 5) of Attention's past, if given.
fn kv_past<'a>(inputs: &[Option<&'a DeviceValue>], i: usize) -> Result<KvPast<'a>> {
    past_of(inputs.get(i).copied().flatten(), i)
}

/// The past keys or values (input `i`) `value` holds, if given.
pub(super) fn past_of(value: Option<&DeviceValue>, i: usize) -> Result<KvPast<'_>> {
    Ok(match value {
        None => KvPast::None,
        Some(DeviceValue::F32 { buffer, shape }) => match **shape {
            [b, h, s, d] => KvPast::Dense(buffer, HeadsLayout::dense(b, h, s, d)),
            _ => return Err(CudaError::Invalid(format!("input {i} is not 4-D"))),
        },
        Some(DeviceValue::Kv {
            storage,
            values,
            len,
            ..
        }) => KvPast::Storage {
            storage,
            values: *values,
            len: *len,
        },
        Some(DeviceValue::Bytes { .. } | DeviceValue::Sequence(_)) => {
            return Err(CudaError::Invalid(format!("input {i} is not float32")));
        }
    })
}

/// Runs `launch` on device inputs (in the step's input order); returns its outputs.
pub(crate) fn run_launch(
    backend: &CudaBackend,
    launch: &Launch,
    inputs: &[Option<&DeviceValue>],
    kernels: Kernels,
) -> Result<Vec<DeviceValue>> {
    let (buffer, shape) = match launch {
        Launch::Unary(op) => {
            let (x, shape) = f32_input(inputs, 0)?;
            (backend.unary(*op, x)?, shape.to_vec())
        }
        Launch::CastToF32 { from } => match inputs.first().copied().flatten() {
            Some(DeviceValue::Bytes { bytes, shape, .. }) => {
                let count = shape.iter().product();
                (backend.cast_to_f32(bytes, *from, count)?, shape.clone())
            }
            _ => {
                return Err(CudaError::Invalid(
                    "a cast's input is not on the device as bytes".into(),
                ));
            }
        },
        Launch::Binary { op, a, b } => {
            let (x, _) = f32_input(inputs, 0)?;
            let (y, _) = f32_input(inputs, 1)?;
            backend.binary(*op, x, a, y, b)?
        }
        Launch::Gemm {
            shape,
            a,
            b,
            alpha_beta,
            out_shape,
        } => {
            let (a_buffer, _) = f32_input(inputs, 0)?;
            let (b_buffer, _) = f32_input(inputs, 1)?;
            let c_buffer = match alpha_beta {
                Some((_, _, Some(_))) => Some(f32_input(inputs, 2)?.0),
                _ => None,
            };
            let epilogue = match *alpha_beta {
                None => GemmEpilogue::None,
                Some((alpha, beta, c)) => GemmEpilogue::AlphaBeta {
                    alpha,
                    beta,
                    c: c.zip(c_buffer).map(|(layout, buffer)| layout.view(buffer)),
                },
            };
            let out = backend.gemm_with(
                *shape,
                a.view(a_buffer),
                b.view(b_buffer),
                epilogue,
                kernels,
            )?;
            (out, out_shape.clone())
        }
        Launch::Softmax { len, inner: 1, log } => {
            let (x, shape) = f32_input(inputs, 0)?;
            (backend.softmax(x, *len, *log)?, shape.to_vec())
        }
        // Each strided row gathered into a contiguous one, as the CPU op does, normalised by
        // the row kernel, and put back: `[outer, len, inner]` -> `[outer, inner, len]` -> back.
        Launch::Softmax { len, inner, log } => {
            let (x, shape) = f32_input(inputs, 0)?;
            let outer = x.len() / (len * inner);
            // The dense `[a, b, c]` seen as `[a, c, b]` (Transpose's view), copied out.
            let swapped = |[a, b, c]: [usize; 3]| {
                let view = StridedView::dense(&[a, b, c]).permuted(&[0, 2, 1]);
                (vec![view.shape.clone()], [view.copy_part(0, 0)])
            };
            let (rows_shape, gather) = swapped([outer, *len, *inner]);
            let rows = backend.copy_parts(&[Some(x)], &rows_shape, &gather)?;
            let y = backend.softmax(&rows[0], *len, *log)?;
            let (out_shape, scatter) = swapped([outer, *inner, *len]);
            let out = backend.copy_parts(&[Some(&y)], &out_shape, &scatter)?;
            (out.into_iter().next().expect("one output"), shape.to_vec())
        }
        Launch::LayerNorm { epsilon } => {
            let (x, shape) = f32_input(inputs, 0)?;
            let (scale, _) = f32_input(inputs, 1)?;
            let bias = match inputs.get(2).copied().flatten() {
                Some(_) => Some(f32_input(inputs, 2)?.0),
                None => None,
            };
            let (y, _stats) = backend.layer_norm(x, scale, bias, *epsilon)?;
            (y, shape.to_vec())
        }
        Launch::RmsNorm { epsilon } => {
            let (x, shape) = f32_input(inputs, 0)?;
            let (scale, _) = f32_input(inputs, 1)?;
            (backend.rms_norm(x, scale, *epsilon)?, shape.to_vec())
        }
        Launch::SiluMul => {
            let (g, shape) = f32_input(inputs, 0)?;
            let (u, _) = f32_input(inputs, 1)?;
            (backend.silu_mul(g, u)?, shape.to_vec())
        }
        Launch::Gguf {
            ggml_type,
            rows,
            cols,
            out_shape,
            add,
        } => {
            let (x, _) = f32_input(inputs, 0)?;
            let add = match add {
                true => Some(f32_input(inputs, 2)?.0),
                false => None,
            };
            let Some(DeviceValue::Bytes {
                bytes: w,
                dequantized,
                ..
            }) = inputs.get(1).copied().flatten()
            else {
                return Err(CudaError::Invalid(
                    "input 1 (quantized weight) is not on the device as bytes".into(),
                ));
            };
            let m = x.len() / cols;
            // The exact-integer products have one kernel for any number of rows.
            let int8 = kernels.int8_products(*ggml_type);
            let y = if int8 {
                let matrix = GgufMatrix {
                    w,
                    rows: *rows,
                    add,
                    rotary: None,
                };
                let mut ys = backend.gguf_products(&GgufProducts {
                    ggml_type: *ggml_type,
                    cols: *cols,
                    x,
                    norm: None,
                    matrices: &[matrix],
                    gate: false,
                    int8,
                })?;
                ys.remove(0)
            } else if m < GGUF_GEMM_MIN_ROWS && backend.gguf_products_fit(*cols, false) {
                backend.gguf_matmul(*ggml_type, *rows, *cols, w, x, add)?
            } else if let Some(wt) = dequantized.get() {
                backend.gguf_matmul_dequantized(*rows, *cols, wt, x, add)?
            } else {
                let wt = backend.gguf_dequantize_t(*ggml_type, *rows, *cols, w)?;
                let y = backend.gguf_matmul_dequantized(*rows, *cols, &wt, x, add)?;
                if reserve_dequantized(4 * rows * cols) {
                    let _ = dequantized.set(wt);
                }
                y
            };
            (y, out_shape.clone())
        }
        Launch::GgufProducts {
            ggml_type,
            cols,
            epsilon,
            matrices,
            gate,
            out_shapes,
        } => {
            let (x, _) = f32_input(inputs, 0)?;
            let scale = Some((f32_input(inputs, 1)?.0, *epsilon));
            let n = matrices.len();
            let tables = match matrices.iter().any(|(_, r)| r.is_some()) {
                true => Some((f32_input(inputs, 2 + n)?.0, f32_input(inputs, 3 + n)?.0)),
                false => None,
            };
            let mut mats = Vec::with_capacity(matrices.len());
            for (i, &(rows, rotary)) in matrices.iter().enumerate() {
                let Some(DeviceValue::Bytes { bytes: w, .. }) =
                    inputs.get(2 + i).copied().flatten()
                else {
                    return Err(CudaError::Invalid(format!(
                        "input {} (quantized weight) is not on the device as bytes",
                        2 + i
                    )));
                };
                mats.push(GgufMatrix {
                    w,
                    rows,
                    add: None,
                    rotary: rotary
                        .zip(tables)
                        .map(|((head_size, rot, width), (cos, sin))| GgufRotary {
                            cos,
                            sin,
                            width,
                            head_size,
                            rot,
                        }),
                });
            }
            let ys = backend.gguf_products(&GgufProducts {
                ggml_type: *ggml_type,
                cols: *cols,
                x,
                norm: scale,
                matrices: &mats,
                gate: *gate,
                int8: kernels.int8_products(*ggml_type),
            })?;
            return Ok(ys
                .into_iter()
                .zip(out_shapes)
                .map(|(y, shape)| DeviceValue::F32 {
                    buffer: Arc::new(y),
                    shape: shape.clone(),
                })
                .collect());
        }
        Launch::Gather {
            ggml_type,
            rows,
            cols,
            count,
            out_shape,
        } => {
            let bytes = |i: usize| match inputs.get(i).copied().flatten() {
                Some(DeviceValue::Bytes { bytes, .. }) => Ok(bytes),
                _ => Err(CudaError::Invalid(format!(
                    "input {i} is not on the device as bytes"
                ))),
            };
            let y = backend.gguf_gather(*ggml_type, *rows, *cols, bytes(0)?, bytes(1)?, *count)?;
            (y, out_shape.clone())
        }
        Launch::Rotary {
            layout,
            width,
            rot,
            interleaved,
        } => {
            let (x, shape) = f32_input(inputs, 0)?;
            let (cos, sin) = (f32_input(inputs, 1)?.0, f32_input(inputs, 2)?.0);
            let y = backend.rotary(x, *layout, cos, sin, *width, *rot, *interleaved)?;
            (y, shape.to_vec())
        }
        Launch::Attention {
            q,
            k,
            v,
            y,
            y_shape,
            causal,
            scale,
            product,
        } => {
            let fused = match product {
                Some((ggml_type, rows, _)) => {
                    let Some(DeviceValue::Bytes { bytes: w, .. }) =
                        inputs.get(6).copied().flatten()
                    else {
                        return Err(CudaError::Invalid(
                            "input 6 (quantized weight) is not on the device as bytes".into(),
                        ));
                    };
                    let add = match inputs.get(7).copied().flatten() {
                        Some(_) => Some(f32_input(inputs, 7)?.0),
                        None => None,
                    };
                    Some(AttentionProduct {
                        ggml_type: *ggml_type,
                        w,
                        rows: *rows,
                        add,
                    })
                }
                None => None,
            };
            let site = KvSite {
                step: launch as *const Launch as usize,
                sequence: 0,
            };
            let (storage, past) =
                backend.kv_extend((kv_past(inputs, 4)?, kv_past(inputs, 5)?), (*k, *v), site)?;
            let total = past + k.seq;
            // Score rows as long as the storage when they fit (a recorded step then replays
            // until the storage is full), else as long as this step needs.
            let group = q.heads / k.heads;
            let (stride, widest) = match attention_rows(group, storage.capacity(), q.size, v.size) {
                Some(rows) => (storage.capacity(), rows),
                None => (
                    total,
                    attention_rows(group, total, q.size, v.size).ok_or_else(|| {
                        CudaError::Invalid("attention scores exceed shared memory".into())
                    })?,
                ),
            };
            // Launch shape only (every choice gives the same bits): with many queries the
            // heads of a group share a block and read each key once; with few (decode) a block
            // per head, since the kernel is latency-bound on a nearly empty GPU there.
            let rows = if q.seq >= GROUPED_ATTENTION_MIN_QUERIES {
                widest
            } else {
                1
            };
            // One query (decode) over long score rows: the keys split over blocks in chunks of
            // whole 64-key tiles, about one block per multiprocessor (a launch shape too).
            let blocks = q.batch * (q.heads / rows) * q.seq;
            let split = match q.seq == 1 && stride > SPLIT_MIN_KEYS {
                true => {
                    let chunks = (backend.sm_count() / blocks).max(1);
                    let split = stride.div_ceil(REDUCTION_TILE).div_ceil(chunks);
                    if attention_split_fits(rows, stride, q.size, split) {
                        split
                    } else {
                        0
                    }
                }
                false => 0,
            };
            super::graph::note_attention(&storage, k.seq, stride);
            let shape = AttentionShape {
                causal: *causal,
                scale: *scale,
                new_len: k.seq,
                rows,
                split,
            };
            let out = storage.with_buffers(|keys, values, counter| {
                let view = |values: bool| {
                    let mut l = storage.layout(values, 0);
                    l.seq = stride;
                    l
                };
                backend.attention(
                    (f32_input(inputs, 0)?.0, *q),
                    (keys, view(false)),
                    (values, view(true)),
                    Some(((f32_input(inputs, 1)?.0, *k), (f32_input(inputs, 2)?.0, *v))),
                    *y,
                    past,
                    Some(counter),
                    shape,
                    fused,
                )
            })?;
            let present = |values: bool, size: usize| DeviceValue::Kv {
                storage: KvLease::new(&storage),
                values,
                len: total,
                shape: vec![k.batch, k.heads, total, size],
            };
            return Ok(vec![
                DeviceValue::F32 {
                    buffer: Arc::new(out),
                    shape: match product {
                        Some((_, _, shape)) => shape.clone(),
                        None => y_shape.clone(),
                    },
                },
                present(false, k.size),
                present(true, v.size),
            ]);
        }
    };
    Ok(vec![DeviceValue::F32 {
        buffer: Arc::new(buffer),
        shape,
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(shape: &[usize]) -> Option<ArgInfo<'_>> {
        Some(ArgInfo {
            dtype: DType::F32,
            shape,
            host: None,
        })
    }

    /// MatMul shapes follow numpy.matmul (numpy docs: 1-D operands promoted, batch broadcast).
    #[test]
    fn matmul_shapes_follow_numpy() {
        let out = |a: &[usize], b: &[usize]| match plan_launch(
            DeviceKernel::MatMul,
            &[f32s(a), f32s(b)],
            1,
        ) {
            Some(Launch::Gemm {
                out_shape, shape, ..
            }) => Some((out_shape, shape.batch)),
            _ => None,
        };
        assert_eq!(out(&[2, 3], &[3, 4]), Some((vec![2, 4], 1)));
        assert_eq!(out(&[3], &[3, 4]), Some((vec![4], 1)));
        assert_eq!(out(&[2, 3], &[3]), Some((vec![2], 1)));
        assert_eq!(out(&[3], &[3]), Some((vec![], 1)));
        assert_eq!(out(&[5, 2, 3], &[3, 4]), Some((vec![5, 2, 4], 5)));
        assert_eq!(out(&[2, 3], &[7, 3, 4]), Some((vec![7, 2, 4], 7)));
        // Batches that broadcast against each other need per-matrix offsets: CPU.
        assert_eq!(out(&[1, 5, 2, 3], &[4, 1, 3, 4]), None);
        assert_eq!(out(&[2, 3], &[4, 4]), None);
    }

    #[test]
    fn other_dtypes_and_extra_outputs_fall_back() {
        let unary = DeviceKernel::Unary(UnaryKernel::Relu);
        let f64s = [Some(ArgInfo {
            dtype: DType::F64,
            shape: &[3],
            host: None,
        })];
        assert_eq!(plan_launch(unary, &f64s, 1), None);
        assert!(plan_launch(unary, &[f32s(&[3])], 1).is_some());
        let norm = DeviceKernel::LayerNorm {
            axis: -1,
            epsilon: 1e-5,
        };
        let args = [f32s(&[2, 8]), f32s(&[8]), None];
        assert!(plan_launch(norm, &args, 1).is_some());
        assert_eq!(
            plan_launch(norm, &args, 3),
            None,
            "Mean / InvStdDev outputs"
        );
        assert_eq!(plan_launch(norm, &[f32s(&[2, 8]), f32s(&[1, 8])], 1), None);
    }

    #[test]
    fn softmax_rows_along_any_axis() {
        let softmax = |axis, coerce_2d| DeviceKernel::Softmax {
            axis,
            log: false,
            coerce_2d,
        };
        let shape = [2, 3, 4];
        let len = |k| match plan_launch(k, &[f32s(&shape)], 1) {
            Some(Launch::Softmax { len, .. }) => Some(len),
            _ => None,
        };
        assert_eq!(len(softmax(-1, false)), Some(4));
        assert_eq!(len(softmax(1, false)), Some(3));
        assert_eq!(len(softmax(1, true)), Some(12));
    }

    #[test]
    fn gguf_checks_the_weight_size() {
        let k = DeviceKernel::MatMulGguf {
            ggml_type: GgmlType::Q8_0,
            rows: 2,
            cols: 32,
        };
        let w = |bytes: &'static [usize]| {
            Some(ArgInfo {
                dtype: DType::U8,
                shape: bytes,
                host: None,
            })
        };
        assert!(plan_launch(k, &[f32s(&[1, 32]), w(&[68])], 1).is_some());
        assert_eq!(plan_launch(k, &[f32s(&[1, 32]), w(&[67])], 1), None);
        assert_eq!(plan_launch(k, &[f32s(&[1, 31]), w(&[68])], 1), None);
    }
}
