//! Bit-for-bit comparison of every `UnaryFn` with the CORE-MATH oracle on a deterministic set of
//! more than 10^6 inputs per function: a spread over all 2^32 bit patterns, dense runs of
//! consecutive floats where each function is delicate, every special value, and every input of
//! tools/hard_cases (the inputs whose binary64 approximation fails the rounding test).

use samebits_math::UnaryFn;

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

/// Inputs of the hard-case file of `f` (empty when the function has none).
fn hard_cases(f: UnaryFn) -> Vec<f32> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tools/hard_cases/{}.txt", f.name()));
    std::fs::read_to_string(&path)
        .map(|text| {
            text.lines()
                .map(|line| {
                    let bits = line.split_whitespace().next().expect("input bits");
                    f32::from_bits(u32::from_str_radix(bits, 16).expect("hex bits"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Starting points of dense runs of 2^17 consecutive floats on each side of zero.
fn delicate_points(f: UnaryFn) -> &'static [f32] {
    match f {
        UnaryFn::Exp | UnaryFn::Exp2 | UnaryFn::Exp10 | UnaryFn::Expm1 => {
            &[1e-8, 0.3, 5.0, 87.0, 100.0]
        }
        UnaryFn::Log | UnaryFn::Log2 | UnaryFn::Log10 => &[0.999, 1.0, 1e-40, 7.0],
        UnaryFn::Log1p | UnaryFn::Atanh | UnaryFn::Asinh => &[1e-7, 0.01, 0.999],
        UnaryFn::Acosh => &[1.0, 1.5, 1e20],
        UnaryFn::Sin | UnaryFn::Cos | UnaryFn::Tan => &[1e-4, 1.57, 3.140625, 1e5, 131072.0, 1e30],
        UnaryFn::Asin | UnaryFn::Acos | UnaryFn::Atan => &[1e-4, 0.49, 0.999, 1.0, 30.0],
        UnaryFn::Sinh | UnaryFn::Cosh | UnaryFn::Tanh => &[1e-4, 0.3, 9.0, 89.0],
        UnaryFn::Erf | UnaryFn::Erfc => &[1e-4, 0.49, 0.5, 3.9, 10.0],
        UnaryFn::Cbrt => &[1e-40, 0.999, 8.0, 1e30],
    }
}

fn inputs(f: UnaryFn) -> Vec<f32> {
    let mut xs: Vec<f32> = (0u32..1 << 19)
        .map(|i| f32::from_bits(i.wrapping_mul(8191).wrapping_add(i >> 7)))
        .collect();
    for &p in delicate_points(f) {
        for sign in [1.0f32, -1.0] {
            let start = (p * sign).to_bits();
            xs.extend((0..1u32 << 17).map(|k| f32::from_bits(start.wrapping_add(k))));
        }
    }
    let specials = [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7f800001),
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
        f32::from_bits(0x007f_ffff),
        f32::MAX,
        f32::MIN,
        1.0,
        -1.0,
        0.5,
        2.0,
        10.0,
    ];
    xs.extend(specials);
    xs.extend(hard_cases(f));
    xs
}

fn same(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

#[test]
fn every_function_matches_core_math_bit_for_bit() {
    let mut report = Vec::new();
    for &f in UnaryFn::IMPLEMENTED {
        let xs = inputs(f);
        assert!(
            xs.len() >= 1_000_000,
            "{}: only {} inputs",
            f.name(),
            xs.len()
        );
        let mut ys = vec![0.0f32; xs.len()];
        f.eval_slice(&xs, &mut ys);
        let reference = oracle(f);
        let bad: Vec<String> = xs
            .iter()
            .zip(&ys)
            .filter(|&(&x, &y)| !same(y, reference(x)) || !same(f.eval(x), y))
            .take(5)
            .map(|(&x, &y)| {
                format!(
                    "x=0x{:08x} got 0x{:08x} want 0x{:08x}",
                    x.to_bits(),
                    y.to_bits(),
                    reference(x).to_bits()
                )
            })
            .collect();
        if !bad.is_empty() {
            report.push(format!("{}: {}", f.name(), bad.join("; ")));
        }
    }
    assert!(report.is_empty(), "mismatches:\n{}", report.join("\n"));
}

#[test]
fn nan_results_are_the_canonical_nan() {
    for &f in UnaryFn::IMPLEMENTED {
        for x in [
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7f80_0001),
            f32::from_bits(0xffc0_1234),
        ] {
            assert_eq!(
                f.eval(x).to_bits(),
                0x7fc0_0000,
                "{}({:08x})",
                f.name(),
                x.to_bits()
            );
        }
    }
    assert_eq!(samebits_math::log(-1.0).to_bits(), 0x7fc0_0000);
    assert_eq!(samebits_math::sin(f32::INFINITY).to_bits(), 0x7fc0_0000);
}

#[test]
fn names_round_trip() {
    for &f in UnaryFn::IMPLEMENTED {
        assert_eq!(UnaryFn::from_name(f.name()), Some(f));
    }
    assert_eq!(UnaryFn::from_name("gamma"), None);
}

#[test]
#[should_panic(expected = "length mismatch")]
fn slice_lengths_must_match() {
    samebits_math::exp_slice(&[1.0, 2.0], &mut [0.0]);
}

#[test]
fn cuda_source_is_the_shared_header() {
    let src = samebits_math::CUDA_SOURCE;
    assert!(src.contains("__device__ __forceinline__"));
    assert!(src.contains("SB_FN float sb_gelu_erff(float x)"));
    assert!(
        !src.contains("#include <math.h>"),
        "the shared header must not depend on libm"
    );
}

#[test]
fn verified_and_pending_partition_the_implemented_functions() {
    let mut listed: Vec<UnaryFn> = UnaryFn::ALL
        .iter()
        .chain(UnaryFn::PENDING)
        .copied()
        .collect();
    listed.sort_by_key(|f| f.name());
    let mut implemented = UnaryFn::IMPLEMENTED.to_vec();
    implemented.sort_by_key(|f| f.name());
    assert_eq!(listed, implemented);
}

#[test]
fn slices_of_every_length_and_offset_equal_the_scalar_function() {
    // The vectorised slice loops work in blocks of 256 lanes with a scalar redo pass; lengths
    // around the block and vector sizes, unaligned starts, and blocks mixing special inputs
    // (NaN, infinities, zeros, subnormals, out-of-range arguments, kernel boundaries) with
    // ordinary ones. Bits must be equal, NaN payloads included.
    let mut xs: Vec<f32> = (0..1200)
        .map(|i| (i as f32 - 600.0) * 0.173 + (i % 7) as f32 * 1e-3)
        .collect();
    for (i, v) in [
        f32::NAN,
        f32::INFINITY,
        -0.0,
        1e30,
        -1e-30,
        200.0,
        -200.0,
        1.0,
        -f32::NAN,
        f32::from_bits(0x0000_0001),
        -0.5,
        4.0,
        -10.25,
    ]
    .into_iter()
    .enumerate()
    {
        xs[97 * i + 13] = v;
    }
    for &f in UnaryFn::IMPLEMENTED {
        for (start, len) in [
            (0, 0),
            (0, 1),
            (3, 7),
            (1, 255),
            (0, 256),
            (5, 257),
            (17, 700),
            (0, 1200),
        ] {
            let src = &xs[start..start + len];
            let mut dst = vec![0.0f32; len];
            f.eval_slice(src, &mut dst);
            for (&x, &y) in src.iter().zip(&dst) {
                assert_eq!(
                    y.to_bits(),
                    f.eval(x).to_bits(),
                    "{}(0x{:08x}) slice {start}+{len}",
                    f.name(),
                    x.to_bits()
                );
            }
        }
    }
}
