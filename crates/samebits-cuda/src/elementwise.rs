//! Elementwise operations: the correctly rounded functions and activations of samebits-math,
//! binary arithmetic with NumPy-style broadcasting (contract sections `arithmetic`,
//! `activation`, `reduce-extrema` for max/min), and casts of integer tensors to float32
//! (`cast`).

use cudarc::driver::PushKernelArg;
use samebits_ir::DType;
use samebits_ops::{BinaryKernel, UnaryKernel};

use crate::backend::{CudaBackend, blocks_for, launch_1d};
use crate::buffer::{DeviceBuffer, DeviceBytes};
use crate::device_abi::device_struct;
use crate::error::{CudaError, Result};

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

/// For a dtype the device casts to float32 (`sb_cast_to_f32`): the element width it reads
/// (bool: 0) and whether it is signed; `None` for the dtypes left to the CPU.
pub(crate) fn cast_source(dtype: DType) -> Option<(i32, i32)> {
    let width = dtype.size() as i32;
    match dtype {
        DType::Bool => Some((0, 0)),
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => Some((width, 1)),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => Some((width, 0)),
        _ => None,
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
}

impl CudaBackend {
    /// `y[i] = op(x[i])`.
    /// `count` elements of dtype `from` (an integer or bool dtype, raw bytes) converted to
    /// float32 by `sb_cast_to_f32`.
    pub fn cast_to_f32(&self, x: &DeviceBytes, from: DType, count: usize) -> Result<DeviceBuffer> {
        let (width, signed) = cast_source(from)
            .ok_or_else(|| CudaError::Invalid(format!("no device cast from {from} to float32")))?;
        if x.len() != count * from.size() {
            return Err(CudaError::Invalid(format!(
                "a cast of {count} {from} values from {} bytes",
                x.len()
            )));
        }
        let mut y = self.alloc(count)?;
        if count == 0 {
            return Ok(y);
        }
        let f = self.function("sb_cast_to_f32")?;
        let n = count as i64;
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(x.slice())
            .arg(y.slice_mut())
            .arg(&n)
            .arg(&width)
            .arg(&signed);
        // SAFETY: the kernel reads `count` elements of the checked byte length, writes `count`.
        unsafe { launch.launch(launch_1d(blocks_for(count), 0))? };
        Ok(y)
    }

    pub fn unary(&self, op: UnaryKernel, x: &DeviceBuffer) -> Result<DeviceBuffer> {
        let mut y = self.alloc(x.len())?;
        if x.is_empty() {
            return Ok(y);
        }
        // The generated kernel of the function (crate::program::unary_kernels).
        let kernel = format!("sb_unary_{}", op.name());
        let (p0, p1) = match op {
            UnaryKernel::Activation(a) => a.params(),
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
        op: BinaryKernel,
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
