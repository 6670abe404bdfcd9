//! Throughput of every `UnaryFn`, scalar and over 4096-float slices, against Rust std's `f32`
//! methods (the platform libm). Prints a markdown table; `speed vs libm` above 1 means faster.
//!
//! Run: cargo bench -p samebits-math --bench throughput

use std::hint::black_box;
use std::time::{Duration, Instant};

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

/// Nanoseconds per element of `run` over the input slice (best of several repetitions).
fn time_per_elem(mut run: impl FnMut()) -> f64 {
    let mut best = Duration::MAX;
    for _ in 0..30 {
        let start = Instant::now();
        for _ in 0..10 {
            run();
        }
        best = best.min(start.elapsed());
    }
    best.as_secs_f64() * 1e9 / (10 * LEN) as f64
}

fn main() {
    println!(
        "| function | scalar ns | slice ns | libm ns | speed vs libm (scalar) | speed vs libm (slice) |"
    );
    println!("|---|---|---|---|---|---|");
    for &f in UnaryFn::IMPLEMENTED {
        let (lo, hi) = range(f);
        let src: Vec<f32> = (0..LEN)
            .map(|i| lo + (hi - lo) * (i as f32 + 0.5) / LEN as f32)
            .collect();
        let mut dst = vec![0.0f32; LEN];
        let scalar = time_per_elem(|| {
            for (d, &s) in dst.iter_mut().zip(&src) {
                *d = f.eval(black_box(s));
            }
            black_box(&mut dst);
        });
        let slice = time_per_elem(|| {
            f.eval_slice(black_box(&src), &mut dst);
            black_box(&mut dst);
        });
        match libm(f) {
            Some(g) => {
                let reference = time_per_elem(|| {
                    for (d, &s) in dst.iter_mut().zip(&src) {
                        *d = g(black_box(s));
                    }
                    black_box(&mut dst);
                });
                println!(
                    "| {} | {scalar:.2} | {slice:.2} | {reference:.2} | {:.2}x | {:.2}x |",
                    f.name(),
                    reference / scalar,
                    reference / slice
                );
            }
            None => println!(
                "| {} | {scalar:.2} | {slice:.2} | n/a | n/a | n/a |",
                f.name()
            ),
        }
    }
}
