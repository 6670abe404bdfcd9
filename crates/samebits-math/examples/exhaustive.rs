//! Exhaustive check: every univariate function over all 2^32 binary32 inputs against the
//! independent oracle, the `core-math` crate (CORE-MATH's correctly rounded C functions).
//! NaN results match when both are NaN; all other results must have identical bits.
//!
//! Run: cargo run --release -p samebits-math --example exhaustive -- [FUNCS...] [--threads N]
//! Prints `exp: 0 mismatches of 4294967296` per function, a summary, and exits 1 on a mismatch.

use rayon::prelude::*;
use samebits_math::UnaryFn;

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

/// Mismatch count and up to 8 examples of `f` against its oracle over all inputs.
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
                if !same(y, want) {
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

fn main() {
    let mut funcs = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--threads" {
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
    if funcs.is_empty() {
        funcs = UnaryFn::ALL.to_vec();
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
    if failed.is_empty() {
        println!(
            "summary: all {} functions correctly rounded on all 2^32 inputs",
            funcs.len()
        );
    } else {
        println!(
            "summary: {} of {} functions have mismatches: {}",
            failed.len(),
            funcs.len(),
            failed.join(", ")
        );
        std::process::exit(1);
    }
}
