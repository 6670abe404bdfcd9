//! Products with GGUF block-quantized weights on the device (`samebits::MatMulGguf`):
//! [`CudaBackend::gguf_matmul`] runs `kernels/gguf.cu`, which dequantizes with the formulas of
//! docs/gguf.md and computes each output in the canonical order, the bits of
//! `samebits_gguf::dot_q_f32` on the CPU. [`CudaBackend::gguf_gather`] dequantizes picked rows
//! (`samebits::GatherGguf`, the embedding lookup).

use cudarc::driver::{LaunchConfig, PushKernelArg};
use samebits_gguf::GgmlType;

use crate::backend::{BLOCK, CudaBackend};
use crate::buffer::{DeviceBuffer, DeviceBytes};
use crate::error::{CudaError, Result};

/// The kernel of a weight type, if the device dequantizes it.
fn kernel_of(ggml_type: GgmlType) -> Option<&'static str> {
    Some(match ggml_type {
        GgmlType::F32 => "sb_gguf_matvec_f32",
        GgmlType::F16 => "sb_gguf_matvec_f16",
        GgmlType::Q4_0 => "sb_gguf_matvec_q4_0",
        GgmlType::Q4_1 => "sb_gguf_matvec_q4_1",
        GgmlType::Q8_0 => "sb_gguf_matvec_q8_0",
        _ => return None,
    })
}

/// The row-gather kernel of a weight type.
fn gather_kernel_of(ggml_type: GgmlType) -> Option<&'static str> {
    Some(match ggml_type {
        GgmlType::F32 => "sb_gguf_gather_f32",
        GgmlType::F16 => "sb_gguf_gather_f16",
        GgmlType::Q4_0 => "sb_gguf_gather_q4_0",
        GgmlType::Q4_1 => "sb_gguf_gather_q4_1",
        GgmlType::Q8_0 => "sb_gguf_gather_q8_0",
        _ => return None,
    })
}

/// Whether [`CudaBackend::gguf_matmul`] and [`CudaBackend::gguf_gather`] take weights of this
/// type.
pub fn gguf_supported(ggml_type: GgmlType) -> bool {
    kernel_of(ggml_type).is_some()
}

impl CudaBackend {
    /// `y [m, rows] = x [m, cols] · Wᵀ` for the `[rows, cols]` GGUF matrix `w` of `ggml_type`.
    pub fn gguf_matmul(
        &self,
        ggml_type: GgmlType,
        rows: usize,
        cols: usize,
        w: &DeviceBytes,
        x: &DeviceBuffer,
    ) -> Result<DeviceBuffer> {
        let name = kernel_of(ggml_type)
            .ok_or_else(|| CudaError::Invalid(format!("no GGUF kernel for {ggml_type} weights")))?;
        let row_bytes = ggml_type.row_bytes(cols).ok_or_else(|| {
            CudaError::Invalid(format!("{cols} columns are not whole {ggml_type} blocks"))
        })?;
        if w.len() != rows * row_bytes {
            return Err(CudaError::Invalid(format!(
                "a [{rows}, {cols}] {ggml_type} matrix needs {} bytes, got {}",
                rows * row_bytes,
                w.len()
            )));
        }
        if cols == 0 || !x.len().is_multiple_of(cols) {
            return Err(CudaError::Invalid(format!(
                "activations of {} values are not rows of {cols}",
                x.len()
            )));
        }
        let m = x.len() / cols;
        if rows > i32::MAX as usize || cols > i32::MAX as usize || m > 65_535 {
            return Err(CudaError::Invalid(format!(
                "GGUF product [{m}, {cols}] x [{rows}, {cols}] is too large"
            )));
        }
        let mut y = self.alloc(m * rows)?;
        if y.is_empty() {
            return Ok(y);
        }
        let warps_per_block = (BLOCK / 32) as usize;
        let config = LaunchConfig {
            grid_dim: (rows.div_ceil(warps_per_block) as u32, m as u32, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let f = self.function(name)?;
        let (row_bytes, rows_i, cols_i) = (row_bytes as i64, rows as i32, cols as i32);
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(w.slice())
            .arg(&row_bytes)
            .arg(&rows_i)
            .arg(&cols_i)
            .arg(x.slice())
            .arg(y.slice_mut());
        // SAFETY: w holds rows * row_bytes bytes, x holds m * cols values, y m * rows.
        unsafe { launch.launch(config)? };
        Ok(y)
    }

    /// `y [count, cols]`: rows `ids[i]` (i64 on the device; negative ids count from the end,
    /// every id must lie in `-rows .. rows`) of the `[rows, cols]` GGUF matrix `w`,
    /// dequantized.
    pub fn gguf_gather(
        &self,
        ggml_type: GgmlType,
        rows: usize,
        cols: usize,
        w: &DeviceBytes,
        ids: &DeviceBytes,
        count: usize,
    ) -> Result<DeviceBuffer> {
        let name = gather_kernel_of(ggml_type)
            .ok_or_else(|| CudaError::Invalid(format!("no GGUF kernel for {ggml_type} weights")))?;
        let row_bytes = ggml_type.row_bytes(cols).ok_or_else(|| {
            CudaError::Invalid(format!("{cols} columns are not whole {ggml_type} blocks"))
        })?;
        if w.len() != rows * row_bytes || ids.len() != 8 * count || rows > i32::MAX as usize {
            return Err(CudaError::Invalid(format!(
                "gather of {count} rows from a [{rows}, {cols}] {ggml_type} matrix of {} bytes \
                 with {} index bytes",
                w.len(),
                ids.len()
            )));
        }
        let mut y = self.alloc(count * cols)?;
        if y.is_empty() {
            return Ok(y);
        }
        let f = self.function(name)?;
        let (row_bytes, rows_i, cols_i, n) = (
            row_bytes as i64,
            rows as i32,
            cols as i32,
            (count * cols) as i64,
        );
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(w.slice())
            .arg(&row_bytes)
            .arg(&rows_i)
            .arg(&cols_i)
            .arg(ids.slice())
            .arg(&n)
            .arg(y.slice_mut());
        // SAFETY: thread per output element; the ids (in range, checked by the caller) pick
        // whole rows of w.
        unsafe {
            launch.launch(crate::backend::launch_1d(
                crate::backend::blocks_for(count * cols),
                0,
            ))?
        };
        Ok(y)
    }
}
