//! x86-64 GEMM microkernels: AVX-512F (8 x 32 tile) and AVX2 + FMA (6 x 16 tile).
//!
//! Implements contract section `gemm` (docs/contract.md) with the structure described in
//! `microkernel.rs`: each vector lane is one output column with its own FMA chain
//! (`_mm512_fmadd_ps` / `_mm256_fmadd_ps`, one rounding), one reduction tile at a time.
//! The register tiling follows the BLIS microkernel design (Van Zee & van de Geijn, 2015).

use std::arch::x86_64::*;

use super::microkernel::Microkernel;
use crate::canonical::REDUCTION_TILE;

const AVX512_MR: usize = 8;
const AVX512_NR: usize = 32;

pub(crate) const AVX512: Microkernel = Microkernel {
    mr: AVX512_MR,
    nr: AVX512_NR,
    by_rows: &[
        avx512_tile::<1>,
        avx512_tile::<2>,
        avx512_tile::<3>,
        avx512_tile::<4>,
        avx512_tile::<5>,
        avx512_tile::<6>,
        avx512_tile::<7>,
        avx512_tile::<8>,
    ],
};

/// `ROWS x 32` tile, two zmm accumulators per row.
///
/// # Safety
/// See `KernelFn` in `microkernel.rs`; the CPU supports AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn avx512_tile<const ROWS: usize>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    first: bool,
) {
    let mut store_only = first;
    let mut tile_start = 0;
    while tile_start < kc {
        let tile_end = (tile_start + REDUCTION_TILE).min(kc);
        let mut acc = [[_mm512_setzero_ps(); 2]; ROWS];
        for k in tile_start..tile_end {
            // SAFETY: `k < kc`, and the B panel holds `kc * 32` floats.
            let (b_lo, b_hi) = unsafe {
                let row = b.add(k * AVX512_NR);
                (_mm512_loadu_ps(row), _mm512_loadu_ps(row.add(16)))
            };
            for (r, acc_row) in acc.iter_mut().enumerate() {
                // SAFETY: `r < ROWS <= 8`, and the A panel holds `kc * 8` floats.
                let a_rk = _mm512_set1_ps(unsafe { *a.add(k * AVX512_MR + r) });
                acc_row[0] = _mm512_fmadd_ps(a_rk, b_lo, acc_row[0]);
                acc_row[1] = _mm512_fmadd_ps(a_rk, b_hi, acc_row[1]);
            }
        }
        for (r, acc_row) in acc.iter().enumerate() {
            for (half, &acc_v) in acc_row.iter().enumerate() {
                // SAFETY: row `r < ROWS` of C holds 32 writable floats.
                unsafe {
                    let dst = c.add(r * ldc + 16 * half);
                    let folded = if store_only {
                        acc_v
                    } else {
                        _mm512_add_ps(_mm512_loadu_ps(dst), acc_v)
                    };
                    _mm512_storeu_ps(dst, folded);
                }
            }
        }
        store_only = false;
        tile_start = tile_end;
    }
}

const AVX2_MR: usize = 6;
const AVX2_NR: usize = 16;

pub(crate) const AVX2: Microkernel = Microkernel {
    mr: AVX2_MR,
    nr: AVX2_NR,
    by_rows: &[
        avx2_tile::<1>,
        avx2_tile::<2>,
        avx2_tile::<3>,
        avx2_tile::<4>,
        avx2_tile::<5>,
        avx2_tile::<6>,
    ],
};

/// `ROWS x 16` tile, two ymm accumulators per row.
///
/// # Safety
/// See `KernelFn` in `microkernel.rs`; the CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_tile<const ROWS: usize>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    first: bool,
) {
    let mut store_only = first;
    let mut tile_start = 0;
    while tile_start < kc {
        let tile_end = (tile_start + REDUCTION_TILE).min(kc);
        let mut acc = [[_mm256_setzero_ps(); 2]; ROWS];
        for k in tile_start..tile_end {
            // SAFETY: `k < kc`, and the B panel holds `kc * 16` floats.
            let (b_lo, b_hi) = unsafe {
                let row = b.add(k * AVX2_NR);
                (_mm256_loadu_ps(row), _mm256_loadu_ps(row.add(8)))
            };
            for (r, acc_row) in acc.iter_mut().enumerate() {
                // SAFETY: `r < ROWS <= 6`, and the A panel holds `kc * 6` floats.
                let a_rk = _mm256_set1_ps(unsafe { *a.add(k * AVX2_MR + r) });
                acc_row[0] = _mm256_fmadd_ps(a_rk, b_lo, acc_row[0]);
                acc_row[1] = _mm256_fmadd_ps(a_rk, b_hi, acc_row[1]);
            }
        }
        for (r, acc_row) in acc.iter().enumerate() {
            for (half, &acc_v) in acc_row.iter().enumerate() {
                // SAFETY: row `r < ROWS` of C holds 16 writable floats.
                unsafe {
                    let dst = c.add(r * ldc + 8 * half);
                    let folded = if store_only {
                        acc_v
                    } else {
                        _mm256_add_ps(_mm256_loadu_ps(dst), acc_v)
                    };
                    _mm256_storeu_ps(dst, folded);
                }
            }
        }
        store_only = false;
        tile_start = tile_end;
    }
}

/// Row-vector kernel of `gemv.rs`: 64 output columns in four zmm accumulators.
///
/// # Safety
/// See `RowKernelFn` in `gemv.rs`; the CPU supports AVX-512F.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn avx512_row_block(
    k: usize,
    a: *const f32,
    a_stride: usize,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
) {
    let mut tile_start = 0;
    while tile_start < k {
        let tile_end = (tile_start + REDUCTION_TILE).min(k);
        let mut acc = [_mm512_setzero_ps(); 4];
        for kk in tile_start..tile_end {
            // SAFETY: `kk < k`: term `kk` of `a` and row `kk` of `b` (64 floats) are readable.
            unsafe {
                let a_k = _mm512_set1_ps(*a.add(kk * a_stride));
                let row = b.add(kk * ldb);
                for (q, acc_q) in acc.iter_mut().enumerate() {
                    *acc_q = _mm512_fmadd_ps(a_k, _mm512_loadu_ps(row.add(16 * q)), *acc_q);
                }
            }
        }
        for (q, &acc_q) in acc.iter().enumerate() {
            // SAFETY: `c` holds 64 writable floats.
            unsafe {
                let dst = c.add(16 * q);
                let folded = if tile_start == 0 {
                    acc_q
                } else {
                    _mm512_add_ps(_mm512_loadu_ps(dst), acc_q)
                };
                _mm512_storeu_ps(dst, folded);
            }
        }
        tile_start = tile_end;
    }
}

/// Row-vector kernel of `gemv.rs`: 64 output columns in eight ymm accumulators.
///
/// # Safety
/// See `RowKernelFn` in `gemv.rs`; the CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn avx2_row_block(
    k: usize,
    a: *const f32,
    a_stride: usize,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
) {
    let mut tile_start = 0;
    while tile_start < k {
        let tile_end = (tile_start + REDUCTION_TILE).min(k);
        let mut acc = [_mm256_setzero_ps(); 8];
        for kk in tile_start..tile_end {
            // SAFETY: `kk < k`: term `kk` of `a` and row `kk` of `b` (64 floats) are readable.
            unsafe {
                let a_k = _mm256_set1_ps(*a.add(kk * a_stride));
                let row = b.add(kk * ldb);
                for (q, acc_q) in acc.iter_mut().enumerate() {
                    *acc_q = _mm256_fmadd_ps(a_k, _mm256_loadu_ps(row.add(8 * q)), *acc_q);
                }
            }
        }
        for (q, &acc_q) in acc.iter().enumerate() {
            // SAFETY: `c` holds 64 writable floats.
            unsafe {
                let dst = c.add(8 * q);
                let folded = if tile_start == 0 {
                    acc_q
                } else {
                    _mm256_add_ps(_mm256_loadu_ps(dst), acc_q)
                };
                _mm256_storeu_ps(dst, folded);
            }
        }
        tile_start = tile_end;
    }
}
