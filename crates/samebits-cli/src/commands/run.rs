//! `samebits run`: run a model on input files, write each output as `<name>.npy`, and
//! optionally a receipt. Nothing is written unless the whole run succeeds.

use super::{ModelOptions, PartitionOptions, name_value};
use anyhow::{Context, Result};
use samebits_ir::Value;
use samebits_pipeline::{Loaded, ModelSpec, Pipeline, drivers};
use samebits_runtime::{compile, receipt::Receipt, tensor_file};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

/// Run a model on input tensors and write its outputs.
///
/// Each input is NAME=PATH with PATH a .npy file or an ONNX TensorProto .pb file. Every graph
/// output is written to DIR/<output name>.npy. With --receipt, a JSON receipt records the hashes
/// of the model, inputs and outputs; `samebits verify` re-runs it anywhere.
#[derive(clap::Args)]
pub struct Args {
    /// The ONNX model (external tensor files resolve against its folder).
    model: PathBuf,
    /// An input as NAME=PATH (.npy or .pb); repeat for each model input.
    #[arg(long = "input", short = 'i', value_name = "NAME=PATH", value_parser = name_value)]
    inputs: Vec<(String, String)>,
    /// Folder for the outputs (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Write a receipt of this run to FILE.
    #[arg(long, value_name = "FILE")]
    receipt: Option<PathBuf>,
    #[command(flatten)]
    options: ModelOptions,
    #[command(flatten)]
    partitions: PartitionOptions,
}

pub fn main(args: Args) -> Result<ExitCode> {
    let pipelined = args
        .partitions
        .pipeline(args.options.device.device, args.options.operation_set);
    let (compiled, mut pipeline) = match &pipelined {
        None => (
            compile(args.model.as_path(), &args.options.compile_options())?,
            None,
        ),
        Some(options) => match Pipeline::start(&ModelSpec::Onnx(args.model.clone()), options)? {
            (pipeline, Loaded::Onnx(model)) => (*model, Some(pipeline)),
            (_, Loaded::Llm(_)) => unreachable!("an ONNX spec loads an ONNX model"),
        },
    };
    let mut inputs = BTreeMap::new();
    let mut files = BTreeMap::new();
    for (name, path) in &args.inputs {
        let path = PathBuf::from(path);
        let t = tensor_file::read_tensor(&path).with_context(|| format!("input \"{name}\""))?;
        if inputs.insert(name.clone(), Value::Tensor(t)).is_some() {
            anyhow::bail!("input \"{name}\" is given twice");
        }
        files.insert(name.clone(), path);
    }
    let outputs = match pipeline.as_mut() {
        None => compiled.run(&inputs)?,
        Some(pipeline) => drivers::run_named(pipeline, &compiled, &inputs)?,
    };
    // Serialise everything first so a failure leaves the output folder untouched.
    let mut encoded = Vec::new();
    for (name, value) in &outputs {
        let t = value
            .as_tensor()
            .with_context(|| format!("output \"{name}\" is a {}, not a tensor", value.kind()))?;
        let bytes =
            tensor_file::npy_bytes(t).map_err(|m| anyhow::anyhow!("output \"{name}\": {m}"))?;
        encoded.push((safe_file_name(name), bytes));
    }
    let receipt = match &args.receipt {
        Some(path) => {
            let mut receipt = Receipt::new(&compiled, &inputs, &files, &outputs, path)?;
            if let Some(pipeline) = &pipeline {
                receipt.device = pipeline.description().to_string();
                receipt.n_partitions = pipeline.n_partitions();
            }
            Some(receipt)
        }
        None => None,
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    for (file, bytes) in encoded {
        let path = args.out.join(format!("{file}.npy"));
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if let (Some(receipt), Some(path)) = (receipt, &args.receipt) {
        receipt.write(path)?;
        eprintln!("wrote receipt {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// An output name as a file name: path separators and other awkward characters become `_`.
fn safe_file_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}
