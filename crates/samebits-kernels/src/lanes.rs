//! SIMD lanes: `N` independent f32 lanes in one register type per ISA, each lane an IEEE f32
//! computed on its own (one operation = one rounding per lane, `fma` fused). Vector code that
//! makes lanes independent outputs, never parts of one sum (contract section `isa-dispatch`), is
//! written once over [`Lanes`] and compiled per ISA: the direct convolution (`conv/direct.rs`,
//! lanes = output columns) and the quantized row panels (`quant/panel.rs`, lanes = weight rows,
//! which add their block loads in an extension trait).
//!
//! Register types: `[f32; N]` (portable, `f32::mul_add`), and on x86-64 `__m256` (AVX2 + FMA),
//! `__m512` (AVX-512F) and [`Pair`] of either. The x86 methods are `#[inline(always)]` without
//! `#[target_feature]`: they are only ever inlined into a `#[target_feature]` function that
//! enables their ISA, after the feature was detected (`crate::isa`).

/// A register of `N` f32 lanes.
pub(crate) trait Lanes: Copy {
    const N: usize;
    /// # Safety
    /// The register type's ISA is available.
    unsafe fn zero() -> Self;
    /// # Safety
    /// As [`Lanes::zero`].
    unsafe fn splat(v: f32) -> Self;
    /// # Safety
    /// As [`Lanes::zero`], and `p` points to `N` readable floats.
    unsafe fn load(p: *const f32) -> Self;
    /// # Safety
    /// As [`Lanes::zero`], and `p` points to `N` writable floats.
    unsafe fn store(self, p: *mut f32);
    /// `fma(a, b, c)` per lane, one rounding.
    /// # Safety
    /// As [`Lanes::zero`].
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self;
    /// # Safety
    /// As [`Lanes::zero`].
    unsafe fn mul(a: Self, b: Self) -> Self;
    /// # Safety
    /// As [`Lanes::zero`].
    unsafe fn add(a: Self, b: Self) -> Self;
}

impl<const N: usize> Lanes for [f32; N] {
    const N: usize = N;
    #[inline(always)]
    unsafe fn zero() -> Self {
        [0.0; N]
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        [v; N]
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the caller passes N readable floats.
        unsafe { p.cast::<[f32; N]>().read_unaligned() }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the caller passes N writable floats.
        unsafe { p.cast::<[f32; N]>().write_unaligned(self) }
    }
    #[inline(always)]
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
        std::array::from_fn(|i| a[i].mul_add(b[i], c[i]))
    }
    #[inline(always)]
    unsafe fn mul(a: Self, b: Self) -> Self {
        std::array::from_fn(|i| a[i] * b[i])
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        std::array::from_fn(|i| a[i] + b[i])
    }
}

/// Two registers side by side: lanes `0..V::N` in `.0`, `V::N..2 V::N` in `.1`.
#[derive(Clone, Copy)]
pub(crate) struct Pair<V>(pub V, pub V);

impl<V: Lanes> Lanes for Pair<V> {
    const N: usize = 2 * V::N;
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: V's ISA is available (caller contract).
        unsafe { Pair(V::zero(), V::zero()) }
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        // SAFETY: as above.
        unsafe { Pair(V::splat(v), V::splat(v)) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: as above, and 2 V::N readable floats.
        unsafe { Pair(V::load(p), V::load(p.add(V::N))) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: as above, and 2 V::N writable floats.
        unsafe {
            self.0.store(p);
            self.1.store(p.add(V::N));
        }
    }
    #[inline(always)]
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
        // SAFETY: as above.
        unsafe { Pair(V::fma(a.0, b.0, c.0), V::fma(a.1, b.1, c.1)) }
    }
    #[inline(always)]
    unsafe fn mul(a: Self, b: Self) -> Self {
        // SAFETY: as above.
        unsafe { Pair(V::mul(a.0, b.0), V::mul(a.1, b.1)) }
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        // SAFETY: as above.
        unsafe { Pair(V::add(a.0, b.0), V::add(a.1, b.1)) }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! [`Lanes`] as one AVX-512 or one AVX2 register.
    use super::Lanes;
    use std::arch::x86_64::*;

    impl Lanes for __m512 {
        const N: usize = 16;
        #[inline(always)]
        unsafe fn zero() -> Self {
            // SAFETY: AVX-512F is available (caller contract).
            unsafe { _mm512_setzero_ps() }
        }
        #[inline(always)]
        unsafe fn splat(v: f32) -> Self {
            // SAFETY: as above.
            unsafe { _mm512_set1_ps(v) }
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            // SAFETY: as above, and 16 readable floats.
            unsafe { _mm512_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            // SAFETY: as above, and 16 writable floats.
            unsafe { _mm512_storeu_ps(p, self) }
        }
        #[inline(always)]
        unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
            // SAFETY: as above.
            unsafe { _mm512_fmadd_ps(a, b, c) }
        }
        #[inline(always)]
        unsafe fn mul(a: Self, b: Self) -> Self {
            // SAFETY: as above.
            unsafe { _mm512_mul_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn add(a: Self, b: Self) -> Self {
            // SAFETY: as above.
            unsafe { _mm512_add_ps(a, b) }
        }
    }

    impl Lanes for __m256 {
        const N: usize = 8;
        #[inline(always)]
        unsafe fn zero() -> Self {
            // SAFETY: AVX2 and FMA are available (caller contract).
            unsafe { _mm256_setzero_ps() }
        }
        #[inline(always)]
        unsafe fn splat(v: f32) -> Self {
            // SAFETY: as above.
            unsafe { _mm256_set1_ps(v) }
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            // SAFETY: as above, and 8 readable floats.
            unsafe { _mm256_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            // SAFETY: as above, and 8 writable floats.
            unsafe { _mm256_storeu_ps(p, self) }
        }
        #[inline(always)]
        unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
            // SAFETY: as above.
            unsafe { _mm256_fmadd_ps(a, b, c) }
        }
        #[inline(always)]
        unsafe fn mul(a: Self, b: Self) -> Self {
            // SAFETY: as above.
            unsafe { _mm256_mul_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn add(a: Self, b: Self) -> Self {
            // SAFETY: as above.
            unsafe { _mm256_add_ps(a, b) }
        }
    }
}
