//! Correctly rounded `f32` transcendentals and the composite activation formulas of samebits.
//!
//! Every function here is defined once, in portable C (`csrc/sb_math.h`), compiled for the CPU by
//! build.rs and prepended as [`CUDA_SOURCE`] to the CUDA backend's NVRTC programs, so CPU and GPU
//! agree bit for bit. The [`UnaryFn`] functions are correctly rounded (round to nearest even) on
//! the whole binary32 domain; the [`Activation`] formulas are fixed sequences of correctly rounded
//! operations. Contract, methods and checks: `docs/math.md`.

use std::ffi::c_float;

pub mod sampling;

/// The shared C/CUDA definition of all functions (`csrc/sb_math.h`); device functions are named
/// `sb_<name>f`, e.g. `sb_expf`, `sb_gelu_erff`. Compile with `--fmad=false`.
pub const CUDA_SOURCE: &str = include_str!("../csrc/sb_math.h");

/// Declares the C symbols of the correctly rounded functions and the [`UnaryFn`] enum.
macro_rules! correctly_rounded_functions {
    ($(($variant:ident, $name:literal, $rust:ident, $slice:ident, $c:ident, $c_slice:ident, $c_hard:ident)),+ $(,)?) => {
        unsafe extern "C" {
            $(
                fn $c(x: c_float) -> c_float;
                fn $c_slice(src: *const c_float, dst: *mut c_float, n: usize);
                fn $c_hard(x: c_float) -> u64;
            )+
        }

        $(
            #[doc = concat!("`", $name, "(x)` correctly rounded to `f32` (round to nearest even).")]
            #[must_use]
            #[inline]
            pub fn $rust(x: f32) -> f32 {
                // SAFETY: a pure C function of one float.
                unsafe { $c(x) }
            }

            #[doc = concat!("`dst[i] = ", $name, "(src[i])`; panics unless the lengths are equal.")]
            pub fn $slice(src: &[f32], dst: &mut [f32]) {
                assert_eq!(src.len(), dst.len(), concat!(stringify!($slice), ": length mismatch"));
                // SAFETY: both slices hold src.len() floats.
                unsafe { $c_slice(src.as_ptr(), dst.as_mut_ptr(), src.len()) }
            }
        )+

        /// A correctly rounded univariate `f32` function, for the engine and the checkers.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum UnaryFn {
            $($variant,)+
        }

        impl UnaryFn {
            /// The C99 name without the `f` suffix (`"exp"`, `"log1p"`, ...).
            #[must_use]
            pub fn name(self) -> &'static str {
                match self {
                    $(UnaryFn::$variant => $name,)+
                }
            }

            /// The function of that name, if any.
            #[must_use]
            pub fn from_name(name: &str) -> Option<UnaryFn> {
                UnaryFn::IMPLEMENTED.iter().copied().find(|f| f.name() == name)
            }

            /// Every implemented function: [`UnaryFn::ALL`] and [`UnaryFn::PENDING`].
            pub const IMPLEMENTED: &'static [UnaryFn] = &[$(UnaryFn::$variant,)+];

            /// The correctly rounded value at `x`.
            #[must_use]
            #[inline]
            pub fn eval(self, x: f32) -> f32 {
                match self {
                    $(UnaryFn::$variant => $rust(x),)+
                }
            }

            /// `dst[i] = self(src[i])`; panics unless the lengths are equal.
            pub fn eval_slice(self, src: &[f32], dst: &mut [f32]) {
                match self {
                    $(UnaryFn::$variant => $slice(src, dst),)+
                }
            }

            /// For the exception-table generator (tools/gen_exceptions.py): when the binary64
            /// approximation at `x` fails the rounding test, the `f32` the code returns if `x` is
            /// not in the function's exception table; `None` otherwise.
            #[must_use]
            pub fn hard_case(self, x: f32) -> Option<f32> {
                // SAFETY: pure C functions of one float.
                let flagged = unsafe {
                    match self {
                        $(UnaryFn::$variant => $c_hard(x),)+
                    }
                };
                (flagged >> 32 != 0).then(|| f32::from_bits(flagged as u32))
            }
        }
    };
}

correctly_rounded_functions! {
    (Exp, "exp", exp, exp_slice, samebits_expf, samebits_expf_slice, samebits_expf_hard_case),
    (Exp2, "exp2", exp2, exp2_slice, samebits_exp2f, samebits_exp2f_slice, samebits_exp2f_hard_case),
    (Exp10, "exp10", exp10, exp10_slice, samebits_exp10f, samebits_exp10f_slice, samebits_exp10f_hard_case),
    (Expm1, "expm1", expm1, expm1_slice, samebits_expm1f, samebits_expm1f_slice, samebits_expm1f_hard_case),
    (Log, "log", log, log_slice, samebits_logf, samebits_logf_slice, samebits_logf_hard_case),
    (Log2, "log2", log2, log2_slice, samebits_log2f, samebits_log2f_slice, samebits_log2f_hard_case),
    (Log10, "log10", log10, log10_slice, samebits_log10f, samebits_log10f_slice, samebits_log10f_hard_case),
    (Log1p, "log1p", log1p, log1p_slice, samebits_log1pf, samebits_log1pf_slice, samebits_log1pf_hard_case),
    (Sin, "sin", sin, sin_slice, samebits_sinf, samebits_sinf_slice, samebits_sinf_hard_case),
    (Cos, "cos", cos, cos_slice, samebits_cosf, samebits_cosf_slice, samebits_cosf_hard_case),
    (Tan, "tan", tan, tan_slice, samebits_tanf, samebits_tanf_slice, samebits_tanf_hard_case),
    (Asin, "asin", asin, asin_slice, samebits_asinf, samebits_asinf_slice, samebits_asinf_hard_case),
    (Acos, "acos", acos, acos_slice, samebits_acosf, samebits_acosf_slice, samebits_acosf_hard_case),
    (Atan, "atan", atan, atan_slice, samebits_atanf, samebits_atanf_slice, samebits_atanf_hard_case),
    (Sinh, "sinh", sinh, sinh_slice, samebits_sinhf, samebits_sinhf_slice, samebits_sinhf_hard_case),
    (Cosh, "cosh", cosh, cosh_slice, samebits_coshf, samebits_coshf_slice, samebits_coshf_hard_case),
    (Tanh, "tanh", tanh, tanh_slice, samebits_tanhf, samebits_tanhf_slice, samebits_tanhf_hard_case),
    (Asinh, "asinh", asinh, asinh_slice, samebits_asinhf, samebits_asinhf_slice, samebits_asinhf_hard_case),
    (Acosh, "acosh", acosh, acosh_slice, samebits_acoshf, samebits_acoshf_slice, samebits_acoshf_hard_case),
    (Atanh, "atanh", atanh, atanh_slice, samebits_atanhf, samebits_atanhf_slice, samebits_atanhf_hard_case),
    (Erf, "erf", erf, erf_slice, samebits_erff, samebits_erff_slice, samebits_erff_hard_case),
    (Erfc, "erfc", erfc, erfc_slice, samebits_erfcf, samebits_erfcf_slice, samebits_erfcf_hard_case),
    (Cbrt, "cbrt", cbrt, cbrt_slice, samebits_cbrtf, samebits_cbrtf_slice, samebits_cbrtf_hard_case),
}

impl UnaryFn {
    /// The correctly rounded functions: each passed the exhaustive check of all 2^32 inputs
    /// against CORE-MATH (`examples/exhaustive.rs`, results in docs/math.md).
    pub const ALL: &'static [UnaryFn] = &[
        UnaryFn::Exp,
        UnaryFn::Exp2,
        UnaryFn::Exp10,
        UnaryFn::Expm1,
        UnaryFn::Log,
        UnaryFn::Log2,
        UnaryFn::Log10,
        UnaryFn::Log1p,
        UnaryFn::Tanh,
        UnaryFn::Erf,
        UnaryFn::Sin,
        UnaryFn::Cos,
        UnaryFn::Tan,
        UnaryFn::Asin,
        UnaryFn::Acos,
        UnaryFn::Sinh,
        UnaryFn::Cosh,
        UnaryFn::Atanh,
        UnaryFn::Cbrt,
        UnaryFn::Atan,
        UnaryFn::Asinh,
        UnaryFn::Acosh,
        UnaryFn::Erfc,
    ];

    /// Implemented with the same method and passing the CI comparison with CORE-MATH (more than
    /// 10^6 inputs each), but not yet verified exhaustively. Empty since 2026-11-22: atan, asinh,
    /// acosh and erfc got their exception-table entries and passed the exhaustive check. A
    /// function moves to [`UnaryFn::ALL`] when
    /// `cargo run --release -p samebits-math --example exhaustive -- NAME` prints 0 mismatches.
    pub const PENDING: &'static [UnaryFn] = &[];
}

unsafe extern "C" {
    fn samebits_powf(x: c_float, y: c_float) -> c_float;
    fn samebits_powf_slice(x: *const c_float, y: *const c_float, dst: *mut c_float, n: usize);
}

/// `x^y` rounded to `f32` with the special cases of C99 `powf` (NaN results canonical).
/// Correctly rounded except possibly for pairs whose exact power is non-representable yet
/// within 2^-91 (relative) of a float midpoint; none is known (docs/math.md). Checked by sampling.
#[must_use]
#[inline]
pub fn pow(x: f32, y: f32) -> f32 {
    // SAFETY: a pure C function of two floats.
    unsafe { samebits_powf(x, y) }
}

/// `dst[i] = pow(x[i], y[i])`; panics unless the three lengths are equal.
pub fn pow_slice(x: &[f32], y: &[f32], dst: &mut [f32]) {
    assert!(
        x.len() == y.len() && x.len() == dst.len(),
        "pow_slice: length mismatch"
    );
    // SAFETY: all three slices hold x.len() floats.
    unsafe { samebits_powf_slice(x.as_ptr(), y.as_ptr(), dst.as_mut_ptr(), x.len()) }
}

unsafe extern "C" {
    fn samebits_sigmoidf(x: c_float) -> c_float;
    fn samebits_sigmoidf_slice(src: *const c_float, dst: *mut c_float, n: usize);
    fn samebits_softplusf(x: c_float) -> c_float;
    fn samebits_gelu_erff(x: c_float) -> c_float;
    fn samebits_gelu_tanhf(x: c_float) -> c_float;
    fn samebits_hardsigmoidf(x: c_float, alpha: c_float, beta: c_float) -> c_float;
    fn samebits_hardswishf(x: c_float) -> c_float;
    fn samebits_mishf(x: c_float) -> c_float;
    fn samebits_eluf(x: c_float, alpha: c_float) -> c_float;
    fn samebits_seluf(x: c_float, alpha: c_float, gamma: c_float) -> c_float;
    fn samebits_celuf(x: c_float, alpha: c_float) -> c_float;
    fn samebits_leaky_reluf(x: c_float, alpha: c_float) -> c_float;
    fn samebits_leaky_reluf_slice(src: *const c_float, dst: *mut c_float, n: usize, alpha: c_float);
    fn samebits_hardsigmoidf_slice(
        src: *const c_float,
        dst: *mut c_float,
        n: usize,
        alpha: c_float,
        beta: c_float,
    );
    fn samebits_hardswishf_slice(src: *const c_float, dst: *mut c_float, n: usize);
    fn samebits_rsqrt_formulaf(x: c_float) -> c_float;
}

/// A composite activation: a fixed formula of correctly rounded operations (docs/math.md), so
/// its bits are the same on every backend, though it is not itself correctly rounded.
/// Parameters are those of the ONNX operator of the same name.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    Sigmoid,
    Softplus,
    GeluErf,
    GeluTanh,
    HardSigmoid { alpha: f32, beta: f32 },
    HardSwish,
    Mish,
    Elu { alpha: f32 },
    Selu { alpha: f32, gamma: f32 },
    Celu { alpha: f32 },
    LeakyRelu { alpha: f32 },
    RsqrtFormula,
}

impl Activation {
    /// Every activation, parameterised with the ONNX defaults.
    pub const ALL: &'static [Activation] = &[
        Activation::Sigmoid,
        Activation::Softplus,
        Activation::GeluErf,
        Activation::GeluTanh,
        Activation::HardSigmoid {
            alpha: 0.2,
            beta: 0.5,
        },
        Activation::HardSwish,
        Activation::Mish,
        Activation::Elu { alpha: 1.0 },
        Activation::Selu {
            alpha: 1.673_263_2,
            gamma: 1.050_701,
        },
        Activation::Celu { alpha: 1.0 },
        Activation::LeakyRelu { alpha: 0.01 },
        Activation::RsqrtFormula,
    ];

    /// The activation's position in [`Activation::ALL`] (its parameters aside): the number
    /// the CUDA backend's `sb_activation(a, v, p0, p1)` switch takes.
    #[must_use]
    pub fn index(self) -> usize {
        Activation::ALL
            .iter()
            .position(|b| b.name() == self.name())
            .unwrap_or(Activation::ALL.len())
    }

    /// The parameters `(p0, p1)` of `sb_activation(a, v, p0, p1)` (zeros where unused).
    #[must_use]
    pub fn params(self) -> (f32, f32) {
        match self {
            Activation::HardSigmoid { alpha, beta } => (alpha, beta),
            Activation::Selu { alpha, gamma } => (alpha, gamma),
            Activation::Elu { alpha }
            | Activation::Celu { alpha }
            | Activation::LeakyRelu { alpha } => (alpha, 0.0),
            _ => (0.0, 0.0),
        }
    }

    /// The formula's name in docs/math.md.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Activation::Sigmoid => "sigmoid",
            Activation::Softplus => "softplus",
            Activation::GeluErf => "gelu_erf",
            Activation::GeluTanh => "gelu_tanh",
            Activation::HardSigmoid { .. } => "hardsigmoid",
            Activation::HardSwish => "hardswish",
            Activation::Mish => "mish",
            Activation::Elu { .. } => "elu",
            Activation::Selu { .. } => "selu",
            Activation::Celu { .. } => "celu",
            Activation::LeakyRelu { .. } => "leaky_relu",
            Activation::RsqrtFormula => "rsqrt_formula",
        }
    }

    /// The formula's value at `x`.
    #[must_use]
    pub fn eval(self, x: f32) -> f32 {
        // SAFETY: pure C functions of floats.
        unsafe {
            match self {
                Activation::Sigmoid => samebits_sigmoidf(x),
                Activation::Softplus => samebits_softplusf(x),
                Activation::GeluErf => samebits_gelu_erff(x),
                Activation::GeluTanh => samebits_gelu_tanhf(x),
                Activation::HardSigmoid { alpha, beta } => samebits_hardsigmoidf(x, alpha, beta),
                Activation::HardSwish => samebits_hardswishf(x),
                Activation::Mish => samebits_mishf(x),
                Activation::Elu { alpha } => samebits_eluf(x, alpha),
                Activation::Selu { alpha, gamma } => samebits_seluf(x, alpha, gamma),
                Activation::Celu { alpha } => samebits_celuf(x, alpha),
                Activation::LeakyRelu { alpha } => samebits_leaky_reluf(x, alpha),
                Activation::RsqrtFormula => samebits_rsqrt_formulaf(x),
            }
        }
    }

    /// `dst[i] = self(src[i])`; panics unless the lengths are equal.
    pub fn eval_slice(self, src: &[f32], dst: &mut [f32]) {
        assert_eq!(
            src.len(),
            dst.len(),
            "Activation::eval_slice: length mismatch"
        );
        let (s, d, n) = (src.as_ptr(), dst.as_mut_ptr(), src.len());
        // SAFETY: both slices hold n floats.
        unsafe {
            match self {
                Activation::Sigmoid => samebits_sigmoidf_slice(s, d, n),
                Activation::LeakyRelu { alpha } => samebits_leaky_reluf_slice(s, d, n, alpha),
                Activation::HardSigmoid { alpha, beta } => {
                    samebits_hardsigmoidf_slice(s, d, n, alpha, beta)
                }
                Activation::HardSwish => samebits_hardswishf_slice(s, d, n),
                _ => {
                    for (d, &s) in dst.iter_mut().zip(src) {
                        *d = self.eval(s);
                    }
                }
            }
        }
    }
}
