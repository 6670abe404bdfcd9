//! Runtime instruction-set detection and the switch that forces one ISA.
//!
//! Implements contract section `isa-dispatch` (docs/contract.md): the ISA only selects how the
//! canonical order is executed (register tiling, vector width), never the order itself, so every
//! ISA gives the same bits. The crate is compiled for the baseline target; vector code lives in
//! `#[target_feature]` functions that run only after the feature was detected here.
//!
//! Which ISA a kernel call uses, first rule that applies:
//! 1. a thread-local scope set with [`with_isa`] on the calling thread,
//! 2. the process-wide override [`set_forced_isa`],
//! 3. the environment variable `SAMEBITS_ISA=scalar|avx2|avx512|neon` (read once),
//! 4. [`Isa::detect`], the widest ISA available.

use std::cell::Cell;
use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

/// An instruction set that the kernels of this crate can be executed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isa {
    /// Portable Rust; `f32::mul_add` for `fma`.
    Scalar,
    /// x86-64 AVX2 + FMA3, 8 lanes.
    Avx2,
    /// x86-64 AVX-512F, 16 lanes.
    Avx512,
    /// AArch64 Advanced SIMD, 4 lanes.
    Neon,
}

/// A requested ISA that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IsaError {
    /// The name is not one of `scalar`, `avx2`, `avx512`, `neon`.
    UnknownName(String),
    /// The ISA exists but this CPU (or this build's architecture) lacks it.
    Unavailable(Isa),
}

impl fmt::Display for IsaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IsaError::UnknownName(name) => write!(
                f,
                "unknown ISA {name:?}: expected one of scalar, avx2, avx512, neon"
            ),
            IsaError::Unavailable(isa) => write!(
                f,
                "ISA {} is not available on this CPU (available: {})",
                isa.name(),
                Isa::available()
                    .iter()
                    .map(|i| i.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

impl std::error::Error for IsaError {}

impl Isa {
    const ALL: [Isa; 4] = [Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon];

    /// Lower-case name, as accepted by `SAMEBITS_ISA`.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Neon => "neon",
        }
    }

    /// Parses a name as accepted by `SAMEBITS_ISA` (case-insensitive).
    pub fn from_name(name: &str) -> Result<Isa, IsaError> {
        Isa::ALL
            .into_iter()
            .find(|isa| isa.name().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| IsaError::UnknownName(name.to_string()))
    }

    /// Whether this CPU can execute kernels for `self`.
    pub fn is_available(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => std::arch::is_aarch64_feature_detected!("neon"),
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// All ISAs this CPU can execute, narrowest first (always starts with `Scalar`).
    pub fn available() -> Vec<Isa> {
        Isa::ALL
            .into_iter()
            .filter(|isa| isa.is_available())
            .collect()
    }

    /// The widest ISA this CPU can execute.
    pub fn detect() -> Isa {
        *Isa::available()
            .last()
            .expect("the scalar ISA is always available")
    }

    /// The ISA requested by `SAMEBITS_ISA`, read once per process; `Ok(None)` when unset.
    pub fn from_env() -> Result<Option<Isa>, IsaError> {
        static FROM_ENV: OnceLock<Result<Option<Isa>, IsaError>> = OnceLock::new();
        FROM_ENV
            .get_or_init(|| match std::env::var("SAMEBITS_ISA") {
                Ok(name) if !name.trim().is_empty() => {
                    let isa = Isa::from_name(&name)?;
                    if isa.is_available() {
                        Ok(Some(isa))
                    } else {
                        Err(IsaError::Unavailable(isa))
                    }
                }
                _ => Ok(None),
            })
            .clone()
    }

    /// The ISA a kernel called on this thread uses now (rules in the module doc).
    ///
    /// # Panics
    /// When `SAMEBITS_ISA` names an unknown or unavailable ISA and no override applies: a run
    /// that asked for one ISA never silently gets another. Call [`Isa::from_env`] at start-up to
    /// report that error gracefully.
    pub fn active() -> Isa {
        if let Some(isa) = SCOPED.with(Cell::get) {
            return isa;
        }
        if let Some(isa) = decode(FORCED.load(Ordering::Relaxed)) {
            return isa;
        }
        match Isa::from_env() {
            Ok(Some(isa)) => isa,
            Ok(None) => Isa::detect(),
            Err(err) => panic!("SAMEBITS_ISA: {err}"),
        }
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Process-wide override: 0 = none, otherwise `1 + index in Isa::ALL`.
static FORCED: AtomicU8 = AtomicU8::new(0);

thread_local! {
    static SCOPED: Cell<Option<Isa>> = const { Cell::new(None) };
}

fn decode(code: u8) -> Option<Isa> {
    code.checked_sub(1).map(|i| Isa::ALL[usize::from(i)])
}

fn encode(isa: Option<Isa>) -> u8 {
    isa.map_or(0, |isa| {
        1 + Isa::ALL.iter().position(|&i| i == isa).expect("listed") as u8
    })
}

/// Forces every later kernel call in the process to use `isa` (`None` restores detection and
/// `SAMEBITS_ISA`). Fails, changing nothing, when the ISA is unavailable.
pub fn set_forced_isa(isa: Option<Isa>) -> Result<(), IsaError> {
    if let Some(isa) = isa
        && !isa.is_available()
    {
        return Err(IsaError::Unavailable(isa));
    }
    FORCED.store(encode(isa), Ordering::Relaxed);
    Ok(())
}

/// Runs `f` with kernel calls made on this thread using `isa` (parallel work started by those
/// calls inherits it). Restores the previous scope afterwards, also on panic.
///
/// # Panics
/// When `isa` is unavailable on this CPU.
pub fn with_isa<R>(isa: Isa, f: impl FnOnce() -> R) -> R {
    assert!(isa.is_available(), "{}", IsaError::Unavailable(isa));
    struct Restore(Option<Isa>);
    impl Drop for Restore {
        fn drop(&mut self) {
            SCOPED.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(SCOPED.with(|s| s.replace(Some(isa))));
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_fail() {
        for isa in Isa::ALL {
            assert_eq!(Isa::from_name(isa.name()), Ok(isa));
        }
        assert_eq!(Isa::from_name("AVX512"), Ok(Isa::Avx512));
        assert!(matches!(
            Isa::from_name("sse9"),
            Err(IsaError::UnknownName(_))
        ));
    }

    #[test]
    fn available_starts_with_scalar_and_detect_is_widest() {
        let available = Isa::available();
        assert_eq!(available[0], Isa::Scalar);
        assert_eq!(Isa::detect(), *available.last().unwrap());
        #[cfg(target_arch = "x86_64")]
        assert!(!available.contains(&Isa::Neon));
    }

    #[test]
    fn scoped_isa_applies_and_restores() {
        let outside = Isa::active();
        with_isa(Isa::Scalar, || {
            assert_eq!(Isa::active(), Isa::Scalar);
        });
        assert_eq!(Isa::active(), outside);
    }

    #[test]
    fn forcing_an_unavailable_isa_is_an_error() {
        let missing = Isa::ALL.into_iter().find(|isa| !isa.is_available());
        if let Some(isa) = missing {
            assert_eq!(set_forced_isa(Some(isa)), Err(IsaError::Unavailable(isa)));
            assert!(
                IsaError::Unavailable(isa)
                    .to_string()
                    .contains("not available")
            );
        }
        assert_eq!(set_forced_isa(None), Ok(()));
    }
}
