//! `samebits bench`: speed of a model over repeated timed runs after warm-up. An ONNX model
//! (positional argument) gets latency per run ([`onnx`]); a GGUF language model (`--model`) gets
//! prompt-processing and generation tokens/s in the style of llama.cpp's llama-bench ([`llm`]).
//! Both print a summary and, with `--times-json`, write every timed run for scripts
//! (`scripts/bench.py` builds the cross-engine report from it).

mod limits;
mod llm;
mod onnx;

use super::name_value;
use super::{ModelOptions, PartitionOptions};
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

/// Measure a model's speed after warm-up runs.
///
/// ONNX model (positional): latency per run (median, p95, min). Inputs come from files
/// (--input NAME=PATH) or are generated with a fixed seed from a shape
/// (--input-shape NAME=1,3,640,640), needed where the model declares symbolic dims.
///
/// GGUF language model (--model): tokens/s of prompt processing (one prefill pass of each
/// --prompt-tokens length, "ppN") and of generation (--gen-tokens decode steps of one token each
/// from an empty cache, "tgN"), the tests llama.cpp's llama-bench runs. Token ids are a fixed
/// sequence; no sampling is timed.
///
/// With --n-partitions N the model runs as N pipeline stages (docs/pipeline.md): an ONNX model's
/// latency is one request at a time, followed by the throughput of all --runs requests in
/// flight (--micro-batch per group); a GGUF model's tests run --sequences sequences at once.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  samebits bench det.onnx --input-shape x=1,3,640,640 --runs 20 --profile
  samebits --threads 2 bench --model SmolLM2-135M-Instruct.Q4_1.gguf --prompt-tokens 128,512 --gen-tokens 128 --times-json llm.json")]
pub struct Args {
    /// The ONNX model.
    #[arg(required_unless_present = "gguf", conflicts_with = "gguf")]
    model: Option<PathBuf>,
    /// A GGUF language model (llama, qwen2, qwen3, phi3, gemma2 or gemma3 architecture): measure tokens/s instead of latency.
    #[arg(long = "model", value_name = "GGUF")]
    gguf: Option<PathBuf>,
    /// (ONNX) An input file as NAME=PATH (.npy or .pb).
    #[arg(long = "input", short = 'i', value_name = "NAME=PATH", value_parser = name_value)]
    inputs: Vec<(String, String)>,
    /// (ONNX) A generated input as NAME=D0,D1,... (values in [-1, 1) from a fixed seed).
    #[arg(long = "input-shape", value_name = "NAME=DIMS", value_parser = name_value)]
    input_shapes: Vec<(String, String)>,
    /// (GGUF) Prompt lengths to time, one prefill pass each.
    #[arg(
        long,
        value_name = "N,..",
        value_delimiter = ',',
        default_value = "128,512"
    )]
    prompt_tokens: Vec<usize>,
    /// (GGUF) Tokens to generate one at a time (0: skip the generation test).
    #[arg(long, value_name = "N", default_value_t = 128)]
    gen_tokens: usize,
    /// Timed runs (of each test) [default: 20 for ONNX, 3 for GGUF].
    #[arg(long)]
    runs: Option<usize>,
    /// Untimed runs (of each test) first [default: 3 for ONNX, 1 for GGUF].
    #[arg(long)]
    warmup: Option<usize>,
    /// (ONNX) After timing, run once more and print the time spent per op type.
    #[arg(long)]
    profile: bool,
    /// Also write every timed run to FILE as JSON: `{"times_ms": [...]}` for an ONNX model,
    /// `{"tests": [{"test": "pp128", "tokens": 128, "seconds": [...]}, ...], ...}` for GGUF.
    #[arg(long, value_name = "FILE")]
    times_json: Option<PathBuf>,
    /// (GGUF, with --n-partitions) Sequences in flight through the stages in each test run;
    /// tokens/s counts all of them.
    #[arg(long, value_name = "K", default_value_t = 1)]
    sequences: usize,
    #[command(flatten)]
    options: ModelOptions,
    #[command(flatten)]
    partitions: PartitionOptions,
}

pub fn main(args: Args) -> Result<ExitCode> {
    match &args.gguf {
        Some(gguf) => llm::main(gguf, &args),
        None => onnx::main(&args),
    }
}

/// The value at quantile `q` (0..=1) of sorted, non-empty `values` (nearest rank).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}
