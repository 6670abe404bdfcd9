//! The GPU side of [`crate::Executor`] in a build without the `cuda` feature
//! (`--no-default-features`): the names `cuda.rs` takes from samebits-cuda, with no GPU behind
//! them. [`CudaBackend::new`] fails with one line naming the feature, so `--device cuda` is an
//! error, never a panic, and the rest of the workspace needs no `cfg`. The backend and the
//! device tensor are empty enums: no value of them can exist, so the methods that would use
//! one never run.

use crate::RuntimeError;
use samebits_ir::Value;
use samebits_ops::{Plan, RunOptions, RunStats};
use std::sync::Arc;

/// Why no GPU opens in this build.
#[derive(Debug, thiserror::Error)]
#[error("this samebits was built without CUDA (feature `cuda`)")]
pub struct CudaError;

impl From<CudaError> for RuntimeError {
    fn from(e: CudaError) -> Self {
        RuntimeError::Cuda(e)
    }
}

/// A GPU opened for running plans: none in this build.
pub enum CudaBackend {}

impl CudaBackend {
    /// Fails: this build has no CUDA backend.
    pub fn new(_ordinal: usize) -> Result<CudaBackend, CudaError> {
        Err(CudaError)
    }

    pub fn device_name(&self) -> &str {
        match *self {}
    }
}

/// A plan bound to a GPU: it would need a [`CudaBackend`], of which none exists in this build.
pub struct CudaExecutor {
    backend: Arc<CudaBackend>,
}

impl CudaExecutor {
    pub fn new(backend: Arc<CudaBackend>, _plan: Arc<Plan>) -> CudaExecutor {
        CudaExecutor { backend }
    }

    pub fn sharing_constants(&self, _plan: Arc<Plan>) -> CudaExecutor {
        match *self.backend {}
    }

    pub fn backend(&self) -> &Arc<CudaBackend> {
        &self.backend
    }

    pub fn run_with(
        &self,
        _inputs: Vec<Value>,
        _options: RunOptions,
    ) -> Result<(Vec<Value>, RunStats), CudaError> {
        match *self.backend {}
    }

    pub fn run_io(
        &self,
        _inputs: Vec<IoValue>,
        _keep: &[bool],
        _options: RunOptions,
    ) -> Result<(Vec<IoValue>, RunStats), CudaError> {
        match *self.backend {}
    }

    pub fn download_tail(&self, tensor: &DeviceTensor, _len: usize) -> Result<Vec<f32>, CudaError> {
        match *tensor {}
    }
}

/// A tensor left on a GPU: none in this build.
#[derive(Clone, Debug)]
pub enum DeviceTensor {}

impl DeviceTensor {
    pub fn shape(&self) -> &[usize] {
        match *self {}
    }
}

/// An input or output of [`crate::Executor::run_io`]: a host value (a device value cannot
/// exist in this build).
#[derive(Clone, Debug)]
pub enum IoValue {
    Host(Value),
    Device(DeviceTensor),
}

impl IoValue {
    /// A sequence of these tensors (all on the host in this build); `None` if an item is not
    /// a tensor.
    pub fn sequence(items: Vec<IoValue>) -> Option<IoValue> {
        let tensors = items
            .into_iter()
            .map(|i| match i {
                IoValue::Host(Value::Tensor(t)) => Some(t),
                IoValue::Host(_) => None,
                IoValue::Device(d) => match d {},
            })
            .collect::<Option<Vec<_>>>()?;
        Some(IoValue::Host(Value::Sequence(tensors)))
    }

    /// The items of a sequence, `None` for a tensor.
    pub fn into_items(self) -> Option<Vec<IoValue>> {
        match self {
            IoValue::Host(Value::Sequence(ts)) => {
                Some(ts.into_iter().map(|t| IoValue::Host(t.into())).collect())
            }
            IoValue::Host(_) => None,
            IoValue::Device(d) => match d {},
        }
    }
}
