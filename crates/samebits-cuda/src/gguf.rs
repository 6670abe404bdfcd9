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
use crate::gemm::{DeviceMat, GemmEpilogue, GemmLaunch, GemmShape};

/// The kernel name suffix of a weight type, if the device dequantizes it.
fn suffix(ggml_type: GgmlType) -> Option<&'static str> {
    Some(match ggml_type {
        GgmlType::F32 => "f32",
        GgmlType::F16 => "f16",
        GgmlType::Q4_0 => "q4_0",
        GgmlType::Q4_1 => "q4_1",
        GgmlType::Q8_0 => "q8_0",
        _ => return None,
    })
}

/// The kernel `sb_gguf_<what>_<type>`, or an error for a type the device does not dequantize.
fn kernel(what: &str, ggml_type: GgmlType) -> Result<String> {
    suffix(ggml_type)
        .map(|s| format!("sb_gguf_{what}_{s}"))
        .ok_or_else(|| CudaError::Invalid(format!("no GGUF kernel for {ggml_type} weights")))
}

/// Activation rows from which a product runs as a GEMM over the dequantized weights
/// ([`CudaBackend::gguf_dequantize_t`]) rather than as matrix-vector products.
pub const GGUF_GEMM_MIN_ROWS: usize = 16;

/// Whether [`CudaBackend::gguf_matmul`] and [`CudaBackend::gguf_gather`] take weights of this
/// type.
pub fn gguf_supported(ggml_type: GgmlType) -> bool {
    suffix(ggml_type).is_some()
}

impl CudaBackend {
    /// `y [m, rows] = x [m, cols] · Wᵀ` for the `[rows, cols]` GGUF matrix `w` of `ggml_type`;
    /// with `add` (`[m, rows]`), `y = (x · Wᵀ) + add`, one more rounding per output (a residual
    /// Add fused into the product).
    pub fn gguf_matmul(
        &self,
        ggml_type: GgmlType,
        rows: usize,
        cols: usize,
        w: &DeviceBytes,
        x: &DeviceBuffer,
        add: Option<&DeviceBuffer>,
    ) -> Result<DeviceBuffer> {
        let name = kernel("matvec", ggml_type)?;
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
        if add.is_some_and(|a| a.len() != m * rows) {
            return Err(CudaError::Invalid(format!(
                "the added term of a [{m}, {rows}] product has another length"
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
        let f = self.function(&name)?;
        let (row_bytes, rows_i, cols_i) = (row_bytes as i64, rows as i32, cols as i32);
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(w.slice())
            .arg(&row_bytes)
            .arg(&rows_i)
            .arg(&cols_i)
            .arg(x.slice());
        let null: u64 = 0;
        match add {
            Some(a) => launch.arg(a.slice()),
            None => launch.arg(&null),
        };
        launch.arg(y.slice_mut());
        // SAFETY: w holds rows * row_bytes bytes, x holds m * cols values, y and add m * rows.
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
        let name = kernel("gather", ggml_type)?;
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
        let f = self.function(&name)?;
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

    /// The `[cols, rows]` f32 transpose of the dequantized `[rows, cols]` GGUF matrix `w` (the
    /// formulas of docs/gguf.md, exact), the B operand of [`CudaBackend::gguf_matmul_dequantized`].
    pub fn gguf_dequantize_t(
        &self,
        ggml_type: GgmlType,
        rows: usize,
        cols: usize,
        w: &DeviceBytes,
    ) -> Result<DeviceBuffer> {
        let name = kernel("dequantize_t", ggml_type)?;
        let row_bytes = ggml_type.row_bytes(cols).ok_or_else(|| {
            CudaError::Invalid(format!("{cols} columns are not whole {ggml_type} blocks"))
        })?;
        if w.len() != rows * row_bytes || rows > i32::MAX as usize || cols > i32::MAX as usize {
            return Err(CudaError::Invalid(format!(
                "a [{rows}, {cols}] {ggml_type} matrix needs {} bytes, got {}",
                rows * row_bytes,
                w.len()
            )));
        }
        let mut wt = self.alloc(rows * cols)?;
        if wt.is_empty() {
            return Ok(wt);
        }
        let f = self.function(&name)?;
        let (row_bytes, rows_i, cols_i) = (row_bytes as i64, rows as i32, cols as i32);
        let mut launch = self.stream().launch_builder(&f);
        launch
            .arg(w.slice())
            .arg(&row_bytes)
            .arg(&rows_i)
            .arg(&cols_i)
            .arg(wt.slice_mut());
        // SAFETY: thread per element of the rows * cols matrix, w checked above.
        unsafe {
            launch.launch(crate::backend::launch_1d(
                crate::backend::blocks_for(rows * cols),
                0,
            ))?
        };
        Ok(wt)
    }

    /// `y [m, rows] = x [m, cols] · W^T` (`+ add`) by the canonical GEMM (contract: gemm, the
    /// `Add` epilogue) over `wt`, the dequantized weights from
    /// [`CudaBackend::gguf_dequantize_t`]: the same canonical dot products as
    /// [`CudaBackend::gguf_matmul`], so the same bits (docs/gguf.md).
    pub fn gguf_matmul_dequantized(
        &self,
        rows: usize,
        cols: usize,
        wt: &DeviceBuffer,
        x: &DeviceBuffer,
        add: Option<&DeviceBuffer>,
    ) -> Result<DeviceBuffer> {
        if cols == 0 || !x.len().is_multiple_of(cols) || wt.len() != rows * cols {
            return Err(CudaError::Invalid(format!(
                "activations of {} values and {} weights are not [m, {cols}] and [{cols}, {rows}]",
                x.len(),
                wt.len()
            )));
        }
        let m = x.len() / cols;
        self.gemm(
            GemmShape {
                batch: 1,
                m,
                n: rows,
                k: cols,
            },
            DeviceMat::row_major(x, m, cols),
            DeviceMat::row_major(wt, cols, rows),
            match add {
                Some(a) => GemmEpilogue::Add(DeviceMat::row_major(a, m, rows)),
                None => GemmEpilogue::None,
            },
            GemmLaunch::Auto,
        )
    }
}
