//! Element arithmetic shared by the reduction, normalization, softmax and attention families.
//!
//! - [`Num`]: every numeric element type (f32, f64, integers) with the operations reductions need:
//!   integers wrap, floats follow contract sections `canonical-sum` and `reduce-extrema`.
//! - [`Real`]: the two working precisions of float ops, f32 (which also computes f16 and bf16
//!   tensors: exact widening on read, one rounding at the store) and f64 (same formulas and
//!   orders in binary64).
//! - [`fold_axis`]: the canonical tiled fold over the middle axis of `[outer, len, inner]`, the
//!   scalar form of `samebits_kernels::reduce_f32` for the other element types.
//! - [`permute`]: a row-major transpose, used to bring reduced axes together.

use crate::{OpError, Result, bail, normalize_axis, unsupported};
use half::{bf16, f16};
use samebits_ir::{DType, Element, Tensor};
use samebits_kernels::{canonical_fold, canonical_max, canonical_min};
use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt::Debug;
use std::ops::{Add, Div, Mul, Neg, Sub};

/// A numeric element with reduction arithmetic.
pub trait Num: Element + Copy + Default + Debug + Send + Sync {
    const ZERO: Self;
    const ONE: Self;
    /// The empty max: `-inf`, or the type's minimum.
    const LOWEST: Self;
    /// The empty min: `+inf`, or the type's maximum.
    const HIGHEST: Self;
    fn add(self, other: Self) -> Self;
    fn mul(self, other: Self) -> Self;
    /// `p + x * x`: one fused multiply-add for floats (contract: canonical-sum, dot products).
    fn add_square(p: Self, x: Self) -> Self;
    /// `max` / `min` of contract section `reduce-extrema` (plain for integers).
    fn max(self, other: Self) -> Self;
    fn min(self, other: Self) -> Self;
    fn abs(self) -> Self;
    fn is_nan(self) -> bool;
    /// Total order of non-NaN values, with `-0.0 < +0.0`.
    fn order(self, other: Self) -> Ordering;
    /// The (truncated, wrapping) integer count `n`, or its float value.
    fn from_count(n: usize) -> Self;
    /// `self / other`, integers truncating; integer division by zero gives zero.
    fn divide(self, other: Self) -> Self;
    /// `v` converted with Rust's `as` (integers truncate toward zero and saturate).
    fn from_f64(v: f64) -> Self;
}

macro_rules! int_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            fn add(self, other: Self) -> Self { self.wrapping_add(other) }
            fn mul(self, other: Self) -> Self { self.wrapping_mul(other) }
            fn add_square(p: Self, x: Self) -> Self { p.wrapping_add(x.wrapping_mul(x)) }
            fn max(self, other: Self) -> Self { Ord::max(self, other) }
            fn min(self, other: Self) -> Self { Ord::min(self, other) }
            #[allow(unused_comparisons)]
            fn abs(self) -> Self { if self < 0 { (0 as $t).wrapping_sub(self) } else { self } }
            fn is_nan(self) -> bool { false }
            fn order(self, other: Self) -> Ordering { self.cmp(&other) }
            fn from_count(n: usize) -> Self { n as $t }
            fn divide(self, other: Self) -> Self { self.checked_div(other).unwrap_or(0) }
            fn from_f64(v: f64) -> Self { v as $t }
        }
    )*};
}
int_num!(i8, i16, i32, i64, u8, u16, u32, u64);

impl Num for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    const LOWEST: Self = f32::NEG_INFINITY;
    const HIGHEST: Self = f32::INFINITY;
    fn add(self, other: Self) -> Self {
        self + other
    }
    fn mul(self, other: Self) -> Self {
        self * other
    }
    fn add_square(p: Self, x: Self) -> Self {
        x.mul_add(x, p)
    }
    fn max(self, other: Self) -> Self {
        canonical_max(self, other)
    }
    fn min(self, other: Self) -> Self {
        canonical_min(self, other)
    }
    fn abs(self) -> Self {
        f32::abs(self)
    }
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    fn order(self, other: Self) -> Ordering {
        self.total_cmp(&other)
    }
    fn from_count(n: usize) -> Self {
        n as f32
    }
    fn divide(self, other: Self) -> Self {
        self / other
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

impl Num for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    const LOWEST: Self = f64::NEG_INFINITY;
    const HIGHEST: Self = f64::INFINITY;
    fn add(self, other: Self) -> Self {
        self + other
    }
    fn mul(self, other: Self) -> Self {
        self * other
    }
    fn add_square(p: Self, x: Self) -> Self {
        x.mul_add(x, p)
    }
    fn max(self, other: Self) -> Self {
        canonical_max(self, other)
    }
    fn min(self, other: Self) -> Self {
        canonical_min(self, other)
    }
    fn abs(self) -> Self {
        f64::abs(self)
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    fn order(self, other: Self) -> Ordering {
        self.total_cmp(&other)
    }
    fn from_count(n: usize) -> Self {
        n as f64
    }
    fn divide(self, other: Self) -> Self {
        self / other
    }
    fn from_f64(v: f64) -> Self {
        v
    }
}

/// The canonical fold (contract: canonical-sum) of `data` viewed as `[outer, len, inner]` over
/// its middle axis: tiles of 64 terms, each `p = step(p, x_k)` from `init`, partials folded left
/// to right with `fold`; `len = 0` gives `init`. Output `[outer, inner]`.
pub fn fold_axis<T: Copy>(
    data: &[T],
    (outer, len, inner): (usize, usize, usize),
    init: T,
    step: impl Fn(T, T) -> T,
    fold: impl Fn(T, T) -> T,
) -> Vec<T> {
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| data[(o * len + k) * inner + i];
            let total = canonical_fold(len, init, |p, k| step(p, at(k)), &fold);
            out.push(total);
        }
    }
    out
}

/// A float working precision: f32 (for f32, f16 and bf16 tensors) or f64.
pub trait Real:
    Num
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    fn from_f32(v: f32) -> Self;
    fn sqrt(self) -> Self;
    fn is_finite(self) -> bool;
    /// The elements of a float tensor at this precision (f32 widens f16 and bf16 exactly);
    /// `what` names the input in errors.
    fn read<'a>(t: &'a Tensor, what: &str) -> Result<Cow<'a, [Self]>>;
    /// A tensor of `dtype` from values at this precision (one rounding for f16 and bf16).
    fn store(dtype: DType, shape: Vec<usize>, values: Vec<Self>) -> Result<Tensor>;
    /// Canonical sum (contract: canonical-sum) of `x[k * stride]`, `k < len`.
    fn sum_strided(x: &[Self], stride: usize, len: usize) -> Self {
        fold_axis(x, (1, len, stride), Self::ZERO, Num::add, Num::add)[0]
    }
    /// Canonical dot product of `a[k * sa]` and `b[k * sb]`, `k < len` (fused steps).
    fn dot_strided(a: &[Self], sa: usize, b: &[Self], sb: usize, len: usize) -> Self;
    /// `e^self`: correctly rounded (samebits-math) when `correctly_rounded`, else Rust std.
    /// f64 always uses Rust std (outside the contract).
    fn exp(self, correctly_rounded: bool) -> Self;
    /// Natural logarithm, chosen like [`Real::exp`].
    fn ln(self, correctly_rounded: bool) -> Self;
    /// `dst[i] = src[i].exp(correctly_rounded)`: the same values, through samebits-math's
    /// slice loop (vectorised where available) for f32.
    fn exp_slice(src: &[Self], dst: &mut [Self], correctly_rounded: bool) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = s.exp(correctly_rounded);
        }
    }
}

impl Real for f32 {
    fn from_f32(v: f32) -> Self {
        v
    }
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    fn is_finite(self) -> bool {
        f32::is_finite(self)
    }
    fn read<'a>(t: &'a Tensor, what: &str) -> Result<Cow<'a, [f32]>> {
        Ok(match t.dtype() {
            DType::F32 => Cow::Borrowed(t.as_slice::<f32>()?),
            DType::F16 => Cow::Owned(t.as_slice::<f16>()?.iter().map(|v| v.to_f32()).collect()),
            DType::BF16 => Cow::Owned(t.as_slice::<bf16>()?.iter().map(|v| v.to_f32()).collect()),
            other => bail!("{what} must be a float tensor (f32, f16, bf16), got {other}"),
        })
    }
    fn store(dtype: DType, shape: Vec<usize>, values: Vec<f32>) -> Result<Tensor> {
        Ok(match dtype {
            DType::F32 => Tensor::from_vec(shape, values)?,
            DType::F16 => Tensor::from_vec(shape, values.into_iter().map(f16::from_f32).collect())?,
            DType::BF16 => {
                Tensor::from_vec(shape, values.into_iter().map(bf16::from_f32).collect())?
            }
            other => unsupported!("storing f32 results as {other}"),
        })
    }
    fn exp(self, correctly_rounded: bool) -> f32 {
        if correctly_rounded {
            samebits_math::exp(self)
        } else {
            f32::exp(self)
        }
    }
    fn exp_slice(src: &[f32], dst: &mut [f32], correctly_rounded: bool) {
        if correctly_rounded {
            samebits_math::exp_slice(src, dst);
        } else {
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = f32::exp(s);
            }
        }
    }
    fn ln(self, correctly_rounded: bool) -> f32 {
        if correctly_rounded {
            samebits_math::log(self)
        } else {
            f32::ln(self)
        }
    }
    fn sum_strided(x: &[f32], stride: usize, len: usize) -> f32 {
        samebits_kernels::canonical_sum_strided(x, stride, len)
    }
    fn dot_strided(a: &[f32], sa: usize, b: &[f32], sb: usize, len: usize) -> f32 {
        samebits_kernels::canonical_dot_strided(a, sa, b, sb, len)
    }
}

impl Real for f64 {
    fn from_f32(v: f32) -> Self {
        v as f64
    }
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    fn is_finite(self) -> bool {
        f64::is_finite(self)
    }
    fn read<'a>(t: &'a Tensor, what: &str) -> Result<Cow<'a, [f64]>> {
        match t.dtype() {
            DType::F64 => Ok(Cow::Borrowed(t.as_slice::<f64>()?)),
            other => bail!("{what} must be f64 like the other inputs, got {other}"),
        }
    }
    fn store(dtype: DType, shape: Vec<usize>, values: Vec<f64>) -> Result<Tensor> {
        match dtype {
            DType::F64 => Ok(Tensor::from_vec(shape, values)?),
            other => unsupported!("storing f64 results as {other}"),
        }
    }
    fn exp(self, _: bool) -> f64 {
        f64::exp(self)
    }
    fn ln(self, _: bool) -> f64 {
        f64::ln(self)
    }
    fn dot_strided(a: &[f64], sa: usize, b: &[f64], sb: usize, len: usize) -> f64 {
        canonical_fold(
            len,
            0.0,
            |p, k| a[k * sa].mul_add(b[k * sb], p),
            |s, p| s + p,
        )
    }
}

/// Runs `$body` with `$R` bound to the working precision of float dtype `$dtype` (f32 for f32,
/// f16 and bf16; f64 for f64); evaluates `$other` for every other dtype.
macro_rules! with_real_type {
    ($dtype:expr, $R:ident => $body:expr, else $other:expr) => {
        match $dtype {
            samebits_ir::DType::F32 | samebits_ir::DType::F16 | samebits_ir::DType::BF16 => {
                type $R = f32;
                $body
            }
            samebits_ir::DType::F64 => {
                type $R = f64;
                $body
            }
            _ => $other,
        }
    };
}
pub(crate) use with_real_type;

/// Runs `$body` with `$T` bound to the Rust type of a [`Num`] dtype (f32, f64 and the integers);
/// evaluates `$other` for f16, bf16, bool and string.
macro_rules! with_num_type {
    ($dtype:expr, $T:ident => $body:expr, else $other:expr) => {
        match $dtype {
            samebits_ir::DType::F32 => {
                type $T = f32;
                $body
            }
            samebits_ir::DType::F64 => {
                type $T = f64;
                $body
            }
            samebits_ir::DType::I8 => {
                type $T = i8;
                $body
            }
            samebits_ir::DType::I16 => {
                type $T = i16;
                $body
            }
            samebits_ir::DType::I32 => {
                type $T = i32;
                $body
            }
            samebits_ir::DType::I64 => {
                type $T = i64;
                $body
            }
            samebits_ir::DType::U8 => {
                type $T = u8;
                $body
            }
            samebits_ir::DType::U16 => {
                type $T = u16;
                $body
            }
            samebits_ir::DType::U32 => {
                type $T = u32;
                $body
            }
            samebits_ir::DType::U64 => {
                type $T = u64;
                $body
            }
            _ => $other,
        }
    };
}
pub(crate) use with_num_type;

/// `(outer, len, inner)`: a tensor viewed as `[outer, len, inner]`, reduced over `len`.
pub type Dims = (usize, usize, usize);

/// Normalised, sorted, distinct axes, or an error naming the bad axis.
pub fn normalize_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = normalize_axis(a, rank).map_err(|e| OpError::Invalid(format!("axes: {e}")))?;
        if out.contains(&n) {
            bail!("axes {axes:?} name axis {n} twice");
        }
        out.push(n);
    }
    out.sort_unstable();
    Ok(out)
}

/// How a tensor is reduced over sorted `axes`: the data order (a permutation bringing the
/// reduced axes last when they are not adjacent) and the `[outer, len, inner]` view.
pub struct Layout {
    pub perm: Option<Vec<usize>>,
    pub dims: Dims,
}

impl Layout {
    pub fn new(shape: &[usize], axes: &[usize]) -> Layout {
        let product = |it: &mut dyn Iterator<Item = usize>| it.product::<usize>();
        let adjacent = axes.windows(2).all(|w| w[1] == w[0] + 1);
        match (axes.first(), axes.last()) {
            (Some(&first), Some(&last)) if adjacent => Layout {
                perm: None,
                dims: (
                    product(&mut shape[..first].iter().copied()),
                    product(&mut shape[first..=last].iter().copied()),
                    product(&mut shape[last + 1..].iter().copied()),
                ),
            },
            _ => {
                let kept: Vec<usize> = (0..shape.len()).filter(|a| !axes.contains(a)).collect();
                let perm: Vec<usize> = kept.iter().chain(axes).copied().collect();
                Layout {
                    perm: Some(perm),
                    dims: (
                        product(&mut kept.iter().map(|&a| shape[a])),
                        product(&mut axes.iter().map(|&a| shape[a])),
                        1,
                    ),
                }
            }
        }
    }

    /// `data` in the order of the `[outer, len, inner]` view.
    pub fn arrange<T: Copy>(&self, data: Vec<T>, shape: &[usize]) -> Vec<T> {
        match &self.perm {
            Some(perm) => permute(&data, shape, perm),
            None => data,
        }
    }
}

/// `data` of row-major `shape` transposed so that output axis `i` is input axis `perm[i]`.
/// Where the last axis stays last (attention's `[b, s, h, d]` <-> `[b, h, s, d]`), its rows are
/// copied whole.
pub fn permute<T: Copy>(data: &[T], shape: &[usize], perm: &[usize]) -> Vec<T> {
    let rank = shape.len();
    let in_strides = crate::broadcast::strides(shape);
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let strides: Vec<usize> = perm.iter().map(|&p| in_strides[p]).collect();
    let total: usize = shape.iter().product();
    let mut out = Vec::with_capacity(total);
    if total == 0 {
        return out;
    }
    // Elements copied at once, and the output axes walked to find where each run starts.
    let (run, axes) = if rank > 1 && perm[rank - 1] == rank - 1 {
        (shape[rank - 1], rank - 1)
    } else {
        (1, rank)
    };
    let mut idx = vec![0usize; axes];
    let mut offset = 0usize;
    for _ in 0..total / run {
        out.extend_from_slice(&data[offset..offset + run]);
        for d in (0..axes).rev() {
            idx[d] += 1;
            offset += strides[d];
            if idx[d] < out_shape[d] {
                break;
            }
            offset -= strides[d] * out_shape[d];
            idx[d] = 0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permute_transposes_row_major() {
        // [2, 3] -> [3, 2]
        let x = [1, 2, 3, 4, 5, 6];
        assert_eq!(permute(&x, &[2, 3], &[1, 0]), vec![1, 4, 2, 5, 3, 6]);
        assert_eq!(permute(&x, &[2, 3], &[0, 1]), x.to_vec());
    }

    /// Every permutation of a rank-4 tensor (those that keep the last axis copy whole rows)
    /// against the output element read at its own input index.
    #[test]
    fn permute_matches_indexing_for_every_permutation() {
        let shape = [2, 3, 4, 5];
        let data: Vec<u32> = (0..120).collect();
        let strides = crate::broadcast::strides(&shape);
        for code in 0..256usize {
            let perm: [usize; 4] = std::array::from_fn(|i| code >> (2 * i) & 3);
            if (0..4).any(|i| perm[i + 1..].contains(&perm[i])) {
                continue;
            }
            let out_shape = perm.map(|p| shape[p]);
            let want: Vec<u32> = (0..120)
                .map(|flat| {
                    // The output index of `flat`, then the input element it reads.
                    let mut rest = flat;
                    let mut offset = 0;
                    for o in (0..4).rev() {
                        offset += rest % out_shape[o] * strides[perm[o]];
                        rest /= out_shape[o];
                    }
                    data[offset]
                })
                .collect();
            assert_eq!(permute(&data, &shape, &perm), want, "perm {perm:?}");
        }
    }

    #[test]
    fn fold_axis_matches_the_f32_kernel_order() {
        let x: Vec<f32> = (0..300).map(|i| 1.0 / (i as f32 + 0.37)).collect();
        let ours = fold_axis(&x, (1, 300, 1), 0.0f32, |p, v| p + v, |s, p| s + p);
        assert_eq!(ours[0], samebits_kernels::canonical_sum(&x));
        let wide: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let dot = f64::dot_strided(&wide, 1, &wide, 1, 300);
        let expect: f64 = fold_axis(&wide, (1, 300, 1), 0.0, f64::add_square, Num::add)[0];
        assert_eq!(dot, expect);
    }
}
