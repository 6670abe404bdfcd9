//! The keyword arguments several functions share (`device`, `operation_set`), parsed by the
//! same `FromStr` implementations as the CLI's `--device` and `--operation-set`.

use crate::errors::bad_argument;
use pyo3::PyResult;
use samebits_runtime::{Device, OperationSet};

/// `"cpu"`, `"cuda"` or `"cuda:N"`.
pub fn device(name: &str) -> PyResult<Device> {
    name.parse().map_err(bad_argument)
}

/// `"reproducible"`, `"reproducible-int8"` (exact-integer products of Q4_0 / Q4_1 / Q8_0 GGUF
/// weights), `"deterministic"` or `"default"`.
pub fn operation_set(name: &str) -> PyResult<OperationSet> {
    name.parse().map_err(bad_argument)
}

/// A count given as a Python int that must not be negative (`max_tokens`, `top_k`, `seed`).
pub fn non_negative(name: &str, value: i128) -> PyResult<u64> {
    u64::try_from(value)
        .map_err(|_| bad_argument(format!("{name} must be an integer >= 0, got {value}")))
}
