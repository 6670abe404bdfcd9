//! Activation family: in the reproducible set every op equals samebits-math's function or
//! composite formula bit for bit on a spread of inputs, and equals the independent oracle
//! (CORE-MATH's correctly rounded functions, the `core-math` crate; the composite formulas of
//! docs/math.md written out here over them) on a large sample; piecewise ops and Pow by hand;
//! errors.
mod common;
use common::*;
use samebits_ir::{Attribute, Tensor};
use samebits_math::{Activation, UnaryFn};

/// Inputs over many binades, signs, zeros, infinities and NaN.
fn spread() -> Vec<f32> {
    let mut v: Vec<f32> = (-200..=200).map(|i| i as f32 * 0.0731).collect();
    v.extend((0..60).map(|i| 2f32.powi(i - 30)));
    v.extend((0..60).map(|i| -(1.7f32.powi(i - 30))));
    v.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-40,
        88.7,
        -103.9,
    ]);
    v
}

/// Attributes of one node.
type Attrs<'a> = Vec<(&'a str, Attribute)>;

fn run_on(op: &str, x: &[f32], attrs: &[(&str, Attribute)]) -> Vec<f32> {
    run1(op, &[f32s(&[x.len()], x)], attrs)
        .unwrap()
        .as_slice::<f32>()
        .unwrap()
        .to_vec()
}

fn assert_same_bits(op: &str, got: &[f32], want: impl Fn(f32) -> f32, x: &[f32]) {
    for (&g, &v) in got.iter().zip(x) {
        assert_eq!(g.to_bits(), want(v).to_bits(), "{op}({v:e})");
    }
}

#[test]
fn unary_ops_equal_samebits_math_bit_for_bit() {
    let x = spread();
    for (op, f) in [
        ("Exp", UnaryFn::Exp),
        ("Log", UnaryFn::Log),
        ("Tanh", UnaryFn::Tanh),
        ("Erf", UnaryFn::Erf),
        ("Sin", UnaryFn::Sin),
        ("Cos", UnaryFn::Cos),
        ("Tan", UnaryFn::Tan),
        ("Asin", UnaryFn::Asin),
        ("Acos", UnaryFn::Acos),
        ("Atan", UnaryFn::Atan),
        ("Sinh", UnaryFn::Sinh),
        ("Cosh", UnaryFn::Cosh),
        ("Asinh", UnaryFn::Asinh),
        ("Acosh", UnaryFn::Acosh),
        ("Atanh", UnaryFn::Atanh),
    ] {
        assert_same_bits(op, &run_on(op, &x, &[]), |v| f.eval(v), &x);
    }
}

#[test]
fn activations_equal_the_composite_formulas_bit_for_bit() {
    let x = spread();
    let f = |v: f32| Attribute::Float(v);
    let cases: Vec<(&str, Attrs, Activation)> = vec![
        ("Sigmoid", vec![], Activation::Sigmoid),
        ("Softplus", vec![], Activation::Softplus),
        ("Mish", vec![], Activation::Mish),
        ("HardSwish", vec![], Activation::HardSwish),
        ("Gelu", vec![], Activation::GeluErf),
        (
            "Gelu",
            vec![("approximate", Attribute::String("tanh".into()))],
            Activation::GeluTanh,
        ),
        (
            "HardSigmoid",
            vec![("alpha", f(0.3)), ("beta", f(0.4))],
            Activation::HardSigmoid {
                alpha: 0.3,
                beta: 0.4,
            },
        ),
        (
            "Elu",
            vec![("alpha", f(0.7))],
            Activation::Elu { alpha: 0.7 },
        ),
        (
            "Selu",
            vec![],
            Activation::Selu {
                alpha: 1.673_263_2,
                gamma: 1.050_701,
            },
        ),
        (
            "Celu",
            vec![("alpha", f(2.0))],
            Activation::Celu { alpha: 2.0 },
        ),
    ];
    for (op, attrs, a) in cases {
        assert_same_bits(op, &run_on(op, &x, &attrs), |v| a.eval(v), &x);
    }
}

/// splitmix64 (a deterministic stream for the samples below).
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The spread, 2^15 random bit patterns (every binade, NaNs and infinities included) and 2^15
/// values uniform in [-12, 12) (where activations change).
fn oracle_sample() -> Vec<f32> {
    let mut state = 4;
    let mut v = spread();
    v.extend((0..1 << 15).map(|_| f32::from_bits(splitmix(&mut state) as u32)));
    v.extend(
        (0..1 << 15).map(|_| (splitmix(&mut state) >> 40) as f32 * 2f32.powi(-24) * 24.0 - 12.0),
    );
    v
}

/// A binary32 function of the oracle.
type Oracle = Box<dyn Fn(f32) -> f32>;

/// A CORE-MATH function.
type OracleFn = fn(f32) -> f32;

/// `got` and `want` have the same bits, or are both NaN.
fn assert_matches_oracle(op: &str, got: &[f32], want: impl Fn(f32) -> f32, x: &[f32]) {
    let bad: Vec<String> = got
        .iter()
        .zip(x)
        .filter(|&(&g, &v)| !(g.is_nan() && want(v).is_nan()) && g.to_bits() != want(v).to_bits())
        .take(8)
        .map(|(&g, &v)| {
            format!(
                "{op}({v:e} = 0x{:08x}) = {g:e}, oracle {:e}",
                v.to_bits(),
                want(v)
            )
        })
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn unary_ops_equal_core_math_on_a_sample() {
    let x = oracle_sample();
    let cases: [(&str, OracleFn); 15] = [
        ("Exp", core_math::expf),
        ("Log", core_math::logf),
        ("Tanh", core_math::tanhf),
        ("Erf", core_math::erff),
        ("Sin", core_math::sinf),
        ("Cos", core_math::cosf),
        ("Tan", core_math::tanf),
        ("Asin", core_math::asinf),
        ("Acos", core_math::acosf),
        ("Atan", core_math::atanf),
        ("Sinh", core_math::sinhf),
        ("Cosh", core_math::coshf),
        ("Asinh", core_math::asinhf),
        ("Acosh", core_math::acoshf),
        ("Atanh", core_math::atanhf),
    ];
    for (op, oracle) in cases {
        assert_matches_oracle(op, &run_on(op, &x, &[]), oracle, &x);
    }
}

/// docs/math.md's sigmoid over CORE-MATH's expf.
fn sigmoid_oracle(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + core_math::expf(-x))
    } else {
        let e = core_math::expf(x);
        e / (1.0 + e)
    }
}

/// docs/math.md's softplus over CORE-MATH's expf and log1pf.
fn softplus_oracle(x: f32) -> f32 {
    (if x > 0.0 { x } else { 0.0 }) + core_math::log1pf(core_math::expf(-x.abs()))
}

#[test]
fn activations_equal_their_formulas_over_core_math_on_a_sample() {
    let x = oracle_sample();
    let f = |v: f32| Attribute::Float(v);
    let (selu_alpha, selu_gamma) = (1.673_263_2f32, 1.050_701f32);
    let cases: Vec<(&str, Attrs, Oracle)> = vec![
        ("Sigmoid", vec![], Box::new(sigmoid_oracle)),
        ("Softplus", vec![], Box::new(softplus_oracle)),
        (
            "Mish",
            vec![],
            Box::new(|x| x * core_math::tanhf(softplus_oracle(x))),
        ),
        (
            "Gelu",
            vec![],
            Box::new(|x| (0.5 * x) * (1.0 + core_math::erff(x * f32::from_bits(0x3f35_04f3)))),
        ),
        (
            "Gelu",
            vec![("approximate", Attribute::String("tanh".into()))],
            Box::new(|x| {
                let inner = f32::from_bits(0x3f4c_422a) * (x + 0.044_715 * ((x * x) * x));
                (0.5 * x) * (1.0 + core_math::tanhf(inner))
            }),
        ),
        (
            "Elu",
            vec![("alpha", f(0.7))],
            Box::new(|x| {
                if x > 0.0 {
                    x
                } else {
                    0.7 * core_math::expm1f(x)
                }
            }),
        ),
        (
            "Selu",
            vec![],
            Box::new(move |x| {
                if x > 0.0 {
                    selu_gamma * x
                } else {
                    selu_gamma * (selu_alpha * core_math::expm1f(x))
                }
            }),
        ),
        (
            "Celu",
            vec![("alpha", f(2.0))],
            Box::new(|x| {
                if x > 0.0 {
                    x
                } else {
                    2.0 * core_math::expm1f(x / 2.0)
                }
            }),
        ),
    ];
    for (op, attrs, oracle) in cases {
        assert_matches_oracle(op, &run_on(op, &x, &attrs), oracle, &x);
    }
}

#[test]
fn pow_equals_core_math_on_a_sample() {
    let (xs, ys) = samebits_math::sampling::pow_sample_pairs(1 << 16, 5);
    let (sx, sy) = samebits_math::sampling::pow_special_pairs();
    // Signaling NaNs are left out: the op's broadcasting path may quiet them (where powf's
    // pow(1, sNaN) = NaN differs from pow(1, qNaN) = 1).
    let quiet = |v: &f32| !(v.is_nan() && v.to_bits() & 0x0040_0000 == 0);
    let (xs, ys): (Vec<f32>, Vec<f32>) = xs
        .into_iter()
        .chain(sx)
        .zip(ys.into_iter().chain(sy))
        .filter(|(x, y)| quiet(x) && quiet(y))
        .unzip();
    let got = run1(
        "Pow",
        &[f32s(&[xs.len()], &xs), f32s(&[ys.len()], &ys)],
        &[],
    )
    .unwrap();
    let got = got.as_slice::<f32>().unwrap();
    for ((&g, &x), &y) in got.iter().zip(&xs).zip(&ys) {
        let want = core_math::powf(x, y);
        assert!(
            (g.is_nan() && want.is_nan()) || g.to_bits() == want.to_bits(),
            "Pow({x:e}, {y:e}) = {g:e}, core-math {want:e}"
        );
    }
}

#[test]
fn half_inputs_compute_in_f32_and_round_once() {
    let h: Vec<half::f16> = [-2.5f32, 0.1, 3.0]
        .iter()
        .map(|&v| half::f16::from_f32(v))
        .collect();
    let y = run1("Exp", &[Tensor::from_vec(vec![3], h.clone()).unwrap()], &[]).unwrap();
    let want: Vec<half::f16> = h
        .iter()
        .map(|v| half::f16::from_f32(samebits_math::exp(v.to_f32())))
        .collect();
    assert_eq!(y.as_slice::<half::f16>().unwrap(), &want[..]);
}

#[test]
fn piecewise_activations_by_hand() {
    let x = [-2.0f32, -0.25, 0.0, 0.25, 2.0];
    assert_eq!(
        run_on("LeakyRelu", &x, &[("alpha", Attribute::Float(0.5))]),
        vec![-1.0, -0.125, 0.0, 0.25, 2.0]
    );
    assert_eq!(
        run_on("ThresholdedRelu", &x, &[("alpha", Attribute::Float(0.25))]),
        vec![0.0, 0.0, 0.0, 0.0, 2.0]
    );
    assert_eq!(
        run_on(
            "Shrink",
            &x,
            &[
                ("bias", Attribute::Float(1.0)),
                ("lambd", Attribute::Float(0.5))
            ]
        ),
        vec![-1.0, 0.0, 0.0, 0.0, 1.0]
    );
    assert_eq!(
        run_on("Softsign", &x, &[]),
        vec![-2.0 / 3.0, -0.2, 0.0, 0.2, 2.0 / 3.0]
    );
    // PRelu: one slope per channel of [2, 2] broadcast along rows.
    let y = run1(
        "PRelu",
        &[
            f32s(&[2, 2], &[-1., -1., 1., -4.]),
            f32s(&[2], &[0.5, 0.25]),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), &[-0.5, -0.25, 1.0, -1.0]);
}

#[test]
fn pow_is_powf_and_integer_pow_is_exact() {
    let y = run1(
        "Pow",
        &[
            f32s(&[4], &[2., 3., -2., 4.]),
            f32s(&[4], &[10., 2., 3., 0.5]),
        ],
        &[],
    )
    .unwrap();
    let y = y.as_slice::<f32>().unwrap();
    // exact powers are exact (the function is correctly rounded)
    assert_eq!(y, &[1024.0, 9.0, -8.0, 2.0]);
    let i = run1(
        "Pow",
        &[
            Tensor::from_vec(vec![2], vec![3i64, -2]).unwrap(),
            Tensor::from_vec(vec![2], vec![4i64, 3]).unwrap(),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(i.as_slice::<i64>().unwrap(), &[81, -8]);
    let e = run1(
        "Pow",
        &[
            Tensor::from_vec(vec![1], vec![3i64]).unwrap(),
            Tensor::from_vec(vec![1], vec![-1i64]).unwrap(),
        ],
        &[],
    )
    .unwrap_err();
    assert!(e.to_string().contains("negative exponent"), "{e}");
}

#[test]
fn bad_attributes_and_dtypes_are_named() {
    let x = f32s(&[1], &[1.0]);
    let e = run1(
        "Gelu",
        std::slice::from_ref(&x),
        &[("approximate", Attribute::String("fast".into()))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("approximate"), "{e}");
    let e = run1(
        "Celu",
        std::slice::from_ref(&x),
        &[("alpha", Attribute::Float(0.0))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("alpha"), "{e}");
    let e = run1(
        "Exp",
        &[Tensor::from_vec(vec![1], vec![1i32]).unwrap()],
        &[],
    )
    .unwrap_err();
    assert!(e.is_unsupported(), "{e}");
}

#[test]
fn swish_is_x_times_sigmoid_of_alpha_x() {
    let x = [-3.0f32, -0.5, 0.0, 0.7, 4.0];
    let alpha = 1.5f32;
    let y = run1(
        "Swish",
        &[f32s(&[5], &x)],
        &[("alpha", Attribute::Float(alpha))],
    )
    .unwrap();
    // Contract section `activation`: alpha * x rounded, samebits-math's sigmoid, the product.
    let expect: Vec<f32> = x
        .iter()
        .map(|&v| v * Activation::Sigmoid.eval(alpha * v))
        .collect();
    assert_eq!(
        bits(&y),
        expect.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
}
