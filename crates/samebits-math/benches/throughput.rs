//! Throughput of every `UnaryFn`, scalar and over 4096-float slices, against Rust std's `f32`
//! methods (the platform libm), all three timed side by side in one run. Prints a markdown
//! table; a ratio above 1 means samebits is faster.
//!
//! Run: cargo bench -p samebits-math --bench throughput

use std::hint::black_box;
use std::time::Instant;

use samebits_math::UnaryFn;

const LEN: usize = 4096;

/// Rust std's version of `f`, where std has one.
fn libm(f: UnaryFn) -> Option<fn(f32) -> f32> {
    Some(match f {
        UnaryFn::Exp => f32::exp,
        UnaryFn::Exp2 => f32::exp2,
        UnaryFn::Expm1 => f32::exp_m1,
        UnaryFn::Log => f32::ln,
        UnaryFn::Log2 => f32::log2,
        UnaryFn::Log10 => f32::log10,
        UnaryFn::Log1p => f32::ln_1p,
        UnaryFn::Sin => f32::sin,
        UnaryFn::Cos => f32::cos,
        UnaryFn::Tan => f32::tan,
        UnaryFn::Asin => f32::asin,
        UnaryFn::Acos => f32::acos,
        UnaryFn::Atan => f32::atan,
        UnaryFn::Sinh => f32::sinh,
        UnaryFn::Cosh => f32::cosh,
        UnaryFn::Tanh => f32::tanh,
        UnaryFn::Asinh => f32::asinh,
        UnaryFn::Acosh => f32::acosh,
        UnaryFn::Atanh => f32::atanh,
        UnaryFn::Cbrt => f32::cbrt,
        UnaryFn::Exp10 | UnaryFn::Erf | UnaryFn::Erfc => return None,
    })
}

/// A typical input range of `f` (ML activations and arguments).
fn range(f: UnaryFn) -> (f32, f32) {
    match f {
        UnaryFn::Log | UnaryFn::Log2 | UnaryFn::Log10 | UnaryFn::Cbrt => (1e-3, 1e3),
        UnaryFn::Log1p => (-0.9, 100.0),
        UnaryFn::Acosh => (1.0, 100.0),
        UnaryFn::Asin | UnaryFn::Acos | UnaryFn::Atanh => (-0.99, 0.99),
        UnaryFn::Exp10 => (-30.0, 30.0),
        _ => (-10.0, 10.0),
    }
}

/// Nanoseconds per element of one call of `run` over the input slice (10 passes).
fn ns_per_elem(run: &mut dyn FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..10 {
        run();
    }
    start.elapsed().as_secs_f64() * 1e9 / (10 * LEN) as f64
}

/// Best time per element of each of `runs`, measured side by side: 30 rounds, each round
/// timing every run once in turn (A B C A B C ...), so that load drifts hit them alike.
fn side_by_side(runs: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    let mut best = vec![f64::MAX; runs.len()];
    for _ in 0..30 {
        for (b, run) in best.iter_mut().zip(runs.iter_mut()) {
            *b = b.min(ns_per_elem(*run));
        }
    }
    best
}

fn main() {
    println!(
        "| function | samebits scalar ns/elem | samebits slice ns/elem | libm ns/elem | ratio scalar (libm / samebits) | ratio slice (libm / samebits) |"
    );
    println!("|---|---|---|---|---|---|");
    for &f in UnaryFn::IMPLEMENTED {
        let (lo, hi) = range(f);
        let src: Vec<f32> = (0..LEN)
            .map(|i| lo + (hi - lo) * (i as f32 + 0.5) / LEN as f32)
            .collect();
        let mut d1 = vec![0.0f32; LEN];
        let mut d2 = vec![0.0f32; LEN];
        let mut d3 = vec![0.0f32; LEN];
        let mut scalar = || {
            for (d, &s) in d1.iter_mut().zip(&src) {
                *d = f.eval(black_box(s));
            }
            black_box(&mut d1);
        };
        let mut slice = || {
            f.eval_slice(black_box(&src), &mut d2);
            black_box(&mut d2);
        };
        match libm(f) {
            Some(g) => {
                let mut reference = || {
                    for (d, &s) in d3.iter_mut().zip(&src) {
                        *d = g(black_box(s));
                    }
                    black_box(&mut d3);
                };
                let t = side_by_side(&mut [&mut scalar, &mut slice, &mut reference]);
                println!(
                    "| {} | {:.2} | {:.2} | {:.2} | {:.2}x | {:.2}x |",
                    f.name(),
                    t[0],
                    t[1],
                    t[2],
                    t[2] / t[0],
                    t[2] / t[1]
                );
            }
            None => {
                let t = side_by_side(&mut [&mut scalar, &mut slice]);
                println!(
                    "| {} | {:.2} | {:.2} | n/a | n/a | n/a |",
                    f.name(),
                    t[0],
                    t[1]
                );
            }
        }
    }
}
