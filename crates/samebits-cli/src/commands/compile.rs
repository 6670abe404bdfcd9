//! `samebits compile`: import and optimise a model and write its artifacts (IR dumps after each
//! pass as JSON and DOT, and the execution plan) without running it.

use super::ModelOptions;
use anyhow::Result;
use samebits_runtime::compile;
use std::path::PathBuf;
use std::process::ExitCode;

/// Compile a model and write inspectable artifacts: NN-<pass>.json and .dot after each compiler
/// pass, plan.json, and the model's external tensor files (symlinked, or copied with
/// --colocate-tensors).
#[derive(clap::Args)]
pub struct Args {
    /// The ONNX model.
    model: PathBuf,
    #[command(flatten)]
    options: ModelOptions,
}

pub fn main(args: Args) -> Result<ExitCode> {
    let mut options = args.options.compile_options();
    let dir = options
        .artifacts_dir
        .get_or_insert_with(|| PathBuf::from(format!("{}.samebits", args.model.display())))
        .clone();
    let compiled = compile(args.model.as_path(), &options)?;
    for p in &compiled.passes {
        println!("{:<20} {:>6} nodes  {}", p.pass, p.nodes_after, p.note);
    }
    println!(
        "inputs: {}\noutputs: {}\nartifacts: {}",
        compiled.input_names().join(", "),
        compiled.output_names().join(", "),
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
