//! GEMM microkernels: one register tile of C per call, the canonical order inside.
//!
//! Implements contract section `gemm` (docs/contract.md). A microkernel multiplies a packed A
//! panel (`kc` columns of `MR` rows, stored `[k][MR]`) by a packed B panel (`kc` rows of `NR`
//! columns, stored `[k][NR]`) into a `ROWS x NR` tile of C (`ROWS <= MR`). It walks `kc` one
//! reduction tile (64 steps) at a time: zeroed accumulators, a 64-step FMA chain per output in
//! index order (one SIMD lane = one output column), then the fold `C = C + acc`, or `C = acc`
//! for the first tile of the whole reduction. The caller keeps `kc` blocks aligned to 64, so
//! these tiles are the contract's reduction tiles (or, for a reduction in shorter tiles, gives
//! one tile per call). Padding columns of the B panel are zero and
//! their lanes are discarded by the caller; K is never padded (a `fma(0, 0, p)` term would turn
//! `p = -0.0` into `+0.0`).

use crate::canonical::REDUCTION_TILE;
use crate::isa::Isa;

/// `kernel(kc, a, b, c, ldc, first_tile)`.
///
/// # Safety
/// `a` points to `kc * MR` readable floats, `b` to `kc * NR`, `c` to `ROWS` rows of `NR`
/// writable floats spaced `ldc` apart, and the kernel's ISA is available on this CPU.
pub(crate) type KernelFn = unsafe fn(usize, *const f32, *const f32, *mut f32, usize, bool);

/// The microkernel family of one ISA: register tile shape and one entry per row count.
#[derive(Clone, Copy)]
pub(crate) struct Microkernel {
    pub mr: usize,
    pub nr: usize,
    /// `by_rows[r - 1]` computes a tile of `r` rows, `1 <= r <= mr`.
    pub by_rows: &'static [KernelFn],
}

/// Largest `MR * NR` over all ISAs: size of the caller's edge-tile buffer.
pub(crate) const MAX_TILE: usize = 8 * 32;

impl Microkernel {
    pub(crate) fn for_isa(isa: Isa) -> Microkernel {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => super::microkernel_x86::AVX512,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => super::microkernel_x86::AVX2,
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => super::microkernel_neon::NEON,
            _ => SCALAR,
        }
    }
}

const SCALAR_MR: usize = 4;
const SCALAR_NR: usize = 4;

const SCALAR: Microkernel = Microkernel {
    mr: SCALAR_MR,
    nr: SCALAR_NR,
    by_rows: &[
        scalar_tile::<1>,
        scalar_tile::<2>,
        scalar_tile::<3>,
        scalar_tile::<4>,
    ],
};

/// Portable microkernel; `f32::mul_add` is the correctly rounded fused multiply-add.
///
/// # Safety
/// See [`KernelFn`].
unsafe fn scalar_tile<const ROWS: usize>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    first: bool,
) {
    // SAFETY: the caller guarantees the extents documented on `KernelFn`.
    let (a, b) = unsafe {
        (
            std::slice::from_raw_parts(a, kc * SCALAR_MR),
            std::slice::from_raw_parts(b, kc * SCALAR_NR),
        )
    };
    let mut store_only = first;
    let mut tile_start = 0;
    while tile_start < kc {
        let tile_end = (tile_start + REDUCTION_TILE).min(kc);
        let mut acc = [[0.0f32; SCALAR_NR]; ROWS];
        for k in tile_start..tile_end {
            for (r, acc_row) in acc.iter_mut().enumerate() {
                let a_rk = a[k * SCALAR_MR + r];
                for (j, acc_rj) in acc_row.iter_mut().enumerate() {
                    *acc_rj = a_rk.mul_add(b[k * SCALAR_NR + j], *acc_rj);
                }
            }
        }
        for (r, acc_row) in acc.iter().enumerate() {
            // SAFETY: row `r < ROWS` of C holds `SCALAR_NR` writable floats (caller contract).
            let c_row = unsafe { std::slice::from_raw_parts_mut(c.add(r * ldc), SCALAR_NR) };
            for (c_rj, &acc_rj) in c_row.iter_mut().zip(acc_row) {
                *c_rj = if store_only { acc_rj } else { *c_rj + acc_rj };
            }
        }
        store_only = false;
        tile_start = tile_end;
    }
}
