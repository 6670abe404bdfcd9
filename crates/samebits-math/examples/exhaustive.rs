//! Exhaustive check: every univariate function over all 2^32 binary32 inputs against the
//! independent oracle, the `core-math` crate (CORE-MATH's correctly rounded C functions).
//! NaN results match when both are NaN; all other results must have identical bits. Both entry
//! points are checked at every input: the scalar function (`UnaryFn::eval`) and the slice
//! function (`UnaryFn::eval_slice`, whose vectorised loop is separate machine code); an input
//! counts as a mismatch when either differs from the oracle, or when the two differ in any bit
//! (NaN payloads included).
//!
//! `pow` is bivariate: `--pow-samples N` checks N deterministic pairs
//! (`samebits_math::sampling::pow_sample_pairs`) plus the special-value grid, and
//! `--pow-square` checks `pow(x, 2)` (computed as `x * x`) at all 2^32 `x`.
//!
//! Run: cargo run --release -p samebits-math --example exhaustive -- [FUNCS...] [--threads N]
//!      [--pow-samples N] [--pow-square]
//! Prints `exp: 0 mismatches of 4294967296` per function, a summary, and exits 1 on a mismatch.
//! With only `--pow-samples` or `--pow-square`, no univariate function is run.

use rayon::prelude::*;
use samebits_math::UnaryFn;
use samebits_math::sampling::{pow_sample_pairs, pow_special_pairs};

/// The CORE-MATH function for `f`.
fn oracle(f: UnaryFn) -> fn(f32) -> f32 {
    match f {
        UnaryFn::Exp => core_math::expf,
        UnaryFn::Exp2 => core_math::exp2f,
        UnaryFn::Exp10 => core_math::exp10f,
        UnaryFn::Expm1 => core_math::expm1f,
        UnaryFn::Log => core_math::logf,
        UnaryFn::Log2 => core_math::log2f,
        UnaryFn::Log10 => core_math::log10f,
        UnaryFn::Log1p => core_math::log1pf,
        UnaryFn::Sin => core_math::sinf,
        UnaryFn::Cos => core_math::cosf,
        UnaryFn::Tan => core_math::tanf,
        UnaryFn::Asin => core_math::asinf,
        UnaryFn::Acos => core_math::acosf,
        UnaryFn::Atan => core_math::atanf,
        UnaryFn::Sinh => core_math::sinhf,
        UnaryFn::Cosh => core_math::coshf,
        UnaryFn::Tanh => core_math::tanhf,
        UnaryFn::Asinh => core_math::asinhf,
        UnaryFn::Acosh => core_math::acoshf,
        UnaryFn::Atanh => core_math::atanhf,
        UnaryFn::Erf => core_math::erff,
        UnaryFn::Erfc => core_math::erfcf,
        UnaryFn::Cbrt => core_math::cbrtf,
    }
}

fn same(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

/// Mismatch count and up to 8 examples of `f` (scalar and slice) against its oracle over all
/// inputs.
fn check(f: UnaryFn) -> (u64, Vec<(u32, u32, u32)>) {
    let reference = oracle(f);
    let chunk_len = 1u32 << 16;
    (0u32..1 << 16)
        .into_par_iter()
        .map(|chunk| {
            let src: Vec<f32> = (0..chunk_len)
                .map(|low| f32::from_bits((chunk << 16) | low))
                .collect();
            let mut dst = vec![0.0f32; src.len()];
            f.eval_slice(&src, &mut dst);
            let mut count = 0u64;
            let mut examples = Vec::new();
            for (&x, &y) in src.iter().zip(&dst) {
                let want = reference(x);
                let scalar = f.eval(x);
                if !same(y, want) || !same(scalar, want) || y.to_bits() != scalar.to_bits() {
                    let y = if same(y, want) { scalar } else { y };
                    count += 1;
                    if examples.len() < 8 {
                        examples.push((x.to_bits(), y.to_bits(), want.to_bits()));
                    }
                }
            }
            (count, examples)
        })
        .reduce(
            || (0, Vec::new()),
            |(ca, mut ea), (cb, eb)| {
                ea.extend(eb);
                ea.truncate(8);
                (ca + cb, ea)
            },
        )
}

/// A pow mismatch: x, y, our bits, core-math's bits.
type PowMismatch = (f32, f32, u32, u32);

/// Mismatch count, pairs checked and up to 8 mismatches of `pow` against `core_math::powf` on
/// the sampled pairs and the special grid.
fn check_pow(samples: usize) -> (u64, usize, Vec<PowMismatch>) {
    let (mut xs, mut ys) = pow_sample_pairs(samples, 1);
    let (sx, sy) = pow_special_pairs();
    xs.extend(sx);
    ys.extend(sy);
    let (count, examples) = xs
        .par_chunks(1 << 16)
        .zip(ys.par_chunks(1 << 16))
        .map(|(x, y)| {
            let mut out = vec![0.0f32; x.len()];
            samebits_math::pow_slice(x, y, &mut out);
            let mut count = 0u64;
            let mut examples = Vec::new();
            for ((&a, &b), &r) in x.iter().zip(y).zip(&out) {
                let want = core_math::powf(a, b);
                if !same(r, want) {
                    count += 1;
                    if examples.len() < 8 {
                        examples.push((a, b, r.to_bits(), want.to_bits()));
                    }
                }
            }
            (count, examples)
        })
        .reduce(
            || (0, Vec::new()),
            |(ca, mut ea), (cb, eb)| {
                ea.extend(eb);
                ea.truncate(8);
                (ca + cb, ea)
            },
        );
    (count, xs.len(), examples)
}

/// Mismatch count and up to 8 mismatches of `pow(x, 2)` (the `x * x` shortcut of `sb_powf`)
/// against `core_math::powf` over all 2^32 `x`.
/// Prints a pow check's result line and its mismatches; a check with mismatches joins `failed`.
fn report_pow(
    name: &'static str,
    checked: &str,
    start: std::time::Instant,
    count: u64,
    examples: &[PowMismatch],
    failed: &mut Vec<&'static str>,
) {
    println!(
        "{name}: {count} mismatches of {checked} ({:.0} s)",
        start.elapsed().as_secs_f64()
    );
    for (x, y, got, want) in examples {
        println!("  pow({x:e}, {y:e}): got 0x{got:08x}, core-math 0x{want:08x}");
    }
    if count != 0 {
        failed.push(name);
    }
}

fn check_pow_square() -> (u64, Vec<PowMismatch>) {
    (0u32..1 << 16)
        .into_par_iter()
        .map(|chunk| {
            let x: Vec<f32> = (0..1u32 << 16)
                .map(|low| f32::from_bits((chunk << 16) | low))
                .collect();
            let two = vec![2.0f32; x.len()];
            let mut out = vec![0.0f32; x.len()];
            samebits_math::pow_slice(&x, &two, &mut out);
            let mut count = 0u64;
            let mut examples = Vec::new();
            for (&a, &r) in x.iter().zip(&out) {
                let want = core_math::powf(a, 2.0);
                if !same(r, want) || !same(samebits_math::pow(a, 2.0), want) {
                    count += 1;
                    if examples.len() < 8 {
                        examples.push((a, 2.0, r.to_bits(), want.to_bits()));
                    }
                }
            }
            (count, examples)
        })
        .reduce(
            || (0, Vec::new()),
            |(ca, mut ea), (cb, eb)| {
                ea.extend(eb);
                ea.truncate(8);
                (ca + cb, ea)
            },
        )
}

fn main() {
    let mut funcs = Vec::new();
    let mut pow_samples = None;
    let mut pow_square = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--pow-samples" {
            pow_samples = Some(
                args.next()
                    .and_then(|n| n.parse::<usize>().ok())
                    .expect("--pow-samples N"),
            );
        } else if arg == "--pow-square" {
            pow_square = true;
        } else if arg == "--threads" {
            let n = args
                .next()
                .and_then(|n| n.parse().ok())
                .expect("--threads N");
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build_global()
                .expect("thread pool");
        } else {
            funcs
                .push(UnaryFn::from_name(&arg).unwrap_or_else(|| panic!("unknown function {arg}")));
        }
    }
    if funcs.is_empty() && pow_samples.is_none() && !pow_square {
        funcs = UnaryFn::IMPLEMENTED.to_vec();
    }
    let mut failed = Vec::new();
    for &f in &funcs {
        let start = std::time::Instant::now();
        let (count, examples) = check(f);
        println!(
            "{}: {} mismatches of 4294967296 ({:.0} s)",
            f.name(),
            count,
            start.elapsed().as_secs_f64()
        );
        for (x, got, want) in examples {
            println!(
                "  x = 0x{x:08x} ({:e}): got 0x{got:08x} ({:e}), core-math 0x{want:08x} ({:e})",
                f32::from_bits(x),
                f32::from_bits(got),
                f32::from_bits(want)
            );
        }
        if count != 0 {
            failed.push(f.name());
        }
    }
    if let Some(samples) = pow_samples {
        let start = std::time::Instant::now();
        let (count, total, examples) = check_pow(samples);
        let checked = format!("{total} sampled pairs");
        report_pow("pow", &checked, start, count, &examples, &mut failed);
    }
    if pow_square {
        let start = std::time::Instant::now();
        let (count, examples) = check_pow_square();
        report_pow(
            "pow(x, 2)",
            "4294967296",
            start,
            count,
            &examples,
            &mut failed,
        );
    }
    let checked = funcs.len() + usize::from(pow_samples.is_some()) + usize::from(pow_square);
    if failed.is_empty() {
        println!("summary: all {checked} checked functions match core-math");
    } else {
        println!(
            "summary: {} of {checked} functions have mismatches: {}",
            failed.len(),
            failed.join(", ")
        );
        std::process::exit(1);
    }
}
