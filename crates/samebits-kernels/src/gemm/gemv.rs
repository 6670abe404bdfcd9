//! Row vector times matrix (M = 1) without packing, for f32 operands with unit column stride.
//!
//! Implements contract section `gemm` (docs/contract.md) in the same order as the packed path:
//! each vector lane is one output column with its own FMA chain over one reduction tile, folded
//! into the output after each tile. B rows are read in place (decode-time GEMV is bound by
//! reading B once). Columns past the last block of 64 use the scalar reference order.

use rayon::prelude::*;

use super::{Epilogue, GEMV_COLUMNS_PER_TASK, GemmInput, MatRef};
use crate::canonical::canonical_dot_strided;
use crate::isa::Isa;

/// Output columns per kernel call.
pub(crate) const ROW_BLOCK: usize = 64;

/// `kernel(k, a, a_stride, b, ldb, c)`: `c[j] = sum_kk a[kk * a_stride] * b[kk * ldb + j]` for
/// `j < 64`, canonical order.
///
/// # Safety
/// `a` has `k` readable elements `a_stride` apart, `b` has `k` rows of 64 readable floats `ldb`
/// apart, `c` has 64 writable floats, and the kernel's ISA is available.
pub(crate) type RowKernelFn = unsafe fn(usize, *const f32, usize, *const f32, usize, *mut f32);

/// Runs the M = 1 path when it applies (`false`: the caller takes the packed path).
#[allow(clippy::too_many_arguments)]
pub(super) fn try_row_times_matrix<T: GemmInput>(
    isa: Isa,
    n: usize,
    k: usize,
    a: &MatRef<'_, T>,
    b: &MatRef<'_, T>,
    epilogue: &Epilogue<'_>,
    out: &mut [f32],
) -> bool {
    let kernel: RowKernelFn = match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => super::microkernel_x86::avx512_row_block,
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => super::microkernel_x86::avx2_row_block,
        _ => return false,
    };
    let (Some(a_data), Some(b_data)) = (T::as_f32(a.data), T::as_f32(b.data)) else {
        return false;
    };
    if k == 0 || b.col_stride != 1 {
        return false;
    }
    for (bi, out_row) in out.chunks_exact_mut(n).enumerate() {
        let a_row = &a_data[a.index(bi, 0, 0)..];
        let b_base = b.index(bi, 0, 0);
        out_row
            .par_chunks_mut(GEMV_COLUMNS_PER_TASK)
            .enumerate()
            .for_each(|(task, chunk)| {
                let j0 = task * GEMV_COLUMNS_PER_TASK;
                let full = chunk.len() / ROW_BLOCK * ROW_BLOCK;
                for jb in (0..full).step_by(ROW_BLOCK) {
                    let b_block = &b_data[b_base + j0 + jb..];
                    // SAFETY: the views were bounds-checked for `[batch, 1, k]` and
                    // `[batch, k, n]`, so `a_row` holds `k` terms `a.col_stride` apart and
                    // `b_block` holds `k` rows of 64 columns `b.row_stride` apart
                    // (`j0 + jb + 64 <= n`); `chunk[jb..jb + 64]` is writable; `isa` comes from
                    // `Isa::active()`, which only returns available ISAs.
                    unsafe {
                        kernel(
                            k,
                            a_row.as_ptr(),
                            a.col_stride,
                            b_block.as_ptr(),
                            b.row_stride,
                            chunk[jb..jb + ROW_BLOCK].as_mut_ptr(),
                        )
                    };
                }
                for (j, slot) in chunk.iter_mut().enumerate().skip(full) {
                    let b_col = &b_data[b_base + j0 + j..];
                    *slot = canonical_dot_strided(a_row, a.col_stride, b_col, b.row_stride, k);
                }
                if !matches!(epilogue, Epilogue::None) {
                    for (j, slot) in chunk.iter_mut().enumerate() {
                        *slot = epilogue.apply(*slot, bi, 0, j0 + j);
                    }
                }
            });
    }
    true
}
