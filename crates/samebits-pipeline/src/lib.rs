//! Pipeline parallelism: a model cut into N sequential stages, one per GPU, whose outputs have
//! the same bits for every N (docs/pipeline.md).
//!
//! - [`boundaries`]: where the cuts go (balanced by parameter bytes: lightest heaviest stage, then most even, then earliest).
//! - [`stage`]: what a rank computes (an ONNX stage graph, or decoder layers with their own KV
//!   caches) and [`stage::prepare`], which cuts a model and builds a process's stages.
//! - [`link`]: messages, their wire format, and the ring every rank exchanges them over.
//! - [`nccl`]: the ring over NCCL send/recv between GPUs, and the up-front checks (with the
//!   `cuda` feature; without it a stand-in whose checks fail with one line, `no_nccl.rs`).
//! - [`rendezvous`]: the NCCL unique id handed from rank 0 to the others (file or TCP).
//! - [`worker`]: the tick loop of every rank; rank 0 drives it ([`worker::Driver`]).
//! - [`launcher`]: one process per GPU on one host (the same worker code runs across hosts).
//! - [`simulation`]: N stages as N threads on the CPU, for `--device cpu` and the tests.
//! - [`drivers`]: what rank 0 feeds in: ONNX requests and decoder sequences, micro-batched.
//!
//! [`Pipeline::start`] picks the simulation for `Device::Cpu` and NCCL for `Device::Cuda(g)`
//! (rank r on GPU g + r).

pub mod boundaries;
pub mod drivers;
pub mod launcher;
pub mod link;
#[cfg(feature = "cuda")]
pub mod nccl;
#[cfg(not(feature = "cuda"))]
#[path = "no_nccl.rs"]
pub mod nccl;
pub mod rendezvous;
pub mod simulation;
pub mod stage;
pub mod worker;

use samebits_llm::Llm;
use samebits_ops::OperationSet;
use samebits_runtime::{CompiledModel, Device};
use std::path::Path;

pub use rendezvous::Rendezvous;
pub use stage::ModelSpec;
pub use worker::Driver;

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// A request the pipeline cannot serve (partition count, model, arguments).
    #[error("{0}")]
    Usage(String),
    /// Missing GPUs or libraries.
    #[error("{0}")]
    Unavailable(String),
    #[error("NCCL: {0}")]
    Nccl(String),
    #[error("pipeline transport: {0}")]
    Link(String),
    #[error("pipeline {0}")]
    Stage(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Runtime(Box<samebits_runtime::RuntimeError>),
    #[error(transparent)]
    Llm(Box<samebits_llm::LlmError>),
    #[error(transparent)]
    Op(Box<samebits_ops::OpError>),
    #[error(transparent)]
    Ir(Box<samebits_ir::Error>),
}

macro_rules! boxed_from {
    ($($variant:ident: $t:ty),*) => {$(
        impl From<$t> for PipelineError {
            fn from(e: $t) -> Self {
                PipelineError::$variant(Box::new(e))
            }
        }
    )*};
}

boxed_from!(
    Runtime: samebits_runtime::RuntimeError,
    Llm: samebits_llm::LlmError,
    Op: samebits_ops::OpError,
    Ir: samebits_ir::Error
);

impl PipelineError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        PipelineError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

pub type Result<T, E = PipelineError> = std::result::Result<T, E>;

/// How to run a pipeline.
#[derive(Clone, Debug)]
pub struct PipelineOptions {
    /// Stages (`--n-partitions`).
    pub n_partitions: usize,
    pub operation_set: OperationSet,
    /// `Cpu`: the simulation; `Cuda(g)`: rank r on GPU g + r, over NCCL.
    pub device: Device,
    /// With NCCL: the rendezvous of workers started elsewhere (`samebits pipeline-worker`);
    /// `None` spawns one local worker process per GPU.
    pub rendezvous: Option<Rendezvous>,
}

/// The model rank 0 loaded besides its stage: what requests are made of.
pub enum Loaded {
    /// The whole ONNX model compiled on the CPU (inputs, outputs, receipts).
    Onnx(Box<CompiledModel>),
    /// The decoder's configuration and tokenizer.
    Llm(Box<Llm>),
}

/// Rank 0's handle on a running pipeline; dropping it shuts every rank down.
pub struct Pipeline {
    head: worker::Head,
    workers: Workers,
    n_partitions: usize,
    description: String,
    summary: Vec<String>,
}

/// The most stages a pipeline can have: one per GPU (or CPU thread), far above any host's, and
/// checked before anything is allocated per stage.
pub const MAX_PARTITIONS: usize = 1024;

enum Workers {
    Threads(Vec<std::thread::JoinHandle<Result<()>>>),
    Processes(launcher::Children),
}

impl Pipeline {
    /// Cuts `spec` into `options.n_partitions` stages and starts every rank; returns the pipeline
    /// and rank 0's model. Every check (partition count, GPUs, NCCL) happens before any work.
    pub fn start(spec: &ModelSpec, options: &PipelineOptions) -> Result<(Pipeline, Loaded)> {
        if options.n_partitions == 0 {
            return Err(PipelineError::Usage(
                "--n-partitions must be at least 1".into(),
            ));
        }
        if options.n_partitions > MAX_PARTITIONS {
            return Err(PipelineError::Usage(format!(
                "--n-partitions {} is more than the {MAX_PARTITIONS} stages a pipeline can have",
                options.n_partitions
            )));
        }
        match options.device {
            Device::Cpu => simulation::start(spec, options),
            Device::Cuda(first) => launcher::start(spec, options, first),
        }
    }

    /// Runs `driver`'s requests through the stages ([`worker::Head::drive`]).
    pub fn drive(&mut self, driver: &mut dyn Driver) -> Result<()> {
        self.head.drive(driver)
    }

    pub fn n_partitions(&self) -> usize {
        self.n_partitions
    }

    /// Where it runs, as receipts record it.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// One line per stage: what it holds.
    pub fn summary(&self) -> &[String] {
        &self.summary
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        let stopped = self.head.stop().is_ok();
        match &mut self.workers {
            // A broken ring may leave threads waiting forever: join them only after a clean stop.
            Workers::Threads(threads) if stopped => {
                for t in threads.drain(..) {
                    let _ = t.join();
                }
            }
            Workers::Threads(_) => {}
            Workers::Processes(children) => children.finish(stopped),
        }
    }
}
