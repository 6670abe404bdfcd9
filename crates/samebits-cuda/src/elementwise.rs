//! Elementwise operations: the correctly rounded functions and activations of samebits-math,
//! and binary arithmetic with NumPy-style broadcasting (contract sections `arithmetic`,
//! `activation`, `reduce-extrema` for max/min).

use cudarc::driver::PushKernelArg;
use samebits_kernels::{canonical_max, canonical_min};
use samebits_math::{Activation, UnaryFn};

use crate::backend::{CudaBackend, blocks_for, launch_1d};
use crate::buffer::DeviceBuffer;
use crate::device_abi::device_struct;
use crate::error::{CudaError, Result};

/// A unary elementwise function.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    /// A correctly rounded samebits-math function.
    Math(UnaryFn),
    /// A composite activation formula of samebits-math.
    Activation(Activation),
    /// `-x`.
    Neg,
    /// `|x|`.
    Abs,
    /// `x > 0 ? x : (x is NaN ? x : +0)`, the ONNX Relu of samebits-ops.
    Relu,
    /// IEEE square root.
    Sqrt,
    /// `1 / x`.
    Reciprocal,
}

impl UnaryOp {
    /// The one-operation functions (no samebits-math call).
    pub const SIMPLE: [UnaryOp; 5] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Relu,
        UnaryOp::Sqrt,
        UnaryOp::Reciprocal,
    ];

    /// Every unary op (activations with their ONNX default parameters).
    pub fn all() -> Vec<UnaryOp> {
        UnaryFn::IMPLEMENTED
            .iter()
            .map(|&f| UnaryOp::Math(f))
            .chain(Activation::ALL.iter().map(|&a| UnaryOp::Activation(a)))
            .chain(UnaryOp::SIMPLE)
            .collect()
    }

    /// The name of the function or formula (its kernel is `sb_unary_<name>`).
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Math(f) => f.name(),
            UnaryOp::Activation(a) => a.name(),
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Relu => "relu",
            UnaryOp::Sqrt => "ieee_sqrt",
            UnaryOp::Reciprocal => "reciprocal",
        }
    }

    /// The value at `x` on the CPU (the oracle).
    pub fn eval(self, x: f32) -> f32 {
        match self {
            UnaryOp::Math(f) => f.eval(x),
            UnaryOp::Activation(a) => a.eval(x),
            UnaryOp::Neg => -x,
            UnaryOp::Abs => x.abs(),
            UnaryOp::Relu if x > 0.0 || x.is_nan() => x,
            UnaryOp::Relu => 0.0,
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Reciprocal => 1.0 / x,
        }
    }
}

/// A binary elementwise operation; the order is the kernel's operation code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    /// `max` of contract section `reduce-extrema`.
    Max,
    /// `min` of contract section `reduce-extrema`.
    Min,
}

impl BinaryOp {
    /// Every binary op.
    pub const ALL: [BinaryOp; 6] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Max,
        BinaryOp::Min,
    ];

    /// The value on the CPU (the oracle): one IEEE operation.
    pub fn eval(self, a: f32, b: f32) -> f32 {
        match self {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Max => canonical_max(a, b),
            BinaryOp::Min => canonical_min(a, b),
        }
    }
}

/// Highest rank of a broadcast binary operation.
pub const MAX_RANK: usize = 6;

device_struct! {
    /// The layout of a broadcast binary operation: output dims (row-major, last fastest) and
    /// each operand's element strides over them (0 along broadcast axes), all padded in front
    /// to [`MAX_RANK`] axes (unused leading axes have dim 1).
    pub struct BroadcastLayout as SbBroadcast {
        pub dims: [i64; MAX_RANK],
        pub a_strides: [i64; MAX_RANK],
        pub b_strides: [i64; MAX_RANK],
    }
}

impl BroadcastLayout {
    /// NumPy broadcasting of two dense row-major shapes.
    pub fn new(a_shape: &[usize], b_shape: &[usize]) -> Result<Self> {
        let rank = a_shape.len().max(b_shape.len());
        if rank > MAX_RANK {
            return Err(CudaError::Invalid(format!(
                "broadcast of rank {rank} (at most {MAX_RANK})"
            )));
        }
        let padded = |shape: &[usize]| {
            let mut dims = [1usize; MAX_RANK];
            dims[MAX_RANK - shape.len()..].copy_from_slice(shape);
            dims
        };
        let (a, b) = (padded(a_shape), padded(b_shape));
        let mut layout = BroadcastLayout {
            dims: [1; MAX_RANK],
            a_strides: [0; MAX_RANK],
            b_strides: [0; MAX_RANK],
        };
        let (mut a_stride, mut b_stride) = (1i64, 1i64);
        for d in (0..MAX_RANK).rev() {
            let out = match (a[d], b[d]) {
                (x, y) if x == y => x,
                (1, y) => y,
                (x, 1) => x,
                (x, y) => {
                    return Err(CudaError::Invalid(format!(
                        "shapes {a_shape:?} and {b_shape:?} do not broadcast (axis sizes {x} and {y})"
                    )));
                }
            };
            layout.dims[d] = out as i64;
            layout.a_strides[d] = if a[d] == 1 { 0 } else { a_stride };
            layout.b_strides[d] = if b[d] == 1 { 0 } else { b_stride };
            a_stride *= a[d] as i64;
            b_stride *= b[d] as i64;
        }
        Ok(layout)
    }

    /// The output's dims (without the padding axes of a lower rank).
    pub fn output_shape(&self, rank: usize) -> Vec<usize> {
        self.dims[MAX_RANK - rank..]
            .iter()
            .map(|&d| d as usize)
            .collect()
    }

    /// Number of output elements.
    pub fn len(&self) -> usize {
        self.dims.iter().product::<i64>() as usize
    }

    /// Whether the output is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The operands' element indices of output element `i`.
    pub fn operand_indices(&self, i: usize) -> (usize, usize) {
        let (mut rest, mut ia, mut ib) = (i as i64, 0i64, 0i64);
        for d in (0..MAX_RANK).rev() {
            let coord = rest % self.dims[d];
            rest /= self.dims[d];
            ia += coord * self.a_strides[d];
            ib += coord * self.b_strides[d];
        }
        (ia as usize, ib as usize)
    }
}

/// CPU oracle of [`CudaBackend::binary`].
pub fn binary_cpu(op: BinaryOp, a: &[f32], b: &[f32], layout: &BroadcastLayout) -> Vec<f32> {
    (0..layout.len())
        .map(|i| {
            let (ia, ib) = layout.operand_indices(i);
            op.eval(a[ia], b[ib])
        })
        .collect()
}

impl CudaBackend {
    /// `y[i] = op(x[i])`.
    pub fn unary(&self, op: UnaryOp, x: &DeviceBuffer) -> Result<DeviceBuffer> {
        let mut y = self.alloc(x.len())?;
        if x.is_empty() {
            return Ok(y);
        }
        // The generated kernel of the function (crate::program::unary_kernels).
        let kernel = format!("sb_unary_{}", op.name());
        let (p0, p1) = match op {
            UnaryOp::Activation(a) => crate::program::activation_params(a),
            _ => (0.0, 0.0),
        };
        let f = self.function(&kernel)?;
        let n = x.len() as i64;
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(x.slice())
            .arg(y.slice_mut())
            .arg(&n)
            .arg(&p0)
            .arg(&p1);
        // SAFETY: the kernel reads and writes n elements of buffers holding at least n.
        unsafe { launch.launch(launch_1d(blocks_for(x.len()), 0))? };
        Ok(y)
    }

    /// `y = op(a, b)` with NumPy broadcasting of the dense row-major shapes; returns the output
    /// and its shape.
    pub fn binary(
        &self,
        op: BinaryOp,
        a: &DeviceBuffer,
        a_shape: &[usize],
        b: &DeviceBuffer,
        b_shape: &[usize],
    ) -> Result<(DeviceBuffer, Vec<usize>)> {
        let layout = BroadcastLayout::new(a_shape, b_shape)?;
        let shape_len = |s: &[usize]| s.iter().product::<usize>();
        if a.len() != shape_len(a_shape) || b.len() != shape_len(b_shape) {
            return Err(CudaError::Invalid(
                "binary: buffer length differs from its shape".into(),
            ));
        }
        let mut y = self.alloc(layout.len())?;
        let shape = layout.output_shape(a_shape.len().max(b_shape.len()));
        if layout.is_empty() {
            return Ok((y, shape));
        }
        let f = self.function("sb_binary")?;
        let n = layout.len() as i64;
        let code = op as i32;
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(a.slice())
            .arg(b.slice())
            .arg(y.slice_mut())
            .arg(&n)
            .arg(&code)
            .arg(&layout);
        // SAFETY: the layout's indices stay inside a and b (checked lengths), y holds n.
        unsafe { launch.launch(launch_1d(blocks_for(layout.len()), 0))? };
        Ok((y, shape))
    }
}
