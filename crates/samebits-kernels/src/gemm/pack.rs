//! Packing of GEMM operands into microkernel panels, converting the element type to f32.
//!
//! Implements the packing half of contract section `gemm` (docs/contract.md): packing only
//! copies (f16/bf16 convert to f32 exactly), it never reorders a reduction. A panels are
//! `[k][MR]` with zero rows past `m`; B panels are `[k][NR]` with zero columns past `n`
//! (Goto & van de Geijn's packed layout, as used by BLIS).

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

use super::MatRef;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// Element types GEMM reads: f32, and f16 / bf16 converted to f32 exactly while packing.
pub trait GemmInput: sealed::Sealed + Copy + Send + Sync + 'static {
    /// Exact conversion of one element.
    fn to_f32(self) -> f32;
    /// Exact conversion of a contiguous run, `dst.len() == src.len()`.
    fn copy_to_f32(src: &[Self], dst: &mut [f32]);
    /// The data itself when it already is f32 (read without conversion).
    fn as_f32(data: &[Self]) -> Option<&[f32]>;
}

impl GemmInput for f32 {
    fn to_f32(self) -> f32 {
        self
    }
    fn copy_to_f32(src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
    fn as_f32(data: &[f32]) -> Option<&[f32]> {
        Some(data)
    }
}

impl GemmInput for f16 {
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn copy_to_f32(src: &[f16], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst);
    }
    fn as_f32(_: &[f16]) -> Option<&[f32]> {
        None
    }
}

impl GemmInput for bf16 {
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    fn copy_to_f32(src: &[bf16], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst);
    }
    fn as_f32(_: &[bf16]) -> Option<&[f32]> {
        None
    }
}

/// Packs rows `row0 .. row0 + rows` and reduction columns `k0 .. k0 + kc` of batch `batch` of
/// `a` into `ceil(rows / mr)` panels of `kc * mr` floats each.
#[allow(clippy::too_many_arguments)]
pub(crate) fn pack_a<T: GemmInput>(
    a: &MatRef<'_, T>,
    batch: usize,
    row0: usize,
    rows: usize,
    k0: usize,
    kc: usize,
    mr: usize,
    dst: &mut [f32],
) {
    let base = a.offset + batch * a.batch_stride;
    for (panel, panel_dst) in dst
        .chunks_exact_mut(kc * mr)
        .take(rows.div_ceil(mr))
        .enumerate()
    {
        for r in 0..mr {
            let i = panel * mr + r;
            if i >= rows {
                for k in 0..kc {
                    panel_dst[k * mr + r] = 0.0;
                }
                continue;
            }
            let row_base = base + (row0 + i) * a.row_stride + k0 * a.col_stride;
            for k in 0..kc {
                panel_dst[k * mr + r] = a.data[row_base + k * a.col_stride].to_f32();
            }
        }
    }
}

/// Packs reduction rows `k0 .. k0 + kc` and columns `col0 .. col0 + cols` of batch `batch` of
/// `b` into `ceil(cols / nr)` panels of `kc * nr` floats each.
#[allow(clippy::too_many_arguments)]
pub(crate) fn pack_b<T: GemmInput>(
    b: &MatRef<'_, T>,
    batch: usize,
    k0: usize,
    kc: usize,
    col0: usize,
    cols: usize,
    nr: usize,
    dst: &mut [f32],
) {
    let base = b.offset + batch * b.batch_stride;
    for (panel, panel_dst) in dst
        .chunks_exact_mut(kc * nr)
        .take(cols.div_ceil(nr))
        .enumerate()
    {
        let j0 = panel * nr;
        let width = nr.min(cols - j0);
        if b.row_stride == 1 && b.col_stride != 1 {
            // B stored transposed: walk each column's terms contiguously.
            for j in 0..width {
                let src = base + k0 + (col0 + j0 + j) * b.col_stride;
                for (k, &x) in b.data[src..src + kc].iter().enumerate() {
                    panel_dst[k * nr + j] = x.to_f32();
                }
            }
            for k in 0..kc {
                panel_dst[k * nr + width..(k + 1) * nr].fill(0.0);
            }
            continue;
        }
        for k in 0..kc {
            let src = base + (k0 + k) * b.row_stride + (col0 + j0) * b.col_stride;
            let dst_row = &mut panel_dst[k * nr..(k + 1) * nr];
            if b.col_stride == 1 {
                T::copy_to_f32(&b.data[src..src + width], &mut dst_row[..width]);
            } else {
                for (j, d) in dst_row[..width].iter_mut().enumerate() {
                    *d = b.data[src + j * b.col_stride].to_f32();
                }
            }
            dst_row[width..].fill(0.0);
        }
    }
}
