//! Activation family: in the reproducible set every op equals samebits-math's function or
//! composite formula bit for bit on a spread of inputs; piecewise ops and Pow by hand; errors.
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
fn pow_integer_exponents_are_repeated_products() {
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
    assert_eq!(&y[..3], &[1024.0, 9.0, -8.0]);
    assert_eq!(y[3], samebits_math::exp(0.5 * samebits_math::log(4.0)));
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
