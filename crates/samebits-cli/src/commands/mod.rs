//! The subcommands, one file each, and the option types they share.

pub mod bench;
pub mod compile;
pub mod conformance;
pub mod embed;
pub mod generate;
pub mod run;
pub mod tui;
pub mod verify;

use anyhow::{Context, Result, bail};
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
            requires_reproducibility: self.operation_set == OperationSet::Reproducible,
            operation_set: Some(self.operation_set),
            device: self.device.device,
        }
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
