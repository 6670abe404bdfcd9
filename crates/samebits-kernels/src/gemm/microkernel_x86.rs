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

/// 16 x 16 in-register transpose: `out[c]` lane `l` is `rows[l]` lane `c`
/// (unpack pairs of rows, then pairs of pairs, then exchange 128-bit lanes).
#[target_feature(enable = "avx512f")]
#[inline]
fn transpose_16x16(rows: [__m512; 16]) -> [__m512; 16] {
    let t: [__m512; 16] = std::array::from_fn(|i| {
        let (r0, r1) = (rows[i / 2 * 2], rows[i / 2 * 2 + 1]);
        if i % 2 == 0 {
            _mm512_unpacklo_ps(r0, r1)
        } else {
            _mm512_unpackhi_ps(r0, r1)
        }
    });
    // u[4g + e], 128-bit lane q: element 4q + e of rows 4g .. 4g + 3.
    let u: [__m512; 16] = std::array::from_fn(|i| {
        let (g, e) = (i / 4, i % 4);
        let (lo, hi) = (
            _mm512_castps_pd(t[4 * g + e / 2]),
            _mm512_castps_pd(t[4 * g + 2 + e / 2]),
        );
        _mm512_castpd_ps(if e % 2 == 0 {
            _mm512_unpacklo_pd(lo, hi)
        } else {
            _mm512_unpackhi_pd(lo, hi)
        })
    });
    let mut out = [_mm512_setzero_ps(); 16];
    for e in 0..4 {
        let v_a = _mm512_shuffle_f32x4::<0x44>(u[e], u[4 + e]);
        let v_b = _mm512_shuffle_f32x4::<0xEE>(u[e], u[4 + e]);
        let v_c = _mm512_shuffle_f32x4::<0x44>(u[8 + e], u[12 + e]);
        let v_d = _mm512_shuffle_f32x4::<0xEE>(u[8 + e], u[12 + e]);
        out[e] = _mm512_shuffle_f32x4::<0x88>(v_a, v_c);
        out[4 + e] = _mm512_shuffle_f32x4::<0xDD>(v_a, v_c);
        out[8 + e] = _mm512_shuffle_f32x4::<0x88>(v_b, v_d);
        out[12 + e] = _mm512_shuffle_f32x4::<0xDD>(v_b, v_d);
    }
    out
}

/// Transposed-B kernel of `gemv.rs`: 16 outputs (one per B row, one zmm lane each) for `ROWS`
/// rows of A; B rows are read 16 terms at a time and transposed in registers.
///
/// # Safety
/// See `TransposedKernelFn` in `gemv.rs`; the CPU supports AVX-512F.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn avx512_transposed<const ROWS: usize>(
    k: usize,
    a: &super::gemv::RowsOfA<'_>,
    b: *const f32,
    ldb: usize,
    valid: usize,
    c: *mut f32,
) {
    const LANES: usize = 16;
    // Lanes past `valid` re-read row 0; their results are not stored.
    // SAFETY: rows `l < valid` of B are readable (caller contract).
    let rows: [*const f32; LANES] =
        std::array::from_fn(|l| unsafe { b.add(if l < valid { l * ldb } else { 0 }) });
    let mut total = [_mm512_setzero_ps(); ROWS];
    let mut tile_start = 0;
    while tile_start < k {
        let tile_end = (tile_start + REDUCTION_TILE).min(k);
        let mut acc = [_mm512_setzero_ps(); ROWS];
        let mut k0 = tile_start;
        while k0 < tile_end {
            let width = LANES.min(tile_end - k0);
            let mask = (((1u32 << width) - 1) & 0xffff) as __mmask16;
            // SAFETY: terms `k0 .. k0 + width <= k` of each row are readable; masked lanes are
            // not accessed.
            let loaded: [__m512; LANES] =
                std::array::from_fn(|l| unsafe { _mm512_maskz_loadu_ps(mask, rows[l].add(k0)) });
            let columns = transpose_16x16(loaded);
            for (kk, &column) in columns.iter().enumerate().take(width) {
                for (i, acc_i) in acc.iter_mut().enumerate() {
                    // SAFETY: `i < ROWS` rows of A with `k0 + kk < k` terms (caller contract).
                    let a_ik = _mm512_set1_ps(unsafe { a.get(i, k0 + kk) });
                    *acc_i = _mm512_fmadd_ps(a_ik, column, *acc_i);
                }
            }
            k0 += width;
        }
        for (total_i, &acc_i) in total.iter_mut().zip(&acc) {
            *total_i = if tile_start == 0 {
                acc_i
            } else {
                _mm512_add_ps(*total_i, acc_i)
            };
        }
        tile_start = tile_end;
    }
    for (i, &total_i) in total.iter().enumerate() {
        // SAFETY: `c` holds `ROWS` rows of 16 writable floats.
        unsafe { _mm512_storeu_ps(c.add(i * LANES), total_i) };
    }
}

/// 8 x 8 in-register transpose: `out[c]` lane `l` is `rows[l]` lane `c`.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn transpose_8x8(rows: [__m256; 8]) -> [__m256; 8] {
    let t: [__m256; 8] = std::array::from_fn(|i| {
        let (r0, r1) = (rows[i / 2 * 2], rows[i / 2 * 2 + 1]);
        if i % 2 == 0 {
            _mm256_unpacklo_ps(r0, r1)
        } else {
            _mm256_unpackhi_ps(r0, r1)
        }
    });
    // u[4g + e], 128-bit lane q: element 4q + e of rows 4g .. 4g + 3.
    let u: [__m256; 8] = std::array::from_fn(|i| {
        let (g, e) = (i / 4, i % 4);
        let (lo, hi) = (
            _mm256_castps_pd(t[4 * g + e / 2]),
            _mm256_castps_pd(t[4 * g + 2 + e / 2]),
        );
        _mm256_castpd_ps(if e % 2 == 0 {
            _mm256_unpacklo_pd(lo, hi)
        } else {
            _mm256_unpackhi_pd(lo, hi)
        })
    });
    std::array::from_fn(|c| {
        let (q, e) = (c / 4, c % 4);
        if q == 0 {
            _mm256_permute2f128_ps::<0x20>(u[e], u[4 + e])
        } else {
            _mm256_permute2f128_ps::<0x31>(u[e], u[4 + e])
        }
    })
}

/// Transposed-B kernel of `gemv.rs`: 8 outputs (one per B row, one ymm lane each) for `ROWS`
/// rows of A; B rows are read 8 terms at a time and transposed in registers.
///
/// # Safety
/// See `TransposedKernelFn` in `gemv.rs`; the CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn avx2_transposed<const ROWS: usize>(
    k: usize,
    a: &super::gemv::RowsOfA<'_>,
    b: *const f32,
    ldb: usize,
    valid: usize,
    c: *mut f32,
) {
    const LANES: usize = 8;
    // Lanes past `valid` re-read row 0; their results are not stored.
    // SAFETY: rows `l < valid` of B are readable (caller contract).
    let rows: [*const f32; LANES] =
        std::array::from_fn(|l| unsafe { b.add(if l < valid { l * ldb } else { 0 }) });
    let mut total = [_mm256_setzero_ps(); ROWS];
    let mut tile_start = 0;
    while tile_start < k {
        let tile_end = (tile_start + REDUCTION_TILE).min(k);
        let mut acc = [_mm256_setzero_ps(); ROWS];
        let mut k0 = tile_start;
        while k0 < tile_end {
            let width = LANES.min(tile_end - k0);
            let mask = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(width as i32), mask);
            // SAFETY: terms `k0 .. k0 + width <= k` of each row are readable; masked lanes are
            // not accessed.
            let loaded: [__m256; LANES] =
                std::array::from_fn(|l| unsafe { _mm256_maskload_ps(rows[l].add(k0), mask) });
            let columns = transpose_8x8(loaded);
            for (kk, &column) in columns.iter().enumerate().take(width) {
                for (i, acc_i) in acc.iter_mut().enumerate() {
                    // SAFETY: `i < ROWS` rows of A with `k0 + kk < k` terms (caller contract).
                    let a_ik = _mm256_set1_ps(unsafe { a.get(i, k0 + kk) });
                    *acc_i = _mm256_fmadd_ps(a_ik, column, *acc_i);
                }
            }
            k0 += width;
        }
        for (total_i, &acc_i) in total.iter_mut().zip(&acc) {
            *total_i = if tile_start == 0 {
                acc_i
            } else {
                _mm256_add_ps(*total_i, acc_i)
            };
        }
        tile_start = tile_end;
    }
    for (i, &total_i) in total.iter().enumerate() {
        // SAFETY: `c` holds `ROWS` rows of 8 writable floats.
        unsafe { _mm256_storeu_ps(c.add(i * LANES), total_i) };
    }
}
