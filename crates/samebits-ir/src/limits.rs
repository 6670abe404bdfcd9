//! Bounds on the sizes an untrusted model may ask for, checked before anything is allocated
//! (docs/security.md): a value a file declares (a pad, a stride, a scale, an output size) is
//! compared with these limits first, so a hostile file gets an error naming what it asked for
//! instead of an out-of-memory abort or an overflow.
//!
//! Each limit has a documented default and an environment variable that raises (or lowers) it
//! for models that legitimately need more: `SAMEBITS_MAX_TENSOR_BYTES`,
//! `SAMEBITS_MAX_WINDOW_ATTRIBUTE`, `SAMEBITS_MAX_LOOP_ITERATIONS`,
//! `SAMEBITS_MAX_FUNCTION_CALLS` and `SAMEBITS_MAX_DFT_WORK`. The variables are read once per
//! process.

use std::sync::OnceLock;

use crate::{DType, Result, checked_numel};

/// Default of [`max_tensor_bytes`]: 16 GiB, larger than any activation or weight tensor of the
/// models samebits runs on one device, smaller than what an allocator refuses outright.
pub const DEFAULT_MAX_TENSOR_BYTES: u64 = 16 << 30;

/// Default of [`max_window_attribute`]: 65,536, far above the strides, dilations, pads and
/// kernel sizes of real convolutions and pools.
pub const DEFAULT_MAX_WINDOW_ATTRIBUTE: u64 = 1 << 16;

/// Default of [`max_loop_iterations`]: 1,048,576 iterations of one Loop node, far above the
/// trip counts of real models (beam searches, per-token or per-box loops), and few enough that
/// a hostile `M` or a condition that never turns false ends in seconds, not hours.
pub const DEFAULT_MAX_LOOP_ITERATIONS: u64 = 1 << 20;

/// Default of [`max_function_calls`]: 1,048,576 model-local function calls expanded in one
/// model. Real models call a few thousand; functions that each call the next twice, thirty deep,
/// would expand to a billion nodes.
pub const DEFAULT_MAX_FUNCTION_CALLS: u64 = 1 << 20;

/// Default of [`max_dft_work`]: 2^35 complex multiply-adds for one DFT or STFT node (its
/// lines × transform length × output bins, as the contract's direct sum does them): a
/// minute of 16 kHz audio with 2048-point frames needs a quarter of it, and a hostile
/// `dft_length` cannot make one node run for hours.
pub const DEFAULT_MAX_DFT_WORK: u64 = 1 << 35;

fn from_env(name: &str, default: u64, cell: &'static OnceLock<u64>) -> u64 {
    *cell.get_or_init(|| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&v| v > 0)
            .unwrap_or(default)
    })
}

/// The most bytes one tensor a model computes may hold (`SAMEBITS_MAX_TENSOR_BYTES`).
pub fn max_tensor_bytes() -> u64 {
    static CELL: OnceLock<u64> = OnceLock::new();
    from_env("SAMEBITS_MAX_TENSOR_BYTES", DEFAULT_MAX_TENSOR_BYTES, &CELL)
}

/// The largest stride, dilation, pad or kernel size a window op (Conv, ConvTranspose, the pools)
/// accepts (`SAMEBITS_MAX_WINDOW_ATTRIBUTE`).
pub fn max_window_attribute() -> u64 {
    static CELL: OnceLock<u64> = OnceLock::new();
    from_env(
        "SAMEBITS_MAX_WINDOW_ATTRIBUTE",
        DEFAULT_MAX_WINDOW_ATTRIBUTE,
        &CELL,
    )
}

/// The most iterations one run of a Loop node may take (`SAMEBITS_MAX_LOOP_ITERATIONS`).
pub fn max_loop_iterations() -> u64 {
    static CELL: OnceLock<u64> = OnceLock::new();
    from_env(
        "SAMEBITS_MAX_LOOP_ITERATIONS",
        DEFAULT_MAX_LOOP_ITERATIONS,
        &CELL,
    )
}

/// The most model-local function calls the importer expands inline in one model
/// (`SAMEBITS_MAX_FUNCTION_CALLS`).
pub fn max_function_calls() -> u64 {
    static CELL: OnceLock<u64> = OnceLock::new();
    from_env(
        "SAMEBITS_MAX_FUNCTION_CALLS",
        DEFAULT_MAX_FUNCTION_CALLS,
        &CELL,
    )
}

/// The most complex multiply-adds one DFT or STFT node may do (`SAMEBITS_MAX_DFT_WORK`).
pub fn max_dft_work() -> u64 {
    static CELL: OnceLock<u64> = OnceLock::new();
    from_env("SAMEBITS_MAX_DFT_WORK", DEFAULT_MAX_DFT_WORK, &CELL)
}

/// Errors unless `lines` transforms of length `len` with `bins` output bins each fit
/// [`max_dft_work`]; `op` names the node's op in the message.
pub fn check_dft_work(op: &str, lines: usize, len: usize, bins: usize) -> Result<()> {
    let limit = max_dft_work();
    let work = (lines as u64)
        .checked_mul(len as u64)
        .and_then(|w| w.checked_mul(bins as u64));
    match work {
        Some(w) if w <= limit => Ok(()),
        _ => Err(crate::invalid!(
            "{op}: {lines} transforms of length {len} into {bins} bins would take more than \
             {limit} multiply-adds (the limit SAMEBITS_MAX_DFT_WORK sets)"
        )),
    }
}

/// Errors unless a tensor of `shape` and `dtype` fits [`max_tensor_bytes`]; `what` names it in
/// the message (for example `Conv output`).
pub fn check_tensor_size(what: &str, shape: &[usize], dtype: DType) -> Result<()> {
    let limit = max_tensor_bytes();
    // Sub-byte types report 1 byte per element here: a bound, not an exact size.
    let bytes = checked_numel(shape)
        .ok()
        .and_then(|n| (n as u64).checked_mul(dtype.size().max(1) as u64));
    match bytes {
        Some(b) if b <= limit => Ok(()),
        _ => Err(crate::invalid!(
            "{what} of shape {shape:?} ({dtype}) would exceed {limit} bytes (the limit \
             SAMEBITS_MAX_TENSOR_BYTES sets)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_over_the_limit_or_overflowing_are_refused() {
        assert!(check_tensor_size("x", &[1024, 1024], DType::F32).is_ok());
        let limit = max_tensor_bytes() as usize;
        assert!(check_tensor_size("x", &[limit / 4], DType::F32).is_ok());
        let err = check_tensor_size("Conv output", &[limit / 4 + 1], DType::F32).unwrap_err();
        assert!(err.to_string().starts_with("Conv output of shape"), "{err}");
        assert!(check_tensor_size("x", &[usize::MAX, 2], DType::F32).is_err());
        assert!(check_tensor_size("x", &[usize::MAX / 2], DType::U8).is_err());
    }
}
