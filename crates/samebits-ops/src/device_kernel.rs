//! [`DeviceKernel`]: what an op computes, named by the reproducible kernel that computes it, so
//! that a backend other than the CPU interpreter (samebits-cuda's executor) runs the same
//! semantics without parsing the node's attributes a second time.
//!
//! An op returns one from [`crate::Op::device_kernel`] when its evaluation on float32 tensors is
//! exactly that kernel's contract section (docs/contract.md); ops with no such kernel return
//! `None` and other backends fall back to [`crate::Op::eval`]. The variants carry the op's parsed
//! attributes; shapes and dtypes are checked by the backend at run time (anything but float32
//! falls back).
//!
//! Ops whose device work depends on the input shapes (Conv, `samebits::ConvChain`, pooling,
//! Resize, the data-movement ops, BatchNormalization, `samebits::ElementwiseChain`) name
//! [`DeviceKernel::Shaped`] and resolve a [`ShapedKernel`] per run through
//! [`crate::Op::shaped_kernel`]: the same geometry code the CPU evaluation uses, so CPU and GPU
//! share one definition of shapes, pads and taps.
//!
//! An op may also bring its own CUDA kernel ([`ShapedKernel::Source`]): a `.cu` file beside
//! its family, registered with [`crate::registry::Registry::register_kernel_source`], which
//! samebits-cuda compiles into its program and launches through one generic wrapper, one
//! thread per output element. Whatever needs shapes or attributes (coordinate tables,
//! strides, flags) is resolved here, by the CPU's own code, and handed over as
//! [`SourceKernel::tables`], [`SourceKernel::ints`] and [`SourceKernel::floats`]; the kernel
//! only does the arithmetic, in the op's contract order.

use samebits_ggml::GgmlType;
use samebits_kernels::{ConvGeometry, ConvTransposeGeometry, PoolGeometry, PoolKind, ReduceKind};
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
    /// Cast to float32 of input 0 when it is an integer or bool tensor (read as raw bytes; a
    /// backend leaves other dtypes to the CPU): each element rounded to nearest even once
    /// (contract `cast`).
    CastToF32,
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
    /// `samebits::RaggedAttention` (`attention.rs`): [`DeviceKernel::Attention`] (these
    /// attributes) of each sequence's rows over its own past keys and values (inputs 4 and 5
    /// are sequences of one cache per sequence; input 3 the rows per sequence). The device runs
    /// each sequence's attention as the lone step's launch, so its bits never depend on the
    /// batch.
    RaggedAttention {
        is_causal: bool,
        q_num_heads: usize,
        kv_num_heads: usize,
        scale: Option<f32>,
    },
    /// `samebits::SiluGate` (`decoder_fused.rs`): `(g * sigmoid(g)) * u` of inputs g and u,
    /// the three roundings of the Sigmoid and two Mul ops it replaces (`elementwise-fusion`);
    /// inputs of one shape only (others fall back).
    SiluGate,
    /// `samebits::MatMulGgufAdd` (`decoder_fused.rs`): [`DeviceKernel::MatMulGguf`] of inputs 0
    /// and 1, then the Add of input 2 to each finished dot (one rounding; IEEE addition
    /// commutes, so either operand order); input 2 of the product's shape only.
    MatMulGgufAdd {
        ggml_type: GgmlType,
        rows: usize,
        cols: usize,
    },
    /// `samebits::GgufProducts` (`decoder_fused.rs`): a row norm, products of the normalized
    /// rows and their epilogue, see [`GgufProductsKernel`].
    GgufProducts(GgufProductsKernel),
    /// `samebits::AttentionProduct` (`decoder_fused.rs`): [`DeviceKernel::Attention`] (these
    /// attributes) of inputs q, k, v, past_key, past_value (0 to 4; no mask), then
    /// [`DeviceKernel::MatMulGgufAdd`] (`ggml_type`, `rows`, `cols`) of its output Y with the
    /// weights of input 5 and the residual term of input 6; outputs the sum, present_key and
    /// present_value.
    AttentionProduct {
        is_causal: bool,
        q_num_heads: usize,
        kv_num_heads: usize,
        scale: Option<f32>,
        ggml_type: GgmlType,
        rows: usize,
        cols: usize,
    },
    /// The op's [`ShapedKernel`] for the actual input shapes comes from
    /// [`crate::Op::shaped_kernel`].
    Shaped,
}

/// `samebits::GgufProducts`: `RMSNormalization` over the last axis of input 0 with the scale
/// of input 1 (`epsilon`), then [`DeviceKernel::MatMulGguf`] of the normalized rows with each
/// of `count` matrices (inputs `2..2 + count`, one `ggml_type` and width `cols`, `rows[j]`
/// rows each), then either the SiLU gate `(p0 * sigmoid(p0)) * p1` of the two products
/// (`gate`, one output) or, for each product `j` with `rotary[j]`, the interleaved
/// RotaryEmbedding (`num_heads`, `rotary_embedding_dim`) with the cos and sin tables of the
/// two inputs after the matrices; otherwise one output per product, in matrix order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GgufProductsKernel {
    pub epsilon: f32,
    pub ggml_type: GgmlType,
    pub cols: usize,
    pub count: usize,
    pub rows: [usize; GGUF_PRODUCTS_MAX],
    /// Per product, its rotary's `(num_heads, rotary_embedding_dim)`, if it has one.
    pub rotary: [Option<(usize, usize)>; GGUF_PRODUCTS_MAX],
    pub gate: bool,
}

/// The most products one [`GgufProductsKernel`] computes.
pub const GGUF_PRODUCTS_MAX: usize = 3;

/// A device computation with every shape-dependent quantity resolved (module docs). Inputs
/// not named by [`ShapedKernel::reads_on_device`] are read on the host while resolving.
#[derive(Clone, Debug, PartialEq)]
pub enum ShapedKernel {
    /// Conv (contract `conv`): inputs X, W and the optional bias B.
    Conv(ConvGeometry),
    /// ConvTranspose (contract `conv-transpose`): inputs X, W and the optional bias B.
    ConvTranspose(ConvTransposeGeometry),
    /// MaxPool (output Y only) and AveragePool (contract `pool`).
    Pool(PoolGeometry, PoolKind),
    /// GlobalMaxPool / GlobalAveragePool: `planes` planes of `len` elements into an output of
    /// `shape` (contract `pool`).
    GlobalPool {
        kind: PoolKind,
        planes: usize,
        len: usize,
        shape: Vec<usize>,
    },
    /// Resize (contract `resize`): input X of `in_shape`, output of `out_shape`.
    Resize(ResizeTaps),
    /// Data movement (Transpose, Slice, Split, Concat): every output element is one input
    /// element, no arithmetic.
    Copy {
        /// The shape of each output.
        outputs: Vec<Vec<usize>>,
        parts: Vec<CopyPart>,
    },
    /// `samebits::ElementwiseChain`, and BatchNormalization in inference as a one-step chain
    /// (contract `elementwise-fusion`, `normalization`).
    Chain(ChainKernel),
    /// `samebits::ConvChain`: the convolution `conv` ([`ShapedKernel::Conv`] or
    /// [`ShapedKernel::ConvTranspose`], reading the node's first `conv_inputs` inputs), then
    /// `chain` with the convolution's output as its input `mapped` and the node's other inputs,
    /// in order, as its other inputs.
    ConvChain {
        conv: Box<ShapedKernel>,
        conv_inputs: usize,
        chain: ChainKernel,
        mapped: usize,
    },
    /// The op's own kernel from its registered source (module docs).
    Source(SourceKernel),
    /// ReduceSum / Mean / Max / Min / Prod / SumSquare over adjacent axes (contract
    /// `reduce-axes`, `reduce-mean`): input 0 viewed as `[outer, len, inner]` reduced over the
    /// middle axis in the canonical order, each result then divided by `divisor` (ReduceMean's
    /// count), into an output of `shape`.
    Reduce {
        kind: ReduceKind,
        outer: usize,
        len: usize,
        inner: usize,
        divisor: Option<f32>,
        shape: Vec<usize>,
    },
}

/// Integers a [`SourceKernel`] table holds (its tables are float32) are exact below this: an
/// op whose indices could reach it leaves the step to the CPU.
pub const SOURCE_TABLE_EXACT: usize = 1 << 24;

/// Rows one warp of the recurrent layers' device kernel (`kernels/recurrent.cu`) reduces at
/// once (one per lane), and the columns of the pieces of them it stages through shared memory
/// (a reduction tile is a whole number of pieces); the program defines them as
/// `SB_RECURRENT_ROWS` and `SB_RECURRENT_COLS`.
pub const RECURRENT_STAGE_ROWS: usize = 32;
pub const RECURRENT_STAGE_COLS: usize = 16;

/// The most outputs a [`SourceKernel`] writes.
pub const SOURCE_KERNEL_MAX_OUTPUTS: usize = 3;
/// The most device buffers (inputs, then tables) a [`SourceKernel`] reads.
pub const SOURCE_KERNEL_MAX_BUFFERS: usize = 8;
/// The most integer parameters of a [`SourceKernel`].
pub const SOURCE_KERNEL_MAX_INTS: usize = 16;
/// The most float parameters of a [`SourceKernel`].
pub const SOURCE_KERNEL_MAX_FLOATS: usize = 8;

/// An op's own device kernel. The kernel `entry` (a registered source's `extern "C"
/// __global__` function) takes the device ABI's `SbSourceKernel` by value: `buffers` holds the
/// float32 node inputs named by `inputs`, in that order, then the `tables`; `out` the outputs;
/// `count` the element count of output 0 ([`SourceLaunch::PerElement`]) or the number of
/// blocks ([`SourceLaunch::Blocks`]); `ints` and `floats` the parameters, zero-padded.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceKernel {
    pub entry: &'static str,
    /// The node inputs the kernel reads, as its first buffers.
    pub inputs: Vec<usize>,
    /// Host-resolved float32 tables, the buffers after the inputs.
    pub tables: Vec<Vec<f32>>,
    pub ints: Vec<i64>,
    pub floats: Vec<f32>,
    /// The outputs' shapes, in the node's output order.
    pub outputs: Vec<Vec<usize>>,
    pub launch: SourceLaunch,
}

/// How a [`SourceKernel`] is launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceLaunch {
    /// One thread per element of output 0, any grid (the kernel strides over the grid).
    PerElement,
    /// `blocks` blocks of `threads` threads (a multiple of 32, at most 1024), each with
    /// `shared` bytes of dynamic shared memory: kernels whose threads cooperate (a recurrence).
    Blocks {
        blocks: usize,
        threads: usize,
        shared: usize,
    },
}

impl SourceKernel {
    /// A [`SourceLaunch::PerElement`] kernel writing one output of shape `output`.
    pub fn per_element(
        entry: &'static str,
        inputs: Vec<usize>,
        tables: Vec<Vec<f32>>,
        (ints, floats): (Vec<i64>, Vec<f32>),
        output: Vec<usize>,
    ) -> SourceKernel {
        SourceKernel {
            entry,
            inputs,
            tables,
            ints,
            floats,
            outputs: vec![output],
            launch: SourceLaunch::PerElement,
        }
    }

    /// Whether the kernel's parameters fit the device ABI's fixed arrays.
    pub fn fits(&self) -> bool {
        self.inputs.len() + self.tables.len() <= SOURCE_KERNEL_MAX_BUFFERS
            && (1..=SOURCE_KERNEL_MAX_OUTPUTS).contains(&self.outputs.len())
            && self.ints.len() <= SOURCE_KERNEL_MAX_INTS
            && self.floats.len() <= SOURCE_KERNEL_MAX_FLOATS
    }
}

impl ShapedKernel {
    /// The node input that chain input `c` (not `mapped`) of a [`ShapedKernel::ConvChain`]
    /// reads: the node's inputs are the convolution's `conv_inputs`, then the chain's others.
    pub fn conv_chain_input(conv_inputs: usize, mapped: usize, c: usize) -> usize {
        conv_inputs + c - usize::from(c > mapped)
    }

    /// Whether input `i` is read on the device (the others were read on the host already).
    pub fn reads_on_device(&self, i: usize) -> bool {
        match self {
            ShapedKernel::Conv(_) | ShapedKernel::ConvTranspose(_) => i <= 2,
            ShapedKernel::Pool(..)
            | ShapedKernel::GlobalPool { .. }
            | ShapedKernel::Resize(_)
            | ShapedKernel::Reduce { .. } => i == 0,
            ShapedKernel::Copy { parts, .. } => parts.iter().any(|p| p.input == i),
            ShapedKernel::Source(kernel) => kernel.inputs.contains(&i),
            ShapedKernel::Chain(chain) => i < chain.layouts.len(),
            ShapedKernel::ConvChain {
                conv,
                conv_inputs,
                chain,
                ..
            } => match i < *conv_inputs {
                true => conv.reads_on_device(i),
                false => i + 1 < conv_inputs + chain.layouts.len(),
            },
        }
    }

    /// The shapes of the outputs the kernel writes.
    pub fn output_shapes(&self) -> Vec<Vec<usize>> {
        let nc = |batch: usize, channels: usize, spatial: Vec<usize>| {
            [batch, channels].into_iter().chain(spatial).collect()
        };
        match self {
            ShapedKernel::Conv(g) => vec![nc(g.batch, g.out_channels, g.out_spatial())],
            ShapedKernel::ConvTranspose(g) => vec![nc(g.batch, g.out_channels, g.out_spatial())],
            ShapedKernel::Pool(g, _) => vec![nc(g.batch, g.channels, g.out_spatial())],
            ShapedKernel::GlobalPool { shape, .. } | ShapedKernel::Reduce { shape, .. } => {
                vec![shape.clone()]
            }
            ShapedKernel::Resize(taps) => vec![taps.out_shape.clone()],
            ShapedKernel::Copy { outputs, .. } => outputs.clone(),
            ShapedKernel::Source(kernel) => kernel.outputs.clone(),
            ShapedKernel::Chain(chain) | ShapedKernel::ConvChain { chain, .. } => {
                vec![chain.shape.clone()]
            }
        }
    }
}

/// The shape of input `i` among a [`crate::Op::shaped_kernel`] call's shapes, or an error.
pub(crate) fn input_shape<'a>(
    shapes: &[Option<&'a [usize]>],
    i: usize,
) -> crate::Result<&'a [usize]> {
    shapes
        .get(i)
        .copied()
        .flatten()
        .ok_or_else(|| crate::OpError::Invalid(format!("input {i} has no known shape")))
}

/// One axis' taps: for each output coordinate, its input taps as (element offset in the input,
/// weight), or `None` where the output is the extrapolation value.
pub type AxisTaps = Vec<Option<Vec<(usize, f32)>>>;

/// Resize's taps (contract `resize`): per axis, the [`AxisTaps`] of every output coordinate.
#[derive(Clone, Debug, PartialEq)]
pub struct ResizeTaps {
    pub in_shape: Vec<usize>,
    pub out_shape: Vec<usize>,
    pub axes: Vec<AxisTaps>,
    pub extrapolation: f32,
}

/// One strided copy of [`ShapedKernel::Copy`]: element `idx` (row-major over `shape`) of input
/// `input` at `src_offset + Σ idx[d] * src_strides[d]` goes to output `output` at
/// `dst_offset + Σ idx[d] * dst_strides[d]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyPart {
    pub input: usize,
    pub output: usize,
    pub shape: Vec<usize>,
    pub src_offset: usize,
    pub src_strides: Vec<isize>,
    pub dst_offset: usize,
    pub dst_strides: Vec<isize>,
}

/// A chain of per-element operations (contract `elementwise-fusion`): for each output element
/// of `shape`, the steps in order, each the single IEEE operation of its op.
#[derive(Clone, Debug, PartialEq)]
pub struct ChainKernel {
    pub shape: Vec<usize>,
    /// How each chain input covers the output.
    pub layouts: Vec<ChainLayout>,
    pub steps: Vec<ChainStep>,
}

/// How a chain input covers the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainLayout {
    /// The output's shape.
    Full,
    /// One element for all outputs.
    Scalar,
    /// One element per channel (axis 1 of the output).
    Channel,
    /// One element per row of the output's last axis: the output's shape with the last dim 1
    /// (a per-token mean or norm, `[.., T, 1]`).
    Row,
    /// One element per position along the output's last axis: `[.., 1, D]` (a per-feature
    /// scale or bias, `[D]`).
    Last,
}

/// One step of a [`ChainKernel`].
#[derive(Clone, Debug, PartialEq)]
pub struct ChainStep {
    pub op: ChainOp,
    pub operands: Vec<ChainOperand>,
}

/// The operation of a chain step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ChainOp {
    /// One IEEE operation of its two operands.
    Binary(BinaryKernel),
    /// `x > 0 ? x : (x is NaN ? x : +0)`.
    Relu,
    /// `max(x, lo)` then `min(., hi)` (reduce-extrema), each bound optional.
    Clip,
    /// `((x - mean) * rstd) * scale + bias`, `rstd = 1 / sqrt(var + epsilon)`; operands x,
    /// scale, bias, mean, var.
    BatchNorm { epsilon: f32 },
    /// The samebits-math activation (Sigmoid, HardSigmoid, HardSwish) of one operand.
    Activation(Activation),
}

/// Where a chain step's operand comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainOperand {
    /// Chain input `i`.
    Input(usize),
    /// The result of step `j`.
    Temp(usize),
    /// An omitted optional input (Clip without a bound).
    Absent,
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

impl UnaryKernel {
    /// The one-operation functions (no samebits-math call).
    pub const SIMPLE: [UnaryKernel; 5] = [
        UnaryKernel::Neg,
        UnaryKernel::Abs,
        UnaryKernel::Relu,
        UnaryKernel::Sqrt,
        UnaryKernel::Reciprocal,
    ];

    /// Every unary kernel (activations with their ONNX default parameters).
    pub fn all() -> Vec<UnaryKernel> {
        UnaryFn::IMPLEMENTED
            .iter()
            .map(|&f| UnaryKernel::Math(f))
            .chain(Activation::ALL.iter().map(|&a| UnaryKernel::Activation(a)))
            .chain(UnaryKernel::SIMPLE)
            .collect()
    }

    /// The name of the function or formula (samebits-cuda's kernel is `sb_unary_<name>`).
    pub fn name(self) -> &'static str {
        match self {
            UnaryKernel::Math(f) => f.name(),
            UnaryKernel::Activation(a) => a.name(),
            UnaryKernel::Neg => "neg",
            UnaryKernel::Abs => "abs",
            UnaryKernel::Relu => "relu",
            UnaryKernel::Sqrt => "ieee_sqrt",
            UnaryKernel::Reciprocal => "reciprocal",
        }
    }
}

/// The operations of [`DeviceKernel::Binary`]: one IEEE operation, or the canonical max / min
/// (contract `reduce-extrema`). The order is the device operation code (`op as i32`: `sb_binary`
/// of samebits-cuda's kernels/elementwise.cu, and chain steps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryKernel {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    /// samebits-math's correctly rounded `pow` (contract: activation, Pow).
    Pow,
}

impl BinaryKernel {
    /// Every binary kernel.
    pub const ALL: [BinaryKernel; 7] = [
        BinaryKernel::Add,
        BinaryKernel::Sub,
        BinaryKernel::Mul,
        BinaryKernel::Div,
        BinaryKernel::Max,
        BinaryKernel::Min,
        BinaryKernel::Pow,
    ];
}
