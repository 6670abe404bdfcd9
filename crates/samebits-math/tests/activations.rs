//! The composite activation formulas: bit-for-bit equal to the written formula (docs/math.md)
//! re-evaluated in Rust from the correctly rounded functions, close to the exact function, and
//! NaN in gives the canonical NaN.

use samebits_math::{Activation, erf, exp, expm1, log1p, tanh};

/// The formula of docs/math.md, op by op in `f32`.
fn written_formula(a: Activation, x: f32) -> f32 {
    if x.is_nan() {
        return f32::from_bits(0x7fc0_0000);
    }
    let softplus = |x: f32| (if x > 0.0 { x } else { 0.0 }) + log1p(exp(-x.abs()));
    let hardsigmoid = |x: f32, alpha: f32, beta: f32| {
        let v = alpha * x + beta;
        let v = if v > 0.0 { v } else { 0.0 };
        if v < 1.0 { v } else { 1.0 }
    };
    match a {
        Activation::Sigmoid => {
            if x >= 0.0 {
                1.0 / (1.0 + exp(-x))
            } else {
                let e = exp(x);
                e / (1.0 + e)
            }
        }
        Activation::Softplus => softplus(x),
        Activation::GeluErf => (0.5 * x) * (1.0 + erf(x * f32::from_bits(0x3f35_04f3))),
        Activation::GeluTanh => {
            let inner = f32::from_bits(0x3f4c_422a) * (x + 0.044715 * ((x * x) * x));
            (0.5 * x) * (1.0 + tanh(inner))
        }
        Activation::HardSigmoid { alpha, beta } => hardsigmoid(x, alpha, beta),
        Activation::HardSwish => x * hardsigmoid(x, f32::from_bits(0x3e2a_aaab), 0.5),
        Activation::Mish => x * tanh(softplus(x)),
        Activation::Elu { alpha } => {
            if x > 0.0 {
                x
            } else {
                alpha * expm1(x)
            }
        }
        Activation::Selu { alpha, gamma } => {
            if x > 0.0 {
                gamma * x
            } else {
                gamma * (alpha * expm1(x))
            }
        }
        Activation::Celu { alpha } => {
            if x > 0.0 {
                x
            } else {
                alpha * expm1(x / alpha)
            }
        }
        Activation::LeakyRelu { alpha } => {
            let y = if x < 0.0 { alpha * x } else { x };
            if y.is_nan() {
                f32::from_bits(0x7fc0_0000)
            } else {
                y
            }
        }
        Activation::RsqrtFormula => 1.0 / x.sqrt(),
    }
}

/// The exact function in binary64, for an accuracy sanity check.
fn exact(a: Activation, x: f64) -> f64 {
    let softplus = |x: f64| x.max(0.0) + (-x.abs()).exp().ln_1p();
    match a {
        Activation::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        Activation::Softplus => softplus(x),
        Activation::GeluErf => 0.5 * x * (1.0 + core_math::erf(x / 2f64.sqrt())),
        Activation::GeluTanh => {
            0.5 * x
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
        }
        Activation::HardSigmoid { alpha, beta } => {
            (f64::from(alpha) * x + f64::from(beta)).clamp(0.0, 1.0)
        }
        Activation::HardSwish => x * (x / 6.0 + 0.5).clamp(0.0, 1.0),
        Activation::Mish => x * softplus(x).tanh(),
        Activation::Elu { alpha } => {
            if x > 0.0 {
                x
            } else {
                f64::from(alpha) * x.exp_m1()
            }
        }
        Activation::Selu { alpha, gamma } => {
            f64::from(gamma)
                * if x > 0.0 {
                    x
                } else {
                    f64::from(alpha) * x.exp_m1()
                }
        }
        Activation::Celu { alpha } => {
            if x > 0.0 {
                x
            } else {
                f64::from(alpha) * (x / f64::from(alpha)).exp_m1()
            }
        }
        Activation::LeakyRelu { alpha } => {
            if x < 0.0 {
                f64::from(alpha) * x
            } else {
                x
            }
        }
        Activation::RsqrtFormula => 1.0 / x.sqrt(),
    }
}

fn inputs() -> Vec<f32> {
    let mut xs: Vec<f32> = (0u32..1 << 18)
        .map(|i| f32::from_bits(i.wrapping_mul(16411)))
        .collect();
    xs.extend((-40_000..40_000).map(|i| i as f32 / 2000.0));
    xs.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::MIN,
        f32::from_bits(1),
    ]);
    xs
}

#[test]
fn activations_follow_their_written_formula_bit_for_bit() {
    let xs = inputs();
    for &a in Activation::ALL {
        let mut ys = vec![0.0f32; xs.len()];
        a.eval_slice(&xs, &mut ys);
        for (&x, &y) in xs.iter().zip(&ys) {
            let want = written_formula(a, x);
            let same = (y.is_nan() && want.is_nan()) || y.to_bits() == want.to_bits();
            assert!(
                same,
                "{}({x:e}) = {y:e} ({:08x}), formula gives {want:e}",
                a.name(),
                y.to_bits()
            );
        }
    }
}

#[test]
fn activations_are_accurate() {
    for &a in Activation::ALL {
        for i in -8000..8000 {
            let x = i as f32 / 1000.0;
            if a == Activation::RsqrtFormula && x <= 0.0 {
                continue;
            }
            let got = f64::from(a.eval(x));
            let want = exact(a, f64::from(x));
            // relative 1e-6, plus an absolute 1e-6 for the cancellation in `1 + erf`, `1 + tanh`
            let tol = 1e-6 * (want.abs() + 1.0);
            assert!(
                (got - want).abs() <= tol,
                "{}({x}) = {got}, exact {want}",
                a.name()
            );
        }
    }
}

#[test]
fn activations_give_the_canonical_nan() {
    for &a in Activation::ALL {
        let nans = [f32::NAN, -f32::NAN, f32::from_bits(0xff80_0001)];
        let mut sliced = [0.0; 3];
        a.eval_slice(&nans, &mut sliced);
        for (x, s) in nans.into_iter().zip(sliced) {
            assert_eq!(a.eval(x).to_bits(), 0x7fc0_0000, "{}", a.name());
            assert_eq!(s.to_bits(), 0x7fc0_0000, "{} (slice)", a.name());
        }
        // NaN results of other inputs (-inf * 0 in gelu, mish, hardswish; 1/sqrt(-1)) too:
        // the GPU check found x86's 0xffc00000 against CUDA's 0x7fffffff before this rule.
        for x in [f32::NEG_INFINITY, -1.0] {
            let r = a.eval(x);
            assert!(
                !r.is_nan() || r.to_bits() == 0x7fc0_0000,
                "{}({x})",
                a.name()
            );
        }
    }
}

#[test]
fn sigmoid_does_not_overflow() {
    let sigmoid = Activation::Sigmoid;
    assert_eq!(sigmoid.eval(-200.0), 0.0);
    assert_eq!(sigmoid.eval(200.0), 1.0);
    assert_eq!(sigmoid.eval(0.0), 0.5);
}
