//! From a step's [`DeviceKernel`] (the op's own parsed attributes) and its inputs' dtypes and
//! shapes to a device [`Launch`], and running it. A step whose inputs the kernel does not take
//! (another dtype, a shape outside the kernel's layouts, extra outputs) gets no launch and falls
//! back to the op's CPU evaluation; the semantics stay those of the op (samebits-ops).

use samebits_gguf::GgmlType;
use samebits_ir::DType;
use samebits_ops::broadcast::broadcast_shapes;
use samebits_ops::{BinaryKernel, DeviceKernel, UnaryKernel, gemm_c_strides, normalize_axis};

use std::sync::Arc;

use crate::backend::CudaBackend;
use crate::buffer::DeviceBuffer;
use crate::elementwise::{BinaryOp, BroadcastLayout, UnaryOp};
use crate::error::{CudaError, Result};
use crate::fast::Kernels;
use crate::gemm::{DeviceMat, GemmEpilogue, GemmShape};
use crate::gguf::gguf_supported;
use crate::reduce::row_len_supported;

use super::DeviceValue;

/// What the executor knows of an input before moving it: its dtype and shape.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ArgInfo<'a> {
    pub dtype: DType,
    pub shape: &'a [usize],
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

/// One device operation with every dimension resolved.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Launch {
    Unary(UnaryOp),
    Binary {
        op: BinaryOp,
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
    Softmax {
        len: usize,
        log: bool,
    },
    LayerNorm {
        epsilon: f32,
    },
    RmsNorm {
        epsilon: f32,
    },
    Gguf {
        ggml_type: GgmlType,
        rows: usize,
        cols: usize,
        out_shape: Vec<usize>,
    },
}

impl Launch {
    /// Whether input `i` moves to the device as raw bytes (quantized weights) rather than f32.
    pub(crate) fn takes_bytes(&self, i: usize) -> bool {
        matches!(self, Launch::Gguf { .. }) && i == 1
    }
}

fn unary_op(kernel: UnaryKernel) -> UnaryOp {
    match kernel {
        UnaryKernel::Math(f) => UnaryOp::Math(f),
        UnaryKernel::Activation(a) => UnaryOp::Activation(a),
        UnaryKernel::Neg => UnaryOp::Neg,
        UnaryKernel::Abs => UnaryOp::Abs,
        UnaryKernel::Relu => UnaryOp::Relu,
        UnaryKernel::Sqrt => UnaryOp::Sqrt,
        UnaryKernel::Reciprocal => UnaryOp::Reciprocal,
    }
}

fn binary_op(kernel: BinaryKernel) -> BinaryOp {
    match kernel {
        BinaryKernel::Add => BinaryOp::Add,
        BinaryKernel::Sub => BinaryOp::Sub,
        BinaryKernel::Mul => BinaryOp::Mul,
        BinaryKernel::Div => BinaryOp::Div,
        BinaryKernel::Max => BinaryOp::Max,
        BinaryKernel::Min => BinaryOp::Min,
    }
}

/// The launch of `kernel` on these inputs, or `None` to fall back to the CPU.
pub(crate) fn plan_launch(
    kernel: DeviceKernel,
    args: &[Option<ArgInfo<'_>>],
    outputs: usize,
) -> Option<Launch> {
    if outputs != 1 {
        return None;
    }
    let f32_arg = |i: usize| {
        args.get(i)
            .copied()
            .flatten()
            .filter(|a| a.dtype == DType::F32)
    };
    match kernel {
        DeviceKernel::Unary(u) if args.len() == 1 => {
            f32_arg(0)?;
            Some(Launch::Unary(unary_op(u)))
        }
        DeviceKernel::Binary(op) if args.len() == 2 => {
            let (a, b) = (f32_arg(0)?, f32_arg(1)?);
            BroadcastLayout::new(a.shape, b.shape).ok()?;
            Some(Launch::Binary {
                op: binary_op(op),
                a: a.shape.to_vec(),
                b: b.shape.to_vec(),
            })
        }
        DeviceKernel::MatMul if args.len() == 2 => matmul(f32_arg(0)?.shape, f32_arg(1)?.shape),
        DeviceKernel::Gemm {
            trans_a,
            trans_b,
            alpha,
            beta,
        } if (2..=3).contains(&args.len()) => {
            let c = match args.get(2).copied().flatten() {
                Some(_) => Some(f32_arg(2)?.shape),
                None => None,
            };
            gemm(
                f32_arg(0)?.shape,
                f32_arg(1)?.shape,
                c,
                trans_a,
                trans_b,
                alpha,
                beta,
            )
        }
        DeviceKernel::Softmax {
            axis,
            log,
            coerce_2d,
        } if args.len() == 1 => {
            let shape = f32_arg(0)?.shape;
            let axis = normalize_axis(axis, shape.len()).ok()?;
            let len: usize = if coerce_2d {
                shape[axis..].iter().product()
            } else {
                // Rows must be contiguous: nothing but unit axes after `axis`.
                if shape[axis + 1..].iter().product::<usize>() != 1 {
                    return None;
                }
                shape[axis]
            };
            (row_len_supported(len) && shape.iter().product::<usize>() > 0)
                .then_some(Launch::Softmax { len, log })
        }
        DeviceKernel::LayerNorm { axis, epsilon } if (2..=3).contains(&args.len()) => {
            let norm = normalized_shape(f32_arg(0)?.shape, axis)?;
            per_row_parameter(f32_arg(1)?.shape, norm)?;
            if args.get(2).copied().flatten().is_some() {
                per_row_parameter(f32_arg(2)?.shape, norm)?;
            }
            Some(Launch::LayerNorm { epsilon })
        }
        DeviceKernel::RmsNorm { axis, epsilon } if args.len() == 2 => {
            let norm = normalized_shape(f32_arg(0)?.shape, axis)?;
            per_row_parameter(f32_arg(1)?.shape, norm)?;
            Some(Launch::RmsNorm { epsilon })
        }
        DeviceKernel::MatMulGguf {
            ggml_type,
            rows,
            cols,
        } if args.len() == 2 => {
            let x = f32_arg(0)?.shape;
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
            })
        }
        _ => None,
    }
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

/// NumPy `matmul` of dense row-major operands: 1-D operands promoted (and that axis dropped
/// from the output), batch axes broadcast where each operand's batch is either the whole
/// broadcast batch or a single matrix.
fn matmul(a: &[usize], b: &[usize]) -> Option<Launch> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let a2: Vec<usize> = if a.len() == 1 {
        vec![1, a[0]]
    } else {
        a.to_vec()
    };
    let b2: Vec<usize> = if b.len() == 1 {
        vec![b[0], 1]
    } else {
        b.to_vec()
    };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (kb, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    if k != kb {
        return None;
    }
    let (a_batch, b_batch) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let batch_shape = broadcast_shapes(&[a_batch, b_batch]).ok()?;
    let batch: usize = batch_shape.iter().product();
    let stride = |operand: &[usize], matrix: usize| -> Option<usize> {
        match operand.iter().product::<usize>() {
            p if p == batch => Some(matrix),
            1 => Some(0),
            _ => None,
        }
    };
    let (sa, sb) = (stride(a_batch, m * k)?, stride(b_batch, k * n)?);
    let mut out_shape = batch_shape;
    if a.len() > 1 {
        out_shape.push(m);
    }
    if b.len() > 1 {
        out_shape.push(n);
    }
    let dense = |batch_stride: usize, cols: usize| MatLayout {
        batch_stride,
        row_stride: cols,
        col_stride: 1,
    };
    Some(Launch::Gemm {
        shape: GemmShape { batch, m, n, k },
        a: dense(sa, k),
        b: dense(sb, n),
        alpha_beta: None,
        out_shape,
    })
}

/// ONNX Gemm on matrices, C broadcast to `[m, n]` by `gemm_c_strides` (samebits-ops).
fn gemm(
    a: &[usize],
    b: &[usize],
    c: Option<&[usize]>,
    trans_a: bool,
    trans_b: bool,
    alpha: f32,
    beta: f32,
) -> Option<Launch> {
    let (&[a0, a1], &[b0, b1]) = (a, b) else {
        return None;
    };
    let layout = |rows_first: bool, cols: usize| MatLayout {
        batch_stride: 0,
        row_stride: if rows_first { cols } else { 1 },
        col_stride: if rows_first { 1 } else { cols },
    };
    let (m, k, a_layout) = if trans_a {
        (a1, a0, layout(false, a1))
    } else {
        (a0, a1, layout(true, a1))
    };
    let (kb, n, b_layout) = if trans_b {
        (b1, b0, layout(false, b1))
    } else {
        (b0, b1, layout(true, b1))
    };
    if k != kb {
        return None;
    }
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
    Some(Launch::Gemm {
        shape: GemmShape { batch: 1, m, n, k },
        a: a_layout,
        b: b_layout,
        alpha_beta: Some((alpha, beta, c_layout)),
        out_shape: vec![m, n],
    })
}

/// The f32 input `i` of a launch.
fn f32_input<'a>(
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

/// Runs `launch` on device inputs (in the step's input order); returns its one output.
pub(crate) fn run_launch(
    backend: &CudaBackend,
    launch: &Launch,
    inputs: &[Option<&DeviceValue>],
    kernels: Kernels,
) -> Result<DeviceValue> {
    let (buffer, shape) = match launch {
        Launch::Unary(op) => {
            let (x, shape) = f32_input(inputs, 0)?;
            (backend.unary(*op, x)?, shape.to_vec())
        }
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
        Launch::Softmax { len, log } => {
            let (x, shape) = f32_input(inputs, 0)?;
            (backend.softmax(x, *len, *log)?, shape.to_vec())
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
        Launch::Gguf {
            ggml_type,
            rows,
            cols,
            out_shape,
        } => {
            let (x, _) = f32_input(inputs, 0)?;
            let Some(DeviceValue::Bytes { bytes: w, .. }) = inputs.get(1).copied().flatten() else {
                return Err(CudaError::Invalid(
                    "input 1 (quantized weight) is not on the device as bytes".into(),
                ));
            };
            let y = backend.gguf_matmul(*ggml_type, *rows, *cols, w, x)?;
            (y, out_shape.clone())
        }
    };
    Ok(DeviceValue::F32 {
        buffer: Arc::new(buffer),
        shape,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(shape: &[usize]) -> Option<ArgInfo<'_>> {
        Some(ArgInfo {
            dtype: DType::F32,
            shape,
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
    fn softmax_needs_contiguous_rows() {
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
        assert_eq!(len(softmax(1, false)), None);
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
            })
        };
        assert!(plan_launch(k, &[f32s(&[1, 32]), w(&[68])], 1).is_some());
        assert_eq!(plan_launch(k, &[f32s(&[1, 32]), w(&[67])], 1), None);
        assert_eq!(plan_launch(k, &[f32s(&[1, 31]), w(&[68])], 1), None);
    }
}
