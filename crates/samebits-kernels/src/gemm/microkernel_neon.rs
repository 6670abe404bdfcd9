//! AArch64 NEON GEMM microkernel (8 x 8 tile).
//!
//! Implements contract section `gemm` (docs/contract.md) with the structure described in
//! `microkernel.rs`: each lane is one output column with its own FMA chain (`vfmaq_f32`,
//! one rounding), one reduction tile at a time.

use std::arch::aarch64::*;

use super::microkernel::Microkernel;
use crate::canonical::REDUCTION_TILE;

const NEON_MR: usize = 8;
const NEON_NR: usize = 8;

pub(crate) const NEON: Microkernel = Microkernel {
    mr: NEON_MR,
    nr: NEON_NR,
    by_rows: &[
        neon_tile::<1>,
        neon_tile::<2>,
        neon_tile::<3>,
        neon_tile::<4>,
        neon_tile::<5>,
        neon_tile::<6>,
        neon_tile::<7>,
        neon_tile::<8>,
    ],
};

/// `ROWS x 8` tile, two q-register accumulators per row.
///
/// # Safety
/// See `KernelFn` in `microkernel.rs`; the CPU supports NEON.
#[target_feature(enable = "neon")]
unsafe fn neon_tile<const ROWS: usize>(
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
        let mut acc = [[vdupq_n_f32(0.0); 2]; ROWS];
        for k in tile_start..tile_end {
            // SAFETY: `k < kc`, and the B panel holds `kc * 8` floats.
            let (b_lo, b_hi) = unsafe {
                let row = b.add(k * NEON_NR);
                (vld1q_f32(row), vld1q_f32(row.add(4)))
            };
            for (r, acc_row) in acc.iter_mut().enumerate() {
                // SAFETY: `r < ROWS <= 8`, and the A panel holds `kc * 8` floats.
                let a_rk = vdupq_n_f32(unsafe { *a.add(k * NEON_MR + r) });
                // vfmaq_f32(acc, x, y) = acc + x * y with one rounding.
                acc_row[0] = vfmaq_f32(acc_row[0], a_rk, b_lo);
                acc_row[1] = vfmaq_f32(acc_row[1], a_rk, b_hi);
            }
        }
        for (r, acc_row) in acc.iter().enumerate() {
            for (half, &acc_v) in acc_row.iter().enumerate() {
                // SAFETY: row `r < ROWS` of C holds 8 writable floats.
                unsafe {
                    let dst = c.add(r * ldc + 4 * half);
                    let folded = if store_only {
                        acc_v
                    } else {
                        vaddq_f32(vld1q_f32(dst), acc_v)
                    };
                    vst1q_f32(dst, folded);
                }
            }
        }
        store_only = false;
        tile_start = tile_end;
    }
}
