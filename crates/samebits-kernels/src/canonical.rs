//! Scalar reference definitions of the canonical reduction order.
//!
//! Implements contract section `canonical-sum` (docs/contract.md) in the plainest possible form.
//! These functions are the oracle: every optimized kernel of this crate is tested against them
//! bit for bit. They favour clarity over speed.

/// Number of consecutive terms in one reduction tile (contract: canonical-sum, rule 1).
pub const REDUCTION_TILE: usize = 64;

/// The canonical fold (contract: canonical-sum) of `len` terms, for any element type: tiles of
/// [`REDUCTION_TILE`] consecutive terms, each tile a chain `p = step(p, k)` from `init` over its
/// term indices `k` in order, the tile partials folded left to right with `fold` (`s = p_0`,
/// then `s = fold(s, p_j)`: the first partial is taken as is). `len = 0` gives `init`.
///
/// Every reduction of the contract written as a scalar loop goes through this function (f32 and
/// f64 sums, products and dot products, integer sums); the SIMD kernels of this crate and the
/// CUDA kernels compute the same order and are tested against it.
#[inline(always)]
pub fn canonical_fold<T: Copy>(
    len: usize,
    init: T,
    step: impl Fn(T, usize) -> T,
    fold: impl Fn(T, T) -> T,
) -> T {
    let mut total: Option<T> = None;
    let mut tile_start = 0;
    while tile_start < len {
        let tile_end = (tile_start + REDUCTION_TILE).min(len);
        let mut partial = init;
        for k in tile_start..tile_end {
            partial = step(partial, k);
        }
        total = Some(match total {
            None => partial,
            Some(s) => fold(s, partial),
        });
        tile_start = tile_end;
    }
    total.unwrap_or(init)
}

/// Canonical dot product of two equally long slices: `p = fma(a_k, b_k, p)` per tile.
pub fn canonical_dot(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "canonical_dot: length mismatch");
    canonical_dot_strided(a, 1, b, 1, a.len())
}

/// Canonical dot product of `len` terms `a[k * a_stride] * b[k * b_stride]`.
///
/// On x86-64 CPUs with FMA the same code runs compiled for the FMA instruction instead of a
/// call to the software `fmaf` (one fused operation either way, so the same bits).
pub fn canonical_dot_strided(
    a: &[f32],
    a_stride: usize,
    b: &[f32],
    b_stride: usize,
    len: usize,
) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU supports FMA, checked just above.
        return unsafe { dot_strided_fma(a, a_stride, b, b_stride, len) };
    }
    dot_strided(a, a_stride, b, b_stride, len)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
fn dot_strided_fma(a: &[f32], a_stride: usize, b: &[f32], b_stride: usize, len: usize) -> f32 {
    dot_strided(a, a_stride, b, b_stride, len)
}

#[inline(always)]
fn dot_strided(a: &[f32], a_stride: usize, b: &[f32], b_stride: usize, len: usize) -> f32 {
    canonical_fold(
        len,
        0.0,
        |p, k| a[k * a_stride].mul_add(b[k * b_stride], p),
        |s, p| s + p,
    )
}

/// Canonical sum: `p = p + x_k` per tile.
pub fn canonical_sum(x: &[f32]) -> f32 {
    canonical_sum_strided(x, 1, x.len())
}

/// Canonical sum of `len` terms `x[k * stride]`.
pub fn canonical_sum_strided(x: &[f32], stride: usize, len: usize) -> f32 {
    canonical_fold(len, 0.0, |p, k| p + x[k * stride], |s, p| s + p)
}

/// Canonical sum of squares: the canonical dot product of `x` with itself
/// (`p = fma(x_k, x_k, p)`).
pub fn canonical_sum_squares_strided(x: &[f32], stride: usize, len: usize) -> f32 {
    canonical_dot_strided(x, stride, x, stride, len)
}

/// Canonical product: tiles start at `1.0`, `p = p * x_k`, partials folded with `*`.
pub fn canonical_prod(x: &[f32]) -> f32 {
    canonical_prod_strided(x, 1, x.len())
}

/// Canonical product of `len` terms `x[k * stride]`.
pub fn canonical_prod_strided(x: &[f32], stride: usize, len: usize) -> f32 {
    canonical_fold(len, 1.0, |p, k| p * x[k * stride], |s, p| s * p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_reductions_are_identities() {
        assert_eq!(canonical_sum(&[]).to_bits(), 0.0f32.to_bits());
        assert_eq!(canonical_dot(&[], &[]).to_bits(), 0.0f32.to_bits());
        assert_eq!(canonical_prod(&[]).to_bits(), 1.0f32.to_bits());
    }

    #[test]
    fn tiles_are_folded_left_to_right() {
        // 65 terms: tile 0 = 1e8 followed by 63 ones (absorbed one by one), tile 1 = a single 1.
        let mut x = vec![1.0f32; 65];
        x[0] = 1e8;
        let tile0 = (1..64).fold(1e8f32, |p, _| p + 1.0);
        assert_eq!(canonical_sum(&x), tile0 + 1.0);
        // A plain left fold gives the same here; a tile sum of the ones first would not.
        let ones_first = 1e8f32 + 64.0;
        assert_ne!(canonical_sum(&x), ones_first);
    }

    #[test]
    fn fold_is_generic_over_the_element_type() {
        // 130 integer terms: tiles [0, 64), [64, 128), [128, 130) with partials folded in order.
        let folded = canonical_fold(130, 0i64, |p, k| p * 2 + k as i64, |s, p| s * 3 + p);
        let tile = |r: std::ops::Range<i64>| r.fold(0i64, |p, k| p * 2 + k);
        let expected = (tile(0..64) * 3 + tile(64..128)) * 3 + tile(128..130);
        assert_eq!(folded, expected);
        assert_eq!(canonical_fold(0, 7i64, |p, _| p, |s, p| s + p), 7);
    }

    #[test]
    fn dot_uses_fused_multiply_add() {
        // (1 + 2^-12)^2 - 1 = 2^-11 + 2^-24 exactly when fused; an unfused product drops 2^-24.
        let a = 1.0f32 + 2f32.powi(-12);
        let r = canonical_dot(&[-1.0, a], &[1.0, a]);
        assert_eq!(r, 2f32.powi(-11) + 2f32.powi(-24));
    }

    #[test]
    fn first_partial_is_taken_as_is() {
        // A negative product underflowing to -0.0 must stay -0.0 (s = p_0, not 0 + p_0).
        let r = canonical_dot(&[-1e-30], &[1e-30]);
        assert_eq!(r.to_bits(), (-0.0f32).to_bits());
    }
}
