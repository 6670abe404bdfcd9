//! `samebits tui`: the terminal UI (crate `samebits-tui`) over text generation and verification,
//! in this process or on a running `samebits serve` (`--server`).

use anyhow::{Result, anyhow};
use std::path::PathBuf;
use std::process::ExitCode;

/// Generate and verify in a terminal UI.
///
/// Fields for the server, the model (a path, or `o` for a file picker), the prompt, the chat
/// template, the operation set, device, partitions, max tokens, temperature, top-p and seed; `r`
/// runs and streams the tokens with prefill and decode speeds, writes a generation receipt and
/// shows its path, sha256 and logits digest; `v` re-runs the receipt on this machine and shows
/// match or mismatch; `[` and `]` walk this session's runs; `q`, Esc or Ctrl-C quit. The help
/// line shows the keys that work.
///
/// With a server (`--server`, or the Server field; empty runs in this process), runs go to that
/// `samebits serve` as streamed OpenAI requests (Chat template on: /v1/chat/completions, off:
/// /v1/completions; max tokens, temperature, top-p and seed as the OpenAI fields): the model is
/// the one the server serves (its /v1/models), and its operation set, device and partitions
/// apply, so the UI greys those fields out. The response's receipt is written to the receipts
/// folder and `v` verifies it here; when the server's model path is not on this machine, the
/// Model field's file is recorded as the local copy to verify with (its sha256 must match).
#[derive(clap::Args)]
#[command(after_help = "Examples:
  samebits tui
  samebits tui --model SmolLM2-135M-Instruct.Q4_1.gguf --receipts-dir receipts/
  samebits serve --model SmolLM2-135M-Instruct.Q4_1.gguf --port 8080 &
  samebits tui --server http://127.0.0.1:8080 --model SmolLM2-135M-Instruct.Q4_1.gguf")]
pub struct Args {
    /// The GGUF model to start with [default: the SmolLM2 GGUF in $SAMEBITS_CACHE or
    /// ~/.cache/samebits, where scripts/setup.sh puts it]. With --server: the local copy Verify
    /// re-runs with when the server's model path is not on this machine.
    #[arg(long, value_name = "PATH")]
    model: Option<PathBuf>,
    /// Where generation receipts are written [default: <cache>/receipts].
    #[arg(long, value_name = "DIR")]
    receipts_dir: Option<PathBuf>,
    /// Run on this `samebits serve` instead of in this process: http://HOST:PORT (plain http
    /// only; a trailing /v1 is fine). The Server field starts with it; clear it to run here.
    #[arg(long, value_name = "URL")]
    server: Option<String>,
}

pub fn main(args: Args) -> Result<ExitCode> {
    let server = args
        .server
        .as_deref()
        .map(samebits_tui::http::ServerUrl::parse)
        .transpose()
        .map_err(|e| anyhow!("--server {e}"))?;
    samebits_tui::run(samebits_tui::Config::new(
        args.model,
        args.receipts_dir,
        server,
    ))?;
    Ok(ExitCode::SUCCESS)
}
