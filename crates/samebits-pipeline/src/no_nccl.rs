//! The link between GPUs in a build without the `cuda` feature: there is none. Every check
//! fails, before any work: with the runtime's one line saying that this build has no CUDA, or,
//! where another crate turned on the runtime's CUDA and only this crate's NCCL is missing, with
//! one line saying so. So `--device cuda` with `--n-partitions` is an error, never a panic; the
//! launcher and the CLI's `pipeline-worker` are the same code in both builds.

use crate::link::{Link, Message};
use crate::{PipelineError, Result};
use samebits_runtime::device::cuda_backend;

/// GPUs this process can use: none in this build.
pub fn visible_gpus() -> usize {
    0
}

/// Fails: no GPU opens in this build, or none has NCCL.
pub fn check_gpus(_n: usize, first: usize) -> Result<()> {
    no_nccl(first)
}

/// Fails like [`check_gpus`]: there is no NCCL without this crate's `cuda` feature.
pub fn check_nccl() -> Result<()> {
    no_nccl(0)
}

/// Fails like [`check_gpus`].
pub fn new_id() -> Result<[u8; 128]> {
    no_nccl(0)
}

/// The runtime's error opening GPU `gpu` (a build without CUDA), else the missing NCCL's.
fn no_nccl<T>(gpu: usize) -> Result<T> {
    cuda_backend(gpu)?;
    Err(PipelineError::Usage(
        "this build has no NCCL: samebits-pipeline was built without its cuda feature".into(),
    ))
}

/// A rank's NCCL communicator: none in this build.
pub enum NcclLink {}

impl NcclLink {
    /// Fails like [`check_gpus`].
    pub fn connect(
        gpu: usize,
        _rank: usize,
        _world: usize,
        _id: &[u8; 128],
        _fingerprint: u64,
    ) -> Result<NcclLink> {
        no_nccl(gpu)
    }
}

impl Link for NcclLink {
    fn exchange(&mut self, _message: &Message) -> Result<Message> {
        match *self {}
    }
}
