//! The link between GPUs in a build without the `cuda` feature: there is none. Every check
//! fails, before any work, with the runtime's one line saying that this build has no CUDA
//! (opening a GPU fails, and no GPU value can exist), so `--device cuda` with `--n-partitions`
//! is an error, never a panic; the launcher and the CLI's `pipeline-worker` are the same code in
//! both builds.

use crate::Result;
use crate::link::{Link, Message};
use samebits_runtime::device::cuda_backend;

/// GPUs this process can use: none in this build.
pub fn visible_gpus() -> usize {
    0
}

/// Fails: no GPU opens in this build.
pub fn check_gpus(_n: usize, first: usize) -> Result<()> {
    match *cuda_backend(first)? {}
}

/// Fails like [`check_gpus`]: there is no NCCL without CUDA.
pub fn check_nccl() -> Result<()> {
    match *cuda_backend(0)? {}
}

/// Fails like [`check_gpus`].
pub fn new_id() -> Result<[u8; 128]> {
    match *cuda_backend(0)? {}
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
        match *cuda_backend(gpu)? {}
    }
}

impl Link for NcclLink {
    fn exchange(&mut self, _message: &Message) -> Result<Message> {
        match *self {}
    }
}
