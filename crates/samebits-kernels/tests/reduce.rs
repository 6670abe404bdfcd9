//! Axis reductions against the scalar canonical oracle, bit for bit, on every ISA and thread count.

mod common;

use common::{Rng, assert_bits_eq, on_every_isa, on_threads};
use samebits_kernels::{
    ArgKind, Isa, ReduceKind, argreduce_f32, canonical_max, canonical_min, canonical_prod_strided,
    canonical_sum_squares_strided, canonical_sum_strided, reduce_f32,
};

const SHAPES: [(usize, usize, usize); 13] = [
    (1, 0, 5),
    (3, 1, 1),
    (2, 63, 17),
    (5, 64, 1),
    (4, 65, 70),
    (2, 1000, 3),
    (1, 130, 200),
    (7, 100, 1),
    (300, 20, 1),
    (3, 129, 16),
    // Long rows, few of them (global pooling): their tiles are summed side by side.
    (3, 25_617, 1),
    (1, 16 * 64, 1),
    (2, 33 * 64 + 5, 3),
];

fn oracle(kind: ReduceKind, data: &[f32], outer: usize, len: usize, inner: usize) -> Vec<f32> {
    let mut out = Vec::new();
    for o in 0..outer {
        for i in 0..inner {
            let x = data.get(o * len * inner + i..).unwrap_or(&[]);
            let terms = (0..len).map(|k| x[k * inner]);
            out.push(match kind {
                ReduceKind::Sum => canonical_sum_strided(x, inner, len),
                ReduceKind::SumSquares => canonical_sum_squares_strided(x, inner, len),
                ReduceKind::Prod => canonical_prod_strided(x, inner, len),
                ReduceKind::Max => terms.fold(f32::NEG_INFINITY, canonical_max),
                ReduceKind::Min => terms.fold(f32::INFINITY, canonical_min),
            });
        }
    }
    out
}

fn run(kind: ReduceKind, data: &[f32], outer: usize, len: usize, inner: usize) -> Vec<f32> {
    let mut out = vec![f32::NAN; outer * inner];
    reduce_f32(kind, data, outer, len, inner, &mut out);
    out
}

const KINDS: [ReduceKind; 5] = [
    ReduceKind::Sum,
    ReduceKind::SumSquares,
    ReduceKind::Prod,
    ReduceKind::Max,
    ReduceKind::Min,
];

#[test]
fn every_kind_and_shape_matches_oracle_on_every_isa() {
    let mut rng = Rng::new(11);
    for (outer, len, inner) in SHAPES {
        let mut data = rng.vec(outer * len * inner);
        for kind in KINDS {
            if kind == ReduceKind::Prod {
                // Keep products finite and non-trivial: factors near 1.
                data.iter_mut().for_each(|x| *x = 1.0 + *x / 64.0);
            }
            let want = oracle(kind, &data, outer, len, inner);
            for (isa, got) in on_every_isa(|| run(kind, &data, outer, len, inner)) {
                assert_bits_eq(
                    &got,
                    &want,
                    &format!("{kind:?} [{outer},{len},{inner}] on {isa}"),
                );
            }
        }
    }
}

#[test]
fn thread_count_does_not_change_bits() {
    let mut rng = Rng::new(12);
    // Many short rows, and a few long ones whose tiles are summed side by side.
    for (outer, len, inner) in [(9, 300, 130), (3, 25_617, 1)] {
        let data = rng.vec(outer * len * inner);
        for isa in Isa::available() {
            for kind in [ReduceKind::Sum, ReduceKind::SumSquares] {
                let one = on_threads(1, isa, || run(kind, &data, outer, len, inner));
                for threads in [2, 4] {
                    let many = on_threads(threads, isa, || run(kind, &data, outer, len, inner));
                    assert_bits_eq(
                        &many,
                        &one,
                        &format!(
                            "{kind:?} [{outer},{len},{inner}] on {isa}: {threads} vs 1 thread"
                        ),
                    );
                }
            }
        }
    }
}

#[test]
fn extrema_propagate_nan_and_order_signed_zeros() {
    // [outer = 1, len = 3, inner = 4]: lanes (+0,-0,+0) (-0,-0,-0) (1,NaN,2) (-inf,-inf,-inf).
    let data = [
        0.0,
        -0.0,
        1.0,
        f32::NEG_INFINITY, //
        -0.0,
        -0.0,
        f32::NAN,
        f32::NEG_INFINITY, //
        0.0,
        -0.0,
        2.0,
        f32::NEG_INFINITY,
    ];
    for isa in Isa::available() {
        let max = samebits_kernels::with_isa(isa, || run(ReduceKind::Max, &data, 1, 3, 4));
        let min = samebits_kernels::with_isa(isa, || run(ReduceKind::Min, &data, 1, 3, 4));
        assert_bits_eq(&max, &[0.0, -0.0, f32::NAN, f32::NEG_INFINITY], "max");
        assert_bits_eq(&min, &[-0.0, -0.0, f32::NAN, f32::NEG_INFINITY], "min");
    }
}

#[test]
fn argreduce_tie_and_nan_rules() {
    // One row of 6 values, inner = 1.
    let data = [1.0, 3.0, -0.0, 3.0, 0.0, -5.0];
    let arg = |kind, last, data: &[f32]| {
        let mut out = [0i64; 1];
        argreduce_f32(kind, last, data, 1, data.len(), 1, &mut out);
        out[0]
    };
    assert_eq!(arg(ArgKind::ArgMax, false, &data), 1);
    assert_eq!(arg(ArgKind::ArgMax, true, &data), 3);
    assert_eq!(arg(ArgKind::ArgMin, false, &data), 5);
    let zeros = [0.0, -0.0, 0.0, -0.0];
    assert_eq!(arg(ArgKind::ArgMax, false, &zeros), 0);
    assert_eq!(arg(ArgKind::ArgMax, true, &zeros), 2);
    assert_eq!(arg(ArgKind::ArgMin, false, &zeros), 1);
    assert_eq!(arg(ArgKind::ArgMin, true, &zeros), 3);
    let nans = [1.0, f32::NAN, 7.0, f32::NAN];
    assert_eq!(arg(ArgKind::ArgMax, false, &nans), 1);
    assert_eq!(arg(ArgKind::ArgMin, false, &nans), 1);
    assert_eq!(arg(ArgKind::ArgMax, true, &nans), 3);
}

#[test]
fn argreduce_matches_naive_scan_over_inner_lanes() {
    let mut rng = Rng::new(13);
    let (outer, len, inner) = (3, 50, 7);
    // Few distinct values so that ties are common.
    let data: Vec<f32> = (0..outer * len * inner)
        .map(|_| rng.below(5) as f32)
        .collect();
    for last in [false, true] {
        let mut got = vec![0i64; outer * inner];
        argreduce_f32(ArgKind::ArgMax, last, &data, outer, len, inner, &mut got);
        for o in 0..outer {
            for i in 0..inner {
                let vals: Vec<f32> = (0..len).map(|k| data[(o * len + k) * inner + i]).collect();
                let max = vals.iter().cloned().fold(f32::MIN, f32::max);
                let want = if last {
                    vals.iter().rposition(|&v| v == max)
                } else {
                    vals.iter().position(|&v| v == max)
                };
                assert_eq!(
                    got[o * inner + i],
                    want.unwrap() as i64,
                    "({o}, {i}), last = {last}"
                );
            }
        }
    }
}

/// Contiguous rows (`inner = 1`, an LLM's logits) of lengths around the 64-value blocks of the
/// row search, with ties, signed zeros and NaNs, on every ISA path: the index a scan in index
/// order gives.
#[test]
fn argreduce_rows_match_naive_scan() {
    let mut rng = Rng::new(15);
    let pool = [
        1.0,
        2.0,
        -0.0,
        0.0,
        -3.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    for len in [1usize, 2, 63, 64, 65, 127, 128, 129, 1000, 49_152] {
        for trial in 0..6 {
            // Trial 0 draws from a few values (ties), 1 adds NaNs rarely, the rest are random.
            let data: Vec<f32> = (0..2 * len)
                .map(|_| match trial {
                    0 => pool[rng.below(6)],
                    1 if rng.below(500) == 0 => pool[7],
                    1 => pool[rng.below(7)],
                    _ => rng.vec(1)[0],
                })
                .collect();
            for kind in [ArgKind::ArgMax, ArgKind::ArgMin] {
                for last in [false, true] {
                    let mut got = [0i64; 2];
                    let on_isas = on_every_isa(|| {
                        argreduce_f32(kind, last, &data, 2, len, 1, &mut got);
                        got
                    });
                    for (isa, got) in on_isas {
                        for (o, &g) in got.iter().enumerate() {
                            let row = &data[o * len..(o + 1) * len];
                            let more = |a: f32, b: f32| match (a.is_nan(), b.is_nan()) {
                                (true, _) => !b.is_nan(),
                                (false, true) => false,
                                _ => match kind {
                                    ArgKind::ArgMax => a.total_cmp(&b).is_gt(),
                                    ArgKind::ArgMin => a.total_cmp(&b).is_lt(),
                                },
                            };
                            let mut want = 0;
                            for k in 1..len {
                                let tie = !more(row[k], row[want]) && !more(row[want], row[k]);
                                if more(row[k], row[want]) || (last && tie) {
                                    want = k;
                                }
                            }
                            assert_eq!(
                                g, want as i64,
                                "{isa:?}: len {len} trial {trial} {kind:?} last {last}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn sums_are_close_to_float64() {
    let mut rng = Rng::new(14);
    let (outer, len, inner) = (2, 5000, 3);
    let data = rng.vec(outer * len * inner);
    let got = run(ReduceKind::Sum, &data, outer, len, inner);
    for o in 0..outer {
        for i in 0..inner {
            let terms = (0..len).map(|k| data[(o * len + k) * inner + i] as f64);
            let (exact, magnitude) = terms.fold((0.0, 0.0), |(s, m), t| (s + t, m + t.abs()));
            let err = (got[o * inner + i] as f64 - exact).abs();
            assert!(
                err <= 1e-5 * magnitude,
                "({o}, {i}): {} vs {exact}",
                got[o * inner + i]
            );
        }
    }
}
