//! Canonical reductions over one axis of a contiguous tensor viewed as `[outer, len, inner]`.
//!
//! Implements contract sections `canonical-sum` (sum, sum of squares, product) and
//! `reduce-extrema` (max, min, argmax, argmin) of docs/contract.md. Output `(o, i)` reduces
//! `data[(o * len + k) * inner + i]` over `k`. SIMD lanes are independent outputs (adjacent `i`
//! when `inner > 1`, adjacent `o` otherwise), each lane keeping its own chain in index order;
//! an output left alone with many terms (global pooling) runs its own tiles side by side
//! instead, each tile's chain in index order; rayon splits the outputs across threads. Lanes are plain arrays in `#[inline(always)]` code
//! instantiated inside `#[target_feature]` functions, so the compiler emits AVX2/AVX-512 code
//! for the same IEEE operations (`f32::mul_add` is always fused, nothing is contracted).

use rayon::prelude::*;

use crate::canonical::REDUCTION_TILE;
use crate::isa::Isa;

/// A reduction with a canonical order or, for extrema, an order-independent result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    /// `canonical-sum` with `p = p + x_k`; empty: `+0.0`.
    Sum,
    /// `canonical-sum` of squares, `p = fma(x_k, x_k, p)`; empty: `+0.0`.
    SumSquares,
    /// Tiles from `1.0` with `p = p * x_k`, folded with `*`; empty: `1.0`.
    Prod,
    /// Largest value, NaN if any is NaN (as `f32::NAN`), `-0.0 < +0.0`; empty: `-inf`.
    Max,
    /// Smallest value, NaN if any is NaN (as `f32::NAN`), `-0.0 < +0.0`; empty: `+inf`.
    Min,
}

/// One reduction: tile start value, tile step and partial fold.
trait Reducer: Copy + Send + Sync {
    const INIT: f32;
    fn step(p: f32, x: f32) -> f32;
    fn fold(s: f32, p: f32) -> f32;
}

#[derive(Clone, Copy)]
struct SumOp;
impl Reducer for SumOp {
    const INIT: f32 = 0.0;
    #[inline(always)]
    fn step(p: f32, x: f32) -> f32 {
        p + x
    }
    #[inline(always)]
    fn fold(s: f32, p: f32) -> f32 {
        s + p
    }
}

#[derive(Clone, Copy)]
struct SumSquaresOp;
impl Reducer for SumSquaresOp {
    const INIT: f32 = 0.0;
    #[inline(always)]
    fn step(p: f32, x: f32) -> f32 {
        x.mul_add(x, p)
    }
    #[inline(always)]
    fn fold(s: f32, p: f32) -> f32 {
        s + p
    }
}

#[derive(Clone, Copy)]
struct ProdOp;
impl Reducer for ProdOp {
    const INIT: f32 = 1.0;
    #[inline(always)]
    fn step(p: f32, x: f32) -> f32 {
        p * x
    }
    #[inline(always)]
    fn fold(s: f32, p: f32) -> f32 {
        s * p
    }
}

/// A float type with the extrema of contract section `reduce-extrema` (f32 and f64; f16 and
/// bf16 are computed in f32).
pub trait ExtremumFloat: Copy + PartialOrd {
    /// The NaN every NaN result takes: the default quiet NaN (`0x7fc00000` for f32), never an
    /// input's payload.
    const CANONICAL_NAN: Self;
    fn is_nan(self) -> bool;
    fn is_sign_negative(self) -> bool;
}

impl ExtremumFloat for f32 {
    const CANONICAL_NAN: f32 = f32::NAN;
    #[inline(always)]
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    #[inline(always)]
    fn is_sign_negative(self) -> bool {
        f32::is_sign_negative(self)
    }
}

impl ExtremumFloat for f64 {
    const CANONICAL_NAN: f64 = f64::NAN;
    #[inline(always)]
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    #[inline(always)]
    fn is_sign_negative(self) -> bool {
        f64::is_sign_negative(self)
    }
}

/// `max` of contract section `reduce-extrema`: the canonical NaN if either is NaN, else the
/// larger with `-0.0 < +0.0`. The one definition for every CPU op (reductions, pooling,
/// elementwise Max, scatter reductions); kernels/canonical.cu's `sb_canonical_max` is its CUDA
/// form.
///
/// Written without short-circuits (`|`, `&` on the tests), so a loop of them compiles to
/// compares and blends, with no branch on the data to mispredict.
#[inline(always)]
pub fn canonical_max<F: ExtremumFloat>(a: F, b: F) -> F {
    let nan = a.is_nan() | b.is_nan();
    let take_a = (a > b) | ((a == b) & b.is_sign_negative());
    if nan {
        F::CANONICAL_NAN
    } else if take_a {
        a
    } else {
        b
    }
}

/// `min` of contract section `reduce-extrema`: the canonical NaN if either is NaN, else the
/// smaller with `-0.0 < +0.0`. CUDA form: `sb_canonical_min` of kernels/canonical.cu.
/// Written without short-circuits, as [`canonical_max`].
#[inline(always)]
pub fn canonical_min<F: ExtremumFloat>(a: F, b: F) -> F {
    let nan = a.is_nan() | b.is_nan();
    let take_a = (a < b) | ((a == b) & a.is_sign_negative());
    if nan {
        F::CANONICAL_NAN
    } else if take_a {
        a
    } else {
        b
    }
}

#[derive(Clone, Copy)]
struct MaxOp;
impl Reducer for MaxOp {
    const INIT: f32 = f32::NEG_INFINITY;
    #[inline(always)]
    fn step(p: f32, x: f32) -> f32 {
        canonical_max(p, x)
    }
    #[inline(always)]
    fn fold(s: f32, p: f32) -> f32 {
        canonical_max(s, p)
    }
}

#[derive(Clone, Copy)]
struct MinOp;
impl Reducer for MinOp {
    const INIT: f32 = f32::INFINITY;
    #[inline(always)]
    fn step(p: f32, x: f32) -> f32 {
        canonical_min(p, x)
    }
    #[inline(always)]
    fn fold(s: f32, p: f32) -> f32 {
        canonical_min(s, p)
    }
}

/// Where the outputs of one run sit: lane `l`, term `k` is `x[l * lane_stride + k * k_stride]`.
#[derive(Clone, Copy)]
struct Lanes {
    lane_stride: usize,
    k_stride: usize,
    len: usize,
}

/// Reduces `L` lanes in the canonical order into `out[..L]`.
#[inline(always)]
fn reduce_lanes<R: Reducer, const L: usize>(x: &[f32], lanes: Lanes, out: &mut [f32]) {
    let mut total = [R::INIT; L];
    let mut tile_start = 0;
    while tile_start < lanes.len {
        let tile_end = (tile_start + REDUCTION_TILE).min(lanes.len);
        let mut partial = [R::INIT; L];
        for k in tile_start..tile_end {
            for (l, p) in partial.iter_mut().enumerate() {
                *p = R::step(*p, x[l * lanes.lane_stride + k * lanes.k_stride]);
            }
        }
        if tile_start == 0 {
            total = partial;
        } else {
            for (s, p) in total.iter_mut().zip(partial) {
                *s = R::fold(*s, p);
            }
        }
        tile_start = tile_end;
    }
    out[..L].copy_from_slice(&total);
}

/// Tiles of one long reduction summed side by side: the order of `reduce_lanes` for one lane.
const TILES_AT_ONCE: usize = 16;

/// Reduces one lane of many terms in the canonical order, [`TILES_AT_ONCE`] of its tiles side by
/// side: each tile is its own chain from `R::INIT`, so the chains are independent and their
/// steps overlap instead of waiting on one another; the partials are then folded in tile order,
/// the first taken as is (the bits of `reduce_lanes`).
#[inline(always)]
fn reduce_tiles<R: Reducer>(x: &[f32], lanes: Lanes) -> f32 {
    let Lanes { k_stride, len, .. } = lanes;
    let mut total: Option<f32> = None;
    let mut fold = |p: f32| {
        total = Some(match total {
            None => p,
            Some(s) => R::fold(s, p),
        })
    };
    let full_tiles = len / REDUCTION_TILE;
    let mut tile = 0;
    while tile + TILES_AT_ONCE <= full_tiles {
        let block = &x[tile * REDUCTION_TILE * k_stride..];
        let mut partial = [R::INIT; TILES_AT_ONCE];
        for k in 0..REDUCTION_TILE {
            for (t, p) in partial.iter_mut().enumerate() {
                *p = R::step(*p, block[(t * REDUCTION_TILE + k) * k_stride]);
            }
        }
        partial.into_iter().for_each(&mut fold);
        tile += TILES_AT_ONCE;
    }
    let mut start = tile * REDUCTION_TILE;
    while start < len {
        let end = (start + REDUCTION_TILE).min(len);
        fold((start..end).fold(R::INIT, |p, k| R::step(p, x[k * k_stride])));
        start = end;
    }
    total.unwrap_or(R::INIT)
}

/// Reduces `out.len()` consecutive lanes: blocks of 64 and 16 lanes, then single lanes (a long
/// one [`TILES_AT_ONCE`] tiles at a time).
#[inline(always)]
fn reduce_run<R: Reducer>(x: &[f32], lanes: Lanes, out: &mut [f32]) {
    let mut done = 0;
    while done < out.len() {
        let rest = &x[done * lanes.lane_stride..];
        let left = out.len() - done;
        let step = if left >= 64 {
            reduce_lanes::<R, 64>(rest, lanes, &mut out[done..]);
            64
        } else if left >= 16 {
            reduce_lanes::<R, 16>(rest, lanes, &mut out[done..]);
            16
        } else if lanes.len >= TILES_AT_ONCE * REDUCTION_TILE {
            out[done] = reduce_tiles::<R>(rest, lanes);
            1
        } else {
            reduce_lanes::<R, 1>(rest, lanes, &mut out[done..]);
            1
        };
        done += step;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
/// # Safety
/// The CPU supports AVX-512F.
unsafe fn reduce_run_avx512<R: Reducer>(x: &[f32], lanes: Lanes, out: &mut [f32]) {
    reduce_run::<R>(x, lanes, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
/// # Safety
/// The CPU supports AVX2 and FMA.
unsafe fn reduce_run_avx2<R: Reducer>(x: &[f32], lanes: Lanes, out: &mut [f32]) {
    reduce_run::<R>(x, lanes, out)
}

fn reduce_run_on<R: Reducer>(isa: Isa, x: &[f32], lanes: Lanes, out: &mut [f32]) {
    match isa {
        // SAFETY: `isa` comes from `Isa::active()`, which only returns available ISAs.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { reduce_run_avx512::<R>(x, lanes, out) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { reduce_run_avx2::<R>(x, lanes, out) },
        _ => reduce_run::<R>(x, lanes, out),
    }
}

/// Most outputs per parallel task.
const OUTPUTS_PER_TASK: usize = 256;
/// Terms per parallel task that long reductions (few outputs, each of many terms) aim for.
const TERMS_PER_TASK: usize = 1 << 14;

fn reduce_with<R: Reducer>(data: &[f32], len: usize, inner: usize, out: &mut [f32]) {
    if len == 0 {
        out.fill(R::INIT);
        return;
    }
    let isa = Isa::active();
    // Tiling only: each output is its own chain whatever task computes it.
    let per_task = (TERMS_PER_TASK / len).clamp(1, OUTPUTS_PER_TASK);
    out.par_chunks_mut(per_task)
        .enumerate()
        .for_each(|(task, chunk)| {
            let mut flat = task * per_task;
            let mut chunk = chunk;
            while !chunk.is_empty() {
                let (o, i) = (flat / inner, flat % inner);
                let (count, lanes, start) = if inner == 1 {
                    // Lanes are consecutive outer rows, each a contiguous run of `len` terms.
                    let lanes = Lanes {
                        lane_stride: len,
                        k_stride: 1,
                        len,
                    };
                    (chunk.len(), lanes, o * len)
                } else {
                    let lanes = Lanes {
                        lane_stride: 1,
                        k_stride: inner,
                        len,
                    };
                    (chunk.len().min(inner - i), lanes, o * len * inner + i)
                };
                let (run, rest) = chunk.split_at_mut(count);
                reduce_run_on::<R>(isa, &data[start..], lanes, run);
                chunk = rest;
                flat += count;
            }
        });
}

/// Reduces `data` viewed as `[outer, len, inner]` over the middle axis into `out`
/// (`[outer, inner]`), each output in the order of contract section `canonical-sum`
/// (or `reduce-extrema` for `Max` / `Min`).
pub fn reduce_f32(
    kind: ReduceKind,
    data: &[f32],
    outer: usize,
    len: usize,
    inner: usize,
    out: &mut [f32],
) {
    assert_eq!(data.len(), outer * len * inner, "reduce_f32: data length");
    assert_eq!(out.len(), outer * inner, "reduce_f32: output length");
    match kind {
        ReduceKind::Sum => reduce_with::<SumOp>(data, len, inner, out),
        ReduceKind::SumSquares => reduce_with::<SumSquaresOp>(data, len, inner, out),
        ReduceKind::Prod => reduce_with::<ProdOp>(data, len, inner, out),
        ReduceKind::Max => reduce_with::<MaxOp>(data, len, inner, out),
        ReduceKind::Min => reduce_with::<MinOp>(data, len, inner, out),
    }
}

/// Which extreme an arg-reduction looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    ArgMax,
    ArgMin,
}

/// Index of the extreme value along the middle axis of `[outer, len, inner]` (contract section
/// `reduce-extrema`): NaN counts as the extreme, `-0.0 < +0.0`, and ties (equal values, or
/// several NaNs) give the first index, or the last with `select_last_index`. `len` must be > 0.
pub fn argreduce_f32(
    kind: ArgKind,
    select_last_index: bool,
    data: &[f32],
    outer: usize,
    len: usize,
    inner: usize,
    out: &mut [i64],
) {
    assert!(len > 0, "argreduce_f32: empty reduction axis");
    assert_eq!(
        data.len(),
        outer * len * inner,
        "argreduce_f32: data length"
    );
    assert_eq!(out.len(), outer * inner, "argreduce_f32: output length");
    let reduce = |flat: usize| -> i64 {
        let (o, i) = (flat / inner, flat % inner);
        if inner == 1 {
            return arg_extreme_row(kind, select_last_index, &data[o * len..(o + 1) * len]) as i64;
        }
        let at = |k: usize| data[(o * len + k) * inner + i];
        let (mut best_k, mut best) = (0, extreme_key(kind, at(0)));
        for k in 1..len {
            let x = extreme_key(kind, at(k));
            if x > best || (select_last_index && x == best) {
                (best_k, best) = (k, x);
            }
        }
        best_k as i64
    };
    // One task's worth (an LLM's logits row) runs on the calling thread.
    if out.len() <= OUTPUTS_PER_TASK {
        for (flat, slot) in out.iter_mut().enumerate() {
            *slot = reduce(flat);
        }
        return;
    }
    out.par_chunks_mut(OUTPUTS_PER_TASK)
        .enumerate()
        .for_each(|(task, chunk)| {
            for (offset, slot) in chunk.iter_mut().enumerate() {
                *slot = reduce(task * OUTPUTS_PER_TASK + offset);
            }
        });
}

/// A key per value that orders as `reduce-extrema` does: `total_cmp`'s integer key for
/// non-NaN values (`-0 < +0`), negated for ArgMin, and for NaN `i32::MAX`, above every other
/// key (the largest non-NaN key, +inf's, is `0x7F80_0000`; negation cannot overflow for a
/// non-NaN key). A larger key is more extreme; equal keys are ties.
#[inline(always)]
fn extreme_key(kind: ArgKind, x: f32) -> i32 {
    let bits = x.to_bits() as i32;
    let ordered = bits ^ ((((bits >> 31) as u32) >> 1) as i32);
    let key = match kind {
        ArgKind::ArgMax => ordered,
        ArgKind::ArgMin => ordered.wrapping_neg(),
    };
    if x.is_nan() { i32::MAX } else { key }
}

/// Values per block of [`arg_extreme_row`]'s second pass, and independent lanes of its first.
const ARG_BLOCK: usize = 64;

/// The index of the extreme of a contiguous row (the first, or the last with `last`): the
/// largest key in one pass over independent lanes (branch-free, so it runs in SIMD
/// registers), then the block holding its first (last) occurrence and the place inside that
/// block. The same index as a scan in index order, in a few microseconds for an LLM's logits
/// row.
fn arg_extreme_row(kind: ArgKind, last: bool, row: &[f32]) -> usize {
    match Isa::active() {
        // SAFETY: `Isa::active()` only returns available ISAs.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { arg_extreme_row_avx512(kind, last, row) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { arg_extreme_row_avx2(kind, last, row) },
        _ => arg_extreme_row_any(kind, last, row),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
/// # Safety
/// The CPU supports AVX-512F.
unsafe fn arg_extreme_row_avx512(kind: ArgKind, last: bool, row: &[f32]) -> usize {
    arg_extreme_row_any(kind, last, row)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
/// # Safety
/// The CPU supports AVX2.
unsafe fn arg_extreme_row_avx2(kind: ArgKind, last: bool, row: &[f32]) -> usize {
    arg_extreme_row_any(kind, last, row)
}

#[inline(always)]
fn arg_extreme_row_any(kind: ArgKind, last: bool, row: &[f32]) -> usize {
    match kind {
        ArgKind::ArgMax => arg_extreme_row_of(|x| extreme_key(ArgKind::ArgMax, x), last, row),
        ArgKind::ArgMin => arg_extreme_row_of(|x| extreme_key(ArgKind::ArgMin, x), last, row),
    }
}

#[inline(always)]
fn arg_extreme_row_of(key: impl Fn(f32) -> i32 + Copy, last: bool, row: &[f32]) -> usize {
    let mut lanes = [i32::MIN; ARG_BLOCK];
    let blocks = row.chunks_exact(ARG_BLOCK);
    let tail = blocks.remainder();
    for block in blocks {
        for (lane, &x) in lanes.iter_mut().zip(block) {
            *lane = (*lane).max(key(x));
        }
    }
    let best = tail
        .iter()
        .map(|&x| key(x))
        .chain(lanes)
        .fold(i32::MIN, i32::max);
    let holds = |block: &[f32]| {
        let mut found = [false; ARG_BLOCK];
        for (f, &x) in found.iter_mut().zip(block) {
            *f = key(x) == best;
        }
        found.iter().fold(false, |a, &f| a | f)
    };
    let is_best = |&x: &f32| key(x) == best;
    let mut blocks = row.chunks(ARG_BLOCK).enumerate();
    let found = match last {
        false => blocks
            .find(|(_, b)| holds(b))
            .and_then(|(n, b)| Some(n * ARG_BLOCK + b.iter().position(is_best)?)),
        true => blocks
            .rfind(|(_, b)| holds(b))
            .and_then(|(n, b)| Some(n * ARG_BLOCK + b.iter().rposition(is_best)?)),
    };
    found.expect("the row's largest key occurs in it")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering;

    /// Every sign and NaN case: infinities, ±1, ±0, the default NaN, a NaN with a payload and a
    /// negative NaN.
    const SPECIAL: [f32; 9] = [
        f32::NEG_INFINITY,
        -1.0,
        -0.0,
        0.0,
        1.0,
        f32::INFINITY,
        f32::NAN,
        f32::from_bits(0x7fc0_1234),
        f32::from_bits(0xffc0_0000),
    ];

    /// The rule of contract section `reduce-extrema` through a total order: the canonical NaN
    /// when either is NaN, else the greatest (`max`) or least of the two with `-0.0 < +0.0`.
    fn extremum_rule(a: f32, b: f32, want: Ordering) -> u32 {
        if a.is_nan() || b.is_nan() {
            0x7fc0_0000
        } else if a.total_cmp(&b) == want {
            a.to_bits()
        } else {
            b.to_bits()
        }
    }

    /// Every pair and triple of special values (infinities, signed zeros, NaNs with and without
    /// payloads or sign) in every order: the index the contract's rule picks, written as a
    /// pairwise comparison (NaN most extreme, `total_cmp` otherwise, ties to the first or last).
    #[test]
    fn argreduce_follows_the_pairwise_rule_on_special_values() {
        let rule = |kind: ArgKind, last: bool, row: &[f32]| -> i64 {
            let more = |x: f32, best: f32| match (x.is_nan(), best.is_nan()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => match kind {
                    ArgKind::ArgMax => x.total_cmp(&best),
                    ArgKind::ArgMin => best.total_cmp(&x),
                },
            };
            let mut best = 0;
            for k in 1..row.len() {
                match more(row[k], row[best]) {
                    Ordering::Greater => best = k,
                    Ordering::Equal if last => best = k,
                    _ => {}
                }
            }
            best as i64
        };
        let mut rows: Vec<Vec<f32>> = Vec::new();
        for a in SPECIAL {
            for b in SPECIAL {
                rows.push(vec![a, b]);
                for c in SPECIAL {
                    rows.push(vec![a, b, c]);
                }
            }
        }
        for row in &rows {
            for kind in [ArgKind::ArgMax, ArgKind::ArgMin] {
                for last in [false, true] {
                    let mut out = [0i64; 1];
                    argreduce_f32(kind, last, row, 1, row.len(), 1, &mut out);
                    assert_eq!(
                        out[0],
                        rule(kind, last, row),
                        "{kind:?} last={last} {row:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn extrema_follow_the_contract_for_every_sign_and_nan_pair() {
        for a in SPECIAL {
            for b in SPECIAL {
                let (max, min) = (canonical_max(a, b), canonical_min(a, b));
                assert_eq!(
                    max.to_bits(),
                    extremum_rule(a, b, Ordering::Greater),
                    "max({a}, {b})"
                );
                assert_eq!(
                    min.to_bits(),
                    extremum_rule(a, b, Ordering::Less),
                    "min({a}, {b})"
                );
                // f64 follows the same rule (its canonical NaN is f64::NAN).
                let (a64, b64) = (a as f64, b as f64);
                let (max64, min64) = (canonical_max(a64, b64), canonical_min(a64, b64));
                if a.is_nan() || b.is_nan() {
                    assert_eq!(max64.to_bits(), f64::NAN.to_bits());
                    assert_eq!(min64.to_bits(), f64::NAN.to_bits());
                } else {
                    assert_eq!(
                        max64.to_bits(),
                        (max as f64).to_bits(),
                        "max({a}, {b}) in f64"
                    );
                    assert_eq!(
                        min64.to_bits(),
                        (min as f64).to_bits(),
                        "min({a}, {b}) in f64"
                    );
                }
            }
        }
    }

    #[test]
    fn signed_zeros_are_ordered_and_nan_is_canonical() {
        let bits = |v: f32| v.to_bits();
        assert_eq!(bits(canonical_max(-0.0, 0.0)), bits(0.0));
        assert_eq!(bits(canonical_max(0.0, -0.0)), bits(0.0));
        assert_eq!(bits(canonical_max(-0.0, -0.0)), bits(-0.0));
        assert_eq!(bits(canonical_min(-0.0, 0.0)), bits(-0.0));
        assert_eq!(bits(canonical_min(0.0, -0.0)), bits(-0.0));
        assert_eq!(bits(canonical_min(0.0, 0.0)), bits(0.0));
        assert_eq!(bits(f32::CANONICAL_NAN), 0x7fc0_0000);
        assert_eq!(
            bits(canonical_max(f32::from_bits(0xffc0_0001), 1.0)),
            0x7fc0_0000
        );
        assert_eq!(
            bits(canonical_min(1.0, f32::from_bits(0x7f80_0001))),
            0x7fc0_0000
        );
    }
}
