//! `samebits pipeline-worker`: one worker rank of an NCCL pipeline (ranks 1..N). The command
//! that drives (rank 0: run, generate, bench or verify with --n-partitions N) spawns these on
//! its own host; on other hosts they are started by hand with the same model file and
//! `--rendezvous tcp:HOST0:PORT` (docs/pipeline.md).

use anyhow::Result;
use samebits_pipeline::launcher::{WorkerOptions, run_worker};
use samebits_pipeline::{ModelSpec, Rendezvous};
use samebits_runtime::{Device, OperationSet};
use std::path::PathBuf;
use std::process::ExitCode;

/// Serve one stage of a pipeline (rank 1..N-1) until the driving command stops.
///
/// The worker cuts the model exactly as rank 0 does (a deterministic function of the model and
/// N), builds only its own stage on its GPU, fetches the NCCL id from the rendezvous and joins
/// the communicator.
#[derive(clap::Args)]
#[command(after_help = "Example (rank 1 of 2 on a second host):
  samebits pipeline-worker SmolLM2-135M-Instruct.Q4_1.gguf --rank 1 --n-partitions 2 \\
      --rendezvous tcp:host0:29500 --device cuda:0")]
pub struct Args {
    /// The model file (the same as rank 0's).
    model: PathBuf,
    /// `onnx` or `llm` [default: from the file name: .onnx is onnx, anything else llm].
    #[arg(long)]
    kind: Option<String>,
    /// This worker's rank, 1..N-1.
    #[arg(long)]
    rank: usize,
    /// The number of stages N.
    #[arg(long, value_name = "N")]
    n_partitions: usize,
    /// Where rank 0 publishes the NCCL id: file:PATH or tcp:HOST:PORT.
    #[arg(long, value_name = "ADDR")]
    rendezvous: Rendezvous,
    /// This worker's GPU.
    #[arg(long, value_name = "DEVICE", default_value = "cuda:0")]
    device: Device,
    /// The operation set (rank 0's).
    #[arg(long, value_name = "SET", default_value = "reproducible")]
    operation_set: OperationSet,
}

pub fn main(args: Args) -> Result<ExitCode> {
    let spec = match args.kind.as_deref() {
        None => ModelSpec::from_path(&args.model),
        Some("onnx") => ModelSpec::Onnx(args.model),
        Some("llm") => ModelSpec::Llm(args.model),
        Some(other) => anyhow::bail!("--kind {other}: expected onnx or llm"),
    };
    run_worker(&WorkerOptions {
        spec,
        rank: args.rank,
        n_partitions: args.n_partitions,
        operation_set: args.operation_set,
        device: args.device,
        rendezvous: args.rendezvous,
    })?;
    Ok(ExitCode::SUCCESS)
}
