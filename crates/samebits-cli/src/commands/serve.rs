//! `samebits serve`: an OpenAI-compatible HTTP server for one llama-family model, with a
//! generation receipt in every response (crate samebits-serve, docs/serve.md).

use super::DeviceOption;
use anyhow::Result;
use samebits_runtime::OperationSet;
use samebits_serve::engine::EngineOptions;
use samebits_serve::{ServeOptions, Server};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Serve a language model over HTTP with the OpenAI API: /v1/completions and
/// /v1/chat/completions (JSON, or server-sent events with "stream": true), /v1/models,
/// /v1/receipts/{id}, /health and /metrics (Prometheus).
///
/// Requests are batched continuously: they join the running batch at token boundaries, up to
/// --max-running at once, and wait in a queue of --max-queue (one more is answered 429). Each
/// sequence is computed in its canonical order whatever else runs beside it, so a request's
/// tokens and logits are the same bits alone, amid 31 others, on the CPU or on a GPU.
///
/// Every response carries its generation receipt as the top-level "samebits_receipt" object
/// (also at GET /v1/receipts/{id}); save the response or that object to a file and
/// `samebits verify FILE` re-checks it (on another machine, add --model PATH).
///
/// Sampling follows the request: temperature (default 1), top_p, top_k, seed (default 0),
/// max_tokens (default 16 for completions, the context for chat), stop. A client that
/// disconnects cancels its sequence. SIGTERM or Ctrl-C stops taking connections and lets
/// in-flight requests finish (up to --shutdown-grace).
#[derive(clap::Args)]
#[command(after_help = "Examples:
  samebits serve --model SmolLM2-135M-Instruct.Q4_1.gguf
  samebits serve --model m.gguf --device cuda --host 0.0.0.0 --port 8000 --max-running 32
  curl http://127.0.0.1:8000/v1/completions -H 'Content-Type: application/json' \\
       -d '{\"model\": \"SmolLM2-135M-Instruct.Q4_1.gguf\", \"prompt\": \"The capital of France is\", \"temperature\": 0}'
  curl -s http://127.0.0.1:8000/v1/completions -d '...' > response.json && samebits verify response.json")]
pub struct Args {
    /// The GGUF model file, or a Hugging Face checkpoint folder.
    #[arg(long, value_name = "PATH")]
    model: PathBuf,
    /// The name clients send as "model" (default: the model's file or folder name).
    #[arg(long, value_name = "NAME")]
    model_name: Option<String>,
    /// Address to listen on (0.0.0.0 for every interface).
    #[arg(long, value_name = "HOST", default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (0: any free port; the one taken is printed).
    #[arg(long, value_name = "PORT", default_value_t = 8000)]
    port: u16,
    /// Most sequences generated at once.
    #[arg(long, value_name = "N", default_value_t = 16,
          value_parser = clap::value_parser!(u16).range(1..=4096))]
    max_running: u16,
    /// Most prompt tokens prefilled in one round (one batched forward pass, beside the running
    /// sequences' decode steps); later new requests wait a round. A longer prompt still runs.
    #[arg(long, value_name = "N", default_value_t = 2048,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_batch_tokens: u32,
    /// A new request joins the batched forward pass once this many sequences run (itself
    /// included); below that it runs its own pass. Default 1: every sequence is batched (a
    /// round with one sequence runs the one-sequence plan). Same bits either way.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    batch_from: Option<u16>,
    /// Pipeline stages: the decoder's layers cut into N stages balanced by parameter bytes, run
    /// in this process; with --device cuda:K stage r runs on GPU K+r (on the CPU, every stage
    /// runs on the CPU). The same bits for every N.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=64))]
    n_partitions: u16,
    /// Most requests waiting for a place in the batch; more are answered 429.
    #[arg(long, value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_queue: u32,
    /// Largest request body in bytes; a larger one is answered 413.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    max_body_bytes: usize,
    /// Receipts kept for GET /v1/receipts/{id} (the newest).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    receipts_kept: usize,
    /// Seconds a shutdown waits for in-flight requests before cutting them off.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    shutdown_grace: u64,
    /// Kernel promise: reproducible (the default), deterministic or default; reproducible-int8 is
    /// reproducible with exact-integer products of Q4_0, Q4_1 and Q8_0 weights (8-bit
    /// activations: faster on the CPU, other bits than reproducible's, the same on CPU and GPU)
    #[arg(long, value_name = "SET", default_value = "reproducible")]
    operation_set: OperationSet,
    #[command(flatten)]
    device: DeviceOption,
}

pub fn main(args: Args) -> Result<ExitCode> {
    let options = ServeOptions {
        engine: EngineOptions {
            model: args.model,
            operation_set: args.operation_set,
            device: args.device.device,
            max_running: usize::from(args.max_running),
            max_batch_tokens: args.max_batch_tokens as usize,
            batch_from: args.batch_from.map(usize::from),
            partitions: usize::from(args.n_partitions),
        },
        host: args.host,
        port: args.port,
        model_name: args.model_name,
        max_queue: args.max_queue as usize,
        max_body_bytes: args.max_body_bytes,
        receipts_kept: args.receipts_kept,
        shutdown_grace: Duration::from_secs(args.shutdown_grace),
    };
    let server = Server::start(options)?;
    eprintln!(
        "serving {} ({}{}, context {} tokens) on http://{}",
        server.model_id(),
        server.info().device,
        match server.info().partitions {
            1 => String::new(),
            n => format!(", {n} pipeline stages"),
        },
        server.info().context_length,
        server.addr()
    );
    server.run_until_signal()?;
    Ok(ExitCode::SUCCESS)
}
