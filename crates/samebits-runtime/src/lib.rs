//! The samebits runtime: what the CLI and library users call.
//!
//! - [`compile`] with [`CompileOptions`] (mirroring the known API: `artifacts_dir`,
//!   `colocate_tensors`, `requires_reproducibility`) imports a model, runs the pass pipeline,
//!   writes the inspectable artifacts, and returns a runnable [`CompiledModel`].
//! - [`device`]: [`Device`] (`cpu`, `cuda:N`) and [`Executor`], a plan bound to its device; a
//!   compiled model runs on the device of its [`CompileOptions`].
//! - [`tensor_file`]: reading and writing `.npy` and ONNX `TensorProto` (`.pb`) tensor files.
//! - [`conformance`]: the ONNX backend-test runner (reference outputs compared with tolerance).
//! - [`receipt`]: the record of a run (hashes of model, inputs, options, outputs) and
//!   [`receipt::verify`], which re-runs it and compares bit for bit.

mod compile;
pub mod conformance;
pub mod device;
mod error;
pub mod hashing;
pub mod receipt;
pub mod tensor_file;

pub use compile::{Artifacts, CompileOptions, CompiledModel, ModelSource, compile};
pub use device::{Device, Executor, IoValue};
pub use error::{Result, RuntimeError};
pub use samebits_ops::OperationSet;

/// The engine's name and version, as receipts record them.
pub const ENGINE: &str = concat!("samebits ", env!("CARGO_PKG_VERSION"));
