//! The samebits runtime: what the CLI and library users call.
//!
//! - [`compile`] with [`CompileOptions`] (mirroring the known API: `artifacts_dir`,
//!   `colocate_tensors`, `requires_reproducibility`) imports a model, runs the pass pipeline,
//!   writes the inspectable artifacts, and returns a runnable [`CompiledModel`].
//! - [`device`]: [`Device`] (`cpu`, `cuda:N`) and [`Executor`], a plan bound to its device; a
//!   compiled model runs on the device of its [`CompileOptions`]. The GPU comes from
//!   samebits-cuda with the `cuda` feature (on by default); without it `cuda:N` fails to open
//!   with one line, and cudarc is not in the build.
//! - [`tensor_file`]: reading and writing `.npy` and ONNX `TensorProto` (`.pb`) tensor files.
//! - [`conformance`]: the ONNX backend-test runner (reference outputs compared with tolerance).
//! - [`memory`]: keeping the buffers a run frees for the next run (the allocator's settings).
//! - Runs of a compiled model go through plans specialised to their input shapes
//!   (`specialised.rs`: the shape arithmetic of dynamic axes folded, the same bits).
//! - [`receipt`]: the record of a run (hashes of model, inputs, options, outputs) and
//!   [`receipt::verify`], which re-runs it and compares bit for bit.

mod compile;
pub mod conformance;
// The one place the `cuda` feature is decided: samebits-cuda, or a stand-in whose GPU never
// opens (see `no_cuda.rs`); everything else is the same code in both builds.
#[cfg(feature = "cuda")]
mod cuda;
#[cfg(not(feature = "cuda"))]
#[path = "no_cuda.rs"]
mod cuda;
pub mod device;
mod error;
pub mod hashing;
pub mod memory;
pub mod pool;
pub mod receipt;
mod specialised;
pub mod tensor_file;

pub use compile::{Artifacts, CompileOptions, CompiledModel, ModelSource, compile};
pub use device::{Device, Executor, IoValue};
pub use error::{Result, RuntimeError};
pub use samebits_ops::OperationSet;

/// The engine's name and version, as receipts record them.
pub const ENGINE: &str = concat!("samebits ", env!("CARGO_PKG_VERSION"));
