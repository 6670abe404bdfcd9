//! Row operations on device buffers: reductions along an axis (`reduce-axes`), softmax and
//! log-softmax (`softmax`), LayerNorm and RMSNorm (`normalization`): the kernels of the
//! samebits-ops ops with the same names, and tested against them.
//! Canonical sums run tile partials in parallel and fold them in order (kernels/reduce.cu).

use cudarc::driver::PushKernelArg;
use samebits_kernels::{REDUCTION_TILE, ReduceKind};

use crate::backend::{BLOCK, CudaBackend, blocks_for, launch_1d};
use crate::buffer::DeviceBuffer;
use crate::error::{CudaError, Result};

/// Most tile partials a row kernel keeps in shared memory (48 KiB).
const MAX_ROW_TILES: usize = 12 * 1024;

/// The code of a reduction in the kernels (`SB_REDUCE_*` of the device ABI).
pub(crate) fn kind_code(kind: ReduceKind) -> i32 {
    match kind {
        ReduceKind::Sum => 0,
        ReduceKind::SumSquares => 1,
        ReduceKind::Prod => 2,
        ReduceKind::Max => 3,
        ReduceKind::Min => 4,
    }
}

/// Whether the row kernels (softmax, norms) take rows of `len` elements.
pub(crate) fn row_len_supported(len: usize) -> bool {
    len > 0 && row_shared_bytes(len).is_ok()
}

/// Dynamic shared bytes of a row kernel over rows of `len`, or an error if too long.
fn row_shared_bytes(len: usize) -> Result<u32> {
    let tiles = len.div_ceil(REDUCTION_TILE);
    if tiles > MAX_ROW_TILES || len > i32::MAX as usize {
        return Err(CudaError::Invalid(format!(
            "rows of {len} elements exceed the row kernels' {} elements",
            MAX_ROW_TILES * REDUCTION_TILE
        )));
    }
    Ok((tiles * 4) as u32)
}

impl CudaBackend {
    /// Reduces `x` viewed as `[outer, len, inner]` over the middle axis; output `[outer, inner]`.
    /// Same bits as `samebits_kernels::reduce_f32`.
    pub fn reduce(
        &self,
        kind: ReduceKind,
        x: &DeviceBuffer,
        outer: usize,
        len: usize,
        inner: usize,
    ) -> Result<DeviceBuffer> {
        if x.len() != outer * len * inner || len > i32::MAX as usize {
            return Err(CudaError::Invalid(
                "reduce: buffer length differs from the shape".into(),
            ));
        }
        let mut y = self.alloc(outer * inner)?;
        if y.is_empty() {
            return Ok(y);
        }
        let code = kind_code(kind);
        let len_i = len as i32;
        match row_shared_bytes(len) {
            // A block per row once rows are long enough to be worth splitting into tiles.
            Ok(shared) if inner == 1 && len > REDUCTION_TILE => {
                let f = self.function("sb_reduce_rows")?;
                let mut launch = self.stream().launch_builder(&f);
                launch
                    .arg(x.slice())
                    .arg(y.slice_mut())
                    .arg(&len_i)
                    .arg(&code);
                // SAFETY: one block per row of len elements; y holds outer values.
                unsafe { launch.launch(launch_1d(outer as u32, shared))? };
            }
            _ => {
                let f = self.function("sb_reduce_axis_per_thread")?;
                let (outer_i, inner_i) = (outer as i64, inner as i64);
                let mut launch = self.stream().launch_builder(&f);
                launch
                    .arg(x.slice())
                    .arg(y.slice_mut())
                    .arg(&outer_i)
                    .arg(&len_i)
                    .arg(&inner_i)
                    .arg(&code);
                // SAFETY: one thread per output, reading its own column of x.
                unsafe {
                    launch.launch(launch_1d(
                        (outer * inner).div_ceil(BLOCK as usize) as u32,
                        0,
                    ))?
                };
            }
        }
        Ok(y)
    }

    /// Each element of `y` divided by `d` (IEEE division): ReduceMean's and GlobalAveragePool's
    /// count.
    pub fn divide_by(&self, y: &mut DeviceBuffer, d: f32) -> Result<()> {
        if y.is_empty() {
            return Ok(());
        }
        let f = self.function("sb_divide_by")?;
        let (n, blocks) = (y.len() as i64, blocks_for(y.len()));
        let mut launch = self.stream().launch_builder(&f);
        launch.arg(y.slice_mut()).arg(&n).arg(&d);
        // SAFETY: y holds n floats, each read and written by one thread.
        unsafe { launch.launch(launch_1d(blocks, 0))? };
        Ok(())
    }

    /// Softmax (or log-softmax) of each contiguous row of `len` elements.
    pub fn softmax(&self, x: &DeviceBuffer, len: usize, log: bool) -> Result<DeviceBuffer> {
        let rows = rows_of(x, len)?;
        let shared = row_shared_bytes(len)?;
        let mut y = self.alloc(x.len())?;
        if rows == 0 {
            return Ok(y);
        }
        let f = self.function("sb_softmax_rows")?;
        let (len_i, log_i) = (len as i32, i32::from(log));
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(x.slice())
            .arg(y.slice_mut())
            .arg(&len_i)
            .arg(&log_i);
        // SAFETY: one block per row of len elements of x and y.
        unsafe { launch.launch(launch_1d(rows as u32, shared))? };
        Ok(y)
    }

    /// LayerNorm of each contiguous row of `len = scale.len()` elements; returns y and the
    /// per-row `[mean, rstd]` pairs.
    pub fn layer_norm(
        &self,
        x: &DeviceBuffer,
        scale: &DeviceBuffer,
        bias: Option<&DeviceBuffer>,
        eps: f32,
    ) -> Result<(DeviceBuffer, DeviceBuffer)> {
        let len = scale.len();
        let rows = rows_of(x, len)?;
        if bias.is_some_and(|b| b.len() != len) {
            return Err(CudaError::Invalid(
                "layer_norm: bias and scale lengths differ".into(),
            ));
        }
        let shared = row_shared_bytes(len)?;
        let mut y = self.alloc(x.len())?;
        let mut stats = self.alloc(2 * rows)?;
        if rows == 0 {
            return Ok((y, stats));
        }
        let f = self.function("sb_layer_norm_rows")?;
        let (len_i, has_bias) = (len as i32, i32::from(bias.is_some()));
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(x.slice())
            .arg(scale.slice())
            .arg(bias.unwrap_or(scale).slice())
            .arg(&has_bias)
            .arg(y.slice_mut())
            .arg(stats.slice_mut())
            .arg(&len_i)
            .arg(&eps);
        // SAFETY: one block per row of len elements; stats holds 2 per row.
        unsafe { launch.launch(launch_1d(rows as u32, shared))? };
        Ok((y, stats))
    }

    /// RMSNorm of each contiguous row of `len = scale.len()` elements.
    pub fn rms_norm(
        &self,
        x: &DeviceBuffer,
        scale: &DeviceBuffer,
        eps: f32,
    ) -> Result<DeviceBuffer> {
        let len = scale.len();
        let rows = rows_of(x, len)?;
        let shared = row_shared_bytes(len)?;
        let mut y = self.alloc(x.len())?;
        if rows == 0 {
            return Ok(y);
        }
        let f = self.function("sb_rms_norm_rows")?;
        let len_i = len as i32;
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(x.slice())
            .arg(scale.slice())
            .arg(y.slice_mut())
            .arg(&len_i)
            .arg(&eps);
        // SAFETY: one block per row of len elements.
        unsafe { launch.launch(launch_1d(rows as u32, shared))? };
        Ok(y)
    }
}

/// Number of rows of `len` in `x`, or an error if `len` does not divide its length.
fn rows_of(x: &DeviceBuffer, len: usize) -> Result<usize> {
    if len == 0 || !x.len().is_multiple_of(len) {
        return Err(CudaError::Invalid(format!(
            "a buffer of {} elements is not made of rows of {len}",
            x.len()
        )));
    }
    Ok(x.len() / len)
}
