//! Few rows of A times a matrix without packing, for f32 operands: the decode-time GEMV paths.
//!
//! Implements contract section `gemm` (docs/contract.md) in the same order as the packed path:
//! each vector lane is one output column with its own FMA chain over one reduction tile, folded
//! after each tile; B is read in place (a GEMV is bound by reading B once).
//! - Row vector (M = 1) times B with unit column stride: lanes read rows of B directly.
//!   Columns past the last block of 64 use the scalar reference order.
//! - 1 to 8 rows times B stored transposed (`B[k, j]` at `j * ldb + k`, the layout of weights
//!   stored one row per output): each lane is one B row, read 16 (AVX-512) or 8 (AVX2) terms at
//!   a time and transposed in registers, so a lane still runs its own sequential chain (never a
//!   horizontal sum across lanes).

use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
use super::microkernel_x86::{avx2_transposed, avx512_transposed};
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

/// Most rows of A the transposed-B path takes.
pub(crate) const TRANSPOSED_MAX_ROWS: usize = 8;
/// Most lanes of a transposed-B kernel (outputs per call).
const TRANSPOSED_MAX_LANES: usize = 16;

/// Rows of A as the transposed-B kernels read them: element `(i, k)` at
/// `data[i * row_stride + k * col_stride]`.
pub(crate) struct RowsOfA<'a> {
    data: &'a [f32],
    row_stride: usize,
    col_stride: usize,
}

impl RowsOfA<'_> {
    /// Element `(i, k)`.
    ///
    /// # Safety
    /// `(i, k)` lies inside the rows the view was made for.
    #[inline(always)]
    pub(crate) unsafe fn get(&self, i: usize, k: usize) -> f32 {
        // SAFETY: caller contract.
        unsafe {
            *self
                .data
                .get_unchecked(i * self.row_stride + k * self.col_stride)
        }
    }
}

/// `kernel(k, a, b, ldb, valid, c)`: for `i < ROWS` and lanes `l < LANES`,
/// `c[i * LANES + l] = sum_kk a(i, kk) * b[l * ldb + kk]` in the canonical order.
///
/// # Safety
/// `a` covers `ROWS` rows of `k` terms; rows `l < valid` of `b` hold `k` readable floats (lanes
/// from `valid` on re-read row 0 and their results are garbage); `c` has `ROWS * LANES` writable
/// floats; the kernel's ISA is available.
pub(crate) type TransposedKernelFn =
    unsafe fn(usize, &RowsOfA<'_>, *const f32, usize, usize, *mut f32);

/// Runs the transposed-B path when it applies (`false`: the caller takes the packed path).
#[allow(clippy::too_many_arguments)]
pub(super) fn try_rows_times_transposed<T: GemmInput>(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: &MatRef<'_, T>,
    b: &MatRef<'_, T>,
    epilogue: &Epilogue<'_>,
    out: &mut [f32],
) -> bool {
    let (lanes, by_rows): (usize, [TransposedKernelFn; TRANSPOSED_MAX_ROWS]) = match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => (
            16,
            [
                avx512_transposed::<1>,
                avx512_transposed::<2>,
                avx512_transposed::<3>,
                avx512_transposed::<4>,
                avx512_transposed::<5>,
                avx512_transposed::<6>,
                avx512_transposed::<7>,
                avx512_transposed::<8>,
            ],
        ),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => (
            8,
            [
                avx2_transposed::<1>,
                avx2_transposed::<2>,
                avx2_transposed::<3>,
                avx2_transposed::<4>,
                avx2_transposed::<5>,
                avx2_transposed::<6>,
                avx2_transposed::<7>,
                avx2_transposed::<8>,
            ],
        ),
        _ => return false,
    };
    let (Some(a_data), Some(b_data)) = (T::as_f32(a.data), T::as_f32(b.data)) else {
        return false;
    };
    if k == 0 || m > TRANSPOSED_MAX_ROWS || b.row_stride != 1 || b.col_stride == 1 {
        return false;
    }
    let kernel = by_rows[m - 1];
    for (bi, out_batch) in out.chunks_exact_mut(m * n).enumerate() {
        // Task `t` owns columns `t * GEMV_COLUMNS_PER_TASK ..` of every output row.
        let mut tasks: Vec<Vec<&mut [f32]>> = Vec::new();
        for row in out_batch.chunks_exact_mut(n) {
            for (t, chunk) in row.chunks_mut(GEMV_COLUMNS_PER_TASK).enumerate() {
                if t == tasks.len() {
                    tasks.push(Vec::with_capacity(m));
                }
                tasks[t].push(chunk);
            }
        }
        let rows_of_a = RowsOfA {
            data: &a_data[a.index(bi, 0, 0)..],
            row_stride: a.row_stride,
            col_stride: a.col_stride,
        };
        let b_base = b.index(bi, 0, 0);
        tasks
            .into_par_iter()
            .enumerate()
            .for_each(|(task, mut rows)| {
                let j0 = task * GEMV_COLUMNS_PER_TASK;
                let width = rows[0].len();
                let mut c = [0.0f32; TRANSPOSED_MAX_ROWS * TRANSPOSED_MAX_LANES];
                for jb in (0..width).step_by(lanes) {
                    let valid = lanes.min(width - jb);
                    let b_rows = &b_data[b_base + (j0 + jb) * b.col_stride..];
                    // SAFETY: the views were bounds-checked for `[batch, m, k]` and `[batch, k, n]`,
                    // so `rows_of_a` covers `m` rows of `k` terms and B rows `j0 + jb + l`,
                    // `l < valid`, hold `k` floats (`b.row_stride == 1`) starting `b.col_stride`
                    // apart from `b_rows`; `c` holds `8 * 16` floats; `isa` comes from
                    // `Isa::active()`, which only returns available ISAs.
                    unsafe {
                        kernel(
                            k,
                            &rows_of_a,
                            b_rows.as_ptr(),
                            b.col_stride,
                            valid,
                            c.as_mut_ptr(),
                        )
                    };
                    for (i, row) in rows.iter_mut().enumerate() {
                        for (l, slot) in row[jb..jb + valid].iter_mut().enumerate() {
                            *slot = epilogue.apply(c[i * lanes + l], bi, i, j0 + jb + l);
                        }
                    }
                }
            });
    }
    true
}
