//! [`DeviceKernel`]: what an op computes, named by the reproducible kernel that computes it, so
//! that a backend other than the CPU interpreter (samebits-cuda's executor) runs the same
//! semantics without parsing the node's attributes a second time.
//!
//! An op returns one from [`crate::Op::device_kernel`] when its evaluation on float32 tensors is
//! exactly that kernel's contract section (docs/contract.md); ops with no such kernel return
//! `None` and other backends fall back to [`crate::Op::eval`]. The variants carry the op's parsed
//! attributes; shapes and dtypes are checked by the backend at run time (anything but float32
//! falls back).

use samebits_gguf::GgmlType;
use samebits_math::{Activation, UnaryFn};

/// A reproducible kernel an op's float32 evaluation equals, with the op's attributes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DeviceKernel {
    /// `y[i] = f(x[i])` (contract sections `arithmetic`, `activation`).
    Unary(UnaryKernel),
    /// `y = a op b` with NumPy broadcasting, exactly two inputs (contract: arithmetic,
    /// reduce-extrema for max / min).
    Binary(BinaryKernel),
    /// ONNX MatMul: NumPy `matmul` semantics, each output the canonical dot product (`gemm`).
    MatMul,
    /// ONNX Gemm: `(alpha * op(A) op(B)) + (beta * C)` (`gemm-epilogue`, `AlphaBeta`).
    Gemm {
        trans_a: bool,
        trans_b: bool,
        alpha: f32,
        beta: f32,
    },
    /// Softmax or LogSoftmax with correctly rounded exp / log (`softmax`): along `axis`, or,
    /// with `coerce_2d` (opset < 13), over rows `[prod(dims[..axis]), prod(dims[axis..])]`.
    Softmax {
        axis: i64,
        log: bool,
        coerce_2d: bool,
    },
    /// LayerNormalization over the axes `axis..` (`normalization`); output 0 only is computed
    /// by the kernel (Mean and InvStdDev outputs fall back).
    LayerNorm { axis: i64, epsilon: f32 },
    /// RMSNormalization over the axes `axis..` (`normalization`).
    RmsNorm { axis: i64, epsilon: f32 },
    /// `samebits::MatMulGguf`: `y[m, n]` = canonical dot of the dequantized weight row `n`
    /// (`ggml_type` blocks, `[rows, cols]`, docs/gguf.md) with row `m` of `x`.
    MatMulGguf {
        ggml_type: GgmlType,
        rows: usize,
        cols: usize,
    },
    /// Output 0 is input 0's elements, unchanged and in the same row-major order, under the
    /// shape [`crate::Op::view_shape`] gives (Reshape, Squeeze, Unsqueeze, Flatten, Identity):
    /// a backend may share input 0's memory.
    View,
    /// `samebits::GatherGguf` over ggml rows: the dequantized weight rows picked by integer
    /// indices (negative ones count from the end), `y [indices.., cols]`.
    GatherGguf {
        ggml_type: GgmlType,
        rows: usize,
        cols: usize,
    },
    /// ONNX RotaryEmbedding (`attention`): pairs of the first `rotary_dim` features (0: the
    /// head size) of each head rotated by the cos / sin cache row of the token's position.
    Rotary {
        interleaved: bool,
        /// Heads of a 3-D input (0 for 4-D inputs).
        num_heads: usize,
        rotary_dim: usize,
    },
    /// ONNX Attention (`attention`) without softcap and without the observed-scores output:
    /// scores as canonical dots times `scale` (default `1 / sqrt(D)`), causal masking when
    /// `is_causal`, the probabilities by `softmax_row` (correctly rounded exp), and the
    /// weighted sum of V as a canonical dot over key positions; outputs Y, present_key,
    /// present_value. Heads of 3-D inputs come from `q_num_heads` / `kv_num_heads`.
    Attention {
        is_causal: bool,
        q_num_heads: usize,
        kv_num_heads: usize,
        scale: Option<f32>,
    },
}

/// The elementwise functions of [`DeviceKernel::Unary`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryKernel {
    /// A correctly rounded samebits-math function.
    Math(UnaryFn),
    /// A samebits-math activation formula.
    Activation(Activation),
    /// `-x`.
    Neg,
    /// `|x|`.
    Abs,
    /// `x > 0 ? x : (x is NaN ? x : +0)`.
    Relu,
    /// IEEE square root.
    Sqrt,
    /// `1 / x`.
    Reciprocal,
}

/// The operations of [`DeviceKernel::Binary`]: one IEEE operation, or the canonical max / min.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryKernel {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
}
