//! `samebits`: the command line. Each subcommand lives in its own file under `commands/`.

mod commands;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Run ML models so that the same model and input give the same bits on any supported CPU or
/// GPU. Outputs are bit-identical across machines, thread counts and batch sizes in the
/// `reproducible` operation set (the default); a receipt records the hashes of a run so that
/// anyone can re-run it with `samebits verify` and check every bit.
#[derive(Parser)]
#[command(name = "samebits", version, about, long_about = None, after_help = EXAMPLES)]
struct Cli {
    /// Worker threads, 1 to 1024 (default: all cores). Results do not depend on it.
    #[arg(long, global = true, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=MAX_THREADS))]
    threads: Option<u16>,
    /// Read model files that a symbolic link places outside the model's folder (external
    /// tensor data, checkpoint shards). Refused by default, as an untrusted model could point
    /// at any file on this machine; also SAMEBITS_ALLOW_OUTSIDE_LINKS=1.
    #[arg(long, global = true)]
    allow_outside_links: bool,
    #[command(subcommand)]
    command: Command,
}

const EXAMPLES: &str = "\
Examples:
  samebits run model.onnx --input x=x.npy --out out/ --receipt run.json
  samebits verify run.json
  samebits generate --model SmolLM2-135M-Instruct.Q4_1.gguf --prompt \"The capital of France is\" --receipt gen.json
  samebits generate --model SmolLM2-135M-Instruct/ --prompt \"The capital of France is\"
  samebits embed --model all-MiniLM-L6-v2/ --text \"The cat sits on the mat.\" --out e.npy
  samebits compile model.onnx --artifacts-dir build/ 
  samebits bench model.onnx --input-shape x=1,3,640,640 --runs 20
  samebits bench --model SmolLM2-135M-Instruct.Q4_1.gguf --prompt-tokens 128,512 --gen-tokens 128
  samebits serve --model SmolLM2-135M-Instruct.Q4_1.gguf --port 8000
  samebits tui";

/// The most worker threads `--threads` accepts: far above any CPU's cores, low enough that a
/// mistyped count cannot exhaust the process's threads or memory.
const MAX_THREADS: i64 = 1024;

#[derive(Subcommand)]
enum Command {
    Run(commands::run::Args),
    Compile(commands::compile::Args),
    Verify(commands::verify::Args),
    Generate(commands::generate::Args),
    Embed(commands::embed::Args),
    Bench(commands::bench::Args),
    Conformance(commands::conformance::Args),
    Serve(commands::serve::Args),
    Tui(commands::tui::Args),
    #[command(hide = true)]
    PipelineWorker(commands::pipeline_worker::Args),
}

fn main() -> ExitCode {
    samebits_runtime::memory::retain_freed_memory();
    let cli = Cli::parse();
    if cli.allow_outside_links {
        samebits_ir::paths::allow_outside_links();
    }
    // A SAMEBITS_ISA this CPU cannot run is a usage error, reported before any kernel runs (a
    // kernel would otherwise stop the process: a run never silently gets another ISA).
    if let Err(e) = samebits_kernels::Isa::from_env() {
        eprintln!("error: SAMEBITS_ISA: {e}");
        return ExitCode::from(2);
    }
    if let Some(n) = cli.threads.map(usize::from)
        && let Err(e) = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
    {
        eprintln!("error: cannot start {n} threads: {e}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Run(args) => commands::run::main(args),
        Command::Compile(args) => commands::compile::main(args),
        Command::Verify(args) => commands::verify::main(args),
        Command::Generate(args) => commands::generate::main(args),
        Command::Embed(args) => commands::embed::main(args),
        Command::Bench(args) => commands::bench::main(args),
        Command::Conformance(args) => commands::conformance::main(args),
        Command::Serve(args) => commands::serve::main(args),
        Command::Tui(args) => commands::tui::main(args),
        Command::PipelineWorker(args) => commands::pipeline_worker::main(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", error_chain(&e));
            ExitCode::from(1)
        }
    }
}

/// The error and its causes joined by `: `, leaving out a cause whose message the text already
/// holds: most library errors repeat their source in their own message, and `{:#}` would print
/// it twice.
fn error_chain(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let message = cause.to_string();
        if text.contains(&message) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&message);
    }
    text
}
