//! `samebits tui`: the terminal UI (crate `samebits-tui`) over text generation and verification.

use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

/// Generate and verify in a terminal UI.
///
/// Fields for the model (a path, or `o` for a file picker), the prompt, the chat template, the
/// operation set, device, partitions, max tokens, temperature, top-p and seed; `r` runs and
/// streams the tokens with prefill and decode speeds, writes a generation receipt and shows its
/// path, sha256 and logits digest; `v` re-runs the receipt and shows match or mismatch; `[` and
/// `]` walk this session's runs; `q`, Esc or Ctrl-C quit. The help line shows the keys that work.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  samebits tui
  samebits tui --model SmolLM2-135M-Instruct.Q4_1.gguf --receipts-dir receipts/")]
pub struct Args {
    /// The GGUF model to start with [default: the SmolLM2 GGUF in $SAMEBITS_CACHE or
    /// ~/.cache/samebits, where scripts/setup.sh puts it].
    #[arg(long, value_name = "PATH")]
    model: Option<PathBuf>,
    /// Where generation receipts are written [default: <cache>/receipts].
    #[arg(long, value_name = "DIR")]
    receipts_dir: Option<PathBuf>,
}

pub fn main(args: Args) -> Result<ExitCode> {
    samebits_tui::run(samebits_tui::Config::new(args.model, args.receipts_dir))?;
    Ok(ExitCode::SUCCESS)
}
