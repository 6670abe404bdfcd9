//! Strided copies on the device (kernels/layout.cu): Transpose, Slice, Split and Concat as
//! [`CopyPart`]s (samebits-ops resolves them with the views its CPU evaluation uses), and the
//! broadcast operand that the default set's cuBLAS GEMM starts from. Exact moves.

use cudarc::driver::PushKernelArg;
use samebits_ops::CopyPart;

use crate::backend::{CudaBackend, blocks_for, launch_1d};
use crate::buffer::DeviceBuffer;
use crate::device_abi::device_struct;
use crate::elementwise::MAX_RANK;
use crate::error::{CudaError, Result};
use crate::gemm::DeviceMat;

device_struct! {
    /// One strided copy (kernels/layout.cu): dims and strides padded in front with unit axes.
    pub(crate) struct SbCopy {
        shape: [i64; MAX_RANK],
        src: [i64; MAX_RANK],
        dst: [i64; MAX_RANK],
        src_offset: i64,
        dst_offset: i64,
    }
}

impl SbCopy {
    /// The copy of `shape` with unit dims dropped and neighbouring dims merged where both
    /// sides are contiguous across them; `None` beyond [`MAX_RANK`] dims.
    fn new(
        shape: &[usize],
        src: &[isize],
        dst: &[isize],
        src_offset: usize,
        dst_offset: usize,
    ) -> Option<SbCopy> {
        let mut dims: Vec<(i64, i64, i64)> = Vec::new();
        for ((&n, &s), &d) in shape.iter().zip(src).zip(dst) {
            if n == 1 {
                continue;
            }
            let (n, s, d) = (n as i64, s as i64, d as i64);
            match dims.last_mut() {
                Some(last) if last.1 == s * n && last.2 == d * n => *last = (last.0 * n, s, d),
                _ => dims.push((n, s, d)),
            }
        }
        if dims.len() > MAX_RANK {
            return None;
        }
        let mut copy = SbCopy {
            shape: [1; MAX_RANK],
            src: [0; MAX_RANK],
            dst: [0; MAX_RANK],
            src_offset: src_offset as i64,
            dst_offset: dst_offset as i64,
        };
        let pad = MAX_RANK - dims.len();
        for (i, (n, s, d)) in dims.into_iter().enumerate() {
            (copy.shape[pad + i], copy.src[pad + i], copy.dst[pad + i]) = (n, s, d);
        }
        Some(copy)
    }

    fn len(&self) -> usize {
        self.shape.iter().product::<i64>() as usize
    }

    /// The lowest and highest element one side reaches (`None` for an empty copy).
    fn reach(&self, strides: &[i64; MAX_RANK], offset: i64) -> Option<(i64, i64)> {
        if self.len() == 0 {
            return None;
        }
        let (mut lo, mut hi) = (offset, offset);
        for (&n, &s) in self.shape.iter().zip(strides) {
            let r = (n - 1) * s;
            if r < 0 { lo += r } else { hi += r }
        }
        Some((lo, hi))
    }
}

/// Whether the device copies `part` (at most [`MAX_RANK`] dims once merged).
pub(crate) fn copy_supported(part: &CopyPart) -> bool {
    SbCopy::new(
        &part.shape,
        &part.src_strides,
        &part.dst_strides,
        part.src_offset,
        part.dst_offset,
    )
    .is_some()
}

impl CudaBackend {
    /// The outputs of `shapes`, each written by its [`CopyPart`]s from `inputs` (every
    /// element of an output must be written by exactly one part).
    pub fn copy_parts(
        &self,
        inputs: &[Option<&DeviceBuffer>],
        shapes: &[Vec<usize>],
        parts: &[CopyPart],
    ) -> Result<Vec<DeviceBuffer>> {
        let mut outputs = shapes
            .iter()
            .map(|s| self.alloc(s.iter().product()))
            .collect::<Result<Vec<_>>>()?;
        for part in parts {
            let copy = SbCopy::new(
                &part.shape,
                &part.src_strides,
                &part.dst_strides,
                part.src_offset,
                part.dst_offset,
            )
            .ok_or_else(|| CudaError::Invalid(format!("copy of rank {}", part.shape.len())))?;
            let src =
                inputs.get(part.input).copied().flatten().ok_or_else(|| {
                    CudaError::Invalid(format!("copy input {} missing", part.input))
                })?;
            let dst = outputs
                .get_mut(part.output)
                .ok_or_else(|| CudaError::Invalid(format!("copy output {}", part.output)))?;
            self.strided_copy(src, dst, &copy)?;
        }
        Ok(outputs)
    }

    /// The view `c` over `[batch, rows, cols]` as a dense buffer (strides may be 0).
    pub(crate) fn materialize(
        &self,
        c: DeviceMat<'_>,
        batch: usize,
        rows: usize,
        cols: usize,
    ) -> Result<DeviceBuffer> {
        let mut out = self.alloc(batch * rows * cols)?;
        let strides = [c.batch_stride, c.row_stride, c.col_stride].map(|s| s as isize);
        let dense = [rows * cols, cols, 1].map(|s| s as isize);
        let copy =
            SbCopy::new(&[batch, rows, cols], &strides, &dense, c.offset, 0).expect("three dims");
        self.strided_copy(c.buffer, &mut out, &copy)?;
        Ok(out)
    }

    fn strided_copy(
        &self,
        src: &DeviceBuffer,
        dst: &mut DeviceBuffer,
        copy: &SbCopy,
    ) -> Result<()> {
        let Some(src_reach) = copy.reach(&copy.src, copy.src_offset) else {
            return Ok(());
        };
        let dst_reach = copy.reach(&copy.dst, copy.dst_offset).expect("non-empty");
        let inside = |(lo, hi): (i64, i64), len: usize| lo >= 0 && (hi as usize) < len;
        if !inside(src_reach, src.len()) || !inside(dst_reach, dst.len()) {
            return Err(CudaError::Invalid(format!(
                "a copy reaches outside its buffers ({src_reach:?} of {}, {dst_reach:?} of {})",
                src.len(),
                dst.len()
            )));
        }
        let n = copy.len();
        let f = self.function("sb_strided_copy")?;
        let n_i = n as i64;
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(src.slice())
            .arg(dst.slice_mut())
            .arg(&n_i)
            .arg(copy);
        // SAFETY: both sides' reach was checked against the buffers.
        unsafe { launch.launch(launch_1d(blocks_for(n), 0))? };
        Ok(())
    }
}
