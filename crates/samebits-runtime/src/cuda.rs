//! The GPU side of [`crate::Executor`] in a build with the `cuda` feature (the default):
//! samebits-cuda's backend, executor and device values, and its errors as runtime errors.
//! `no_cuda.rs` stands in for this file in a build without the feature.

use crate::RuntimeError;
pub use samebits_cuda::{CudaBackend, CudaError, CudaExecutor, DeviceTensor, IoValue};

/// Op errors keep their own variant (conformance sorts them); the rest is a device error.
impl From<CudaError> for RuntimeError {
    fn from(e: CudaError) -> Self {
        match e {
            CudaError::Op(o) => RuntimeError::Op(o),
            e => RuntimeError::Cuda(e),
        }
    }
}
