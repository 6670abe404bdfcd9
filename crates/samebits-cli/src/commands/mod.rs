//! The subcommands, one file each, and the option types they share.

pub mod bench;
pub mod compile;
pub mod conformance;
pub mod embed;
pub mod generate;
pub mod pipeline_worker;
pub mod run;
pub mod serve;
pub mod tui;
pub mod verify;

use anyhow::{Context, Result, bail};
use samebits_pipeline::{PipelineOptions, Rendezvous};
use samebits_runtime::{CompileOptions, Device, OperationSet};
use std::path::PathBuf;

/// How to compile: shared by every subcommand that runs a model.
#[derive(clap::Args, Clone)]
pub struct ModelOptions {
    /// Kernel promise: reproducible (same bits on every machine; the default), deterministic
    /// (same bits run to run on this machine) or default (fastest, no promise).
    #[arg(long, value_name = "SET", default_value = "reproducible")]
    pub operation_set: OperationSet,
    /// Keep compiler artifacts (IR dumps after each pass, plan.json) in this folder.
    #[arg(long, value_name = "DIR")]
    pub artifacts_dir: Option<PathBuf>,
    /// Copy the model's external tensor files into the artifacts folder instead of symlinking.
    #[arg(long)]
    pub colocate_tensors: bool,
    #[command(flatten)]
    pub device: DeviceOption,
}

/// `--device`: shared by every subcommand that runs a model.
#[derive(clap::Args, Clone, Copy)]
pub struct DeviceOption {
    /// Where to run: cpu, cuda (GPU 0) or cuda:N. Steps without a GPU kernel run on the CPU;
    /// the outputs have the same bits on every device.
    #[arg(long, value_name = "DEVICE", default_value = "cpu")]
    pub device: Device,
}

impl ModelOptions {
    pub fn compile_options(&self) -> CompileOptions {
        CompileOptions {
            artifacts_dir: self.artifacts_dir.clone(),
            colocate_tensors: self.colocate_tensors,
            requires_reproducibility: self.operation_set.is_reproducible(),
            operation_set: Some(self.operation_set),
            device: self.device.device,
        }
    }
}

/// `--n-partitions` and its companions: shared by run, generate, bench and verify.
#[derive(clap::Args, Clone)]
pub struct PartitionOptions {
    /// Pipeline stages: the model is cut into N stages balanced by parameter bytes
    /// (docs/pipeline.md), one per GPU over NCCL with --device cuda (GPUs g..g+N-1 for
    /// cuda:g), simulated on the CPU with --device cpu. The bits do not depend on N; 1 runs
    /// the model whole.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub n_partitions: usize,
    /// Requests (inputs, prompts, sequences) that travel through the stages together.
    #[arg(long, value_name = "B", default_value_t = 1)]
    pub micro_batch: usize,
    /// With --device cuda: the NCCL id rendezvous (file:PATH or tcp:HOST:PORT) of workers
    /// started by hand, on this host or others, with `samebits pipeline-worker`; by default one
    /// local worker process per GPU is spawned.
    #[arg(long, value_name = "ADDR")]
    pub rendezvous: Option<Rendezvous>,
}

/// Runs N = 1 through the pipeline too (the NCCL transport on one GPU), for checks.
const FORCE_PIPELINE: &str = "SAMEBITS_FORCE_PIPELINE";

impl PartitionOptions {
    /// The pipeline to run, or `None` for today's single-stage path (N = 1, unless
    /// SAMEBITS_FORCE_PIPELINE=1).
    pub fn pipeline(&self, device: Device, operation_set: OperationSet) -> Option<PipelineOptions> {
        let forced = std::env::var(FORCE_PIPELINE).is_ok_and(|v| v == "1");
        (self.n_partitions != 1 || forced || self.rendezvous.is_some()).then(|| PipelineOptions {
            n_partitions: self.n_partitions,
            operation_set,
            device,
            rendezvous: self.rendezvous.clone(),
        })
    }
}

/// Parses `NAME=VALUE`.
pub fn name_value(s: &str) -> Result<(String, String)> {
    let (n, v) = s
        .split_once('=')
        .with_context(|| format!("expected NAME=VALUE, got {s:?}"))?;
    if n.is_empty() {
        bail!("empty name in {s:?}");
    }
    Ok((n.to_string(), v.to_string()))
}
