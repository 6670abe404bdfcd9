//! `samebits verify`: re-run a receipt on this machine and compare its hashes. Run receipts
//! (`samebits run`) compare every output; generation receipts (`samebits generate`) recompute
//! every step's logits in one prefill pass and check their hashes and the sampled tokens;
//! embedding receipts (`samebits embed`) re-embed the texts and compare token ids and hashes.
//! Exit 0: all match; 1: something differs; 2: the receipt or its files are unusable.

use super::{DeviceOption, PartitionOptions};
use anyhow::Result;
use samebits_llm::embed as embedding_receipt;
use samebits_llm::receipt as generation_receipt;
use samebits_pipeline::{Loaded, ModelSpec, Pipeline, PipelineOptions, drivers};
use samebits_runtime::Device;
use samebits_runtime::receipt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Re-run a receipt here and check it bit for bit.
///
/// A run receipt: every output hash is compared. A generation receipt: the prompt and all
/// generated tokens are run through the model in ONE prefill pass; each step's logits hash must
/// equal the receipt's, in order, and each recorded token must be the one the sampling rule picks
/// from those logits (the first step that differs is named). An embedding receipt: the texts are
/// tokenized and embedded again; token ids and the embeddings' hash must match.
///
/// Exit status: 0 when everything matches, 1 when anything differs, 2 when the receipt, the model
/// or an input file is missing, corrupt or has another hash.
#[derive(clap::Args)]
pub struct Args {
    /// The receipt written by `samebits run`, `generate` or `embed` with `--receipt`, or a
    /// `samebits serve` response (or its `samebits_receipt` object) saved to a file.
    receipt: PathBuf,
    /// A generation receipt's model file or folder here, when it is not at the path the receipt
    /// records (a receipt from another machine or a server); its sha256 must still match.
    #[arg(long, value_name = "PATH")]
    model: Option<PathBuf>,
    /// Re-run on this device; the bits are compared whatever device made the receipt.
    #[command(flatten)]
    device: DeviceOption,
    /// Re-run through N pipeline stages; the bits are compared whatever N made the receipt
    /// (run and generation receipts).
    #[command(flatten)]
    partitions: PartitionOptions,
    /// (Run receipts) Run the model N times in this process and compare every run with the
    /// receipt: runs after the first go through the plan specialised to the input shapes
    /// (shape arithmetic folded), so this checks that plan too.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    runs: u16,
}

pub fn main(args: Args) -> Result<ExitCode> {
    let text = match std::fs::read_to_string(&args.receipt) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", args.receipt.display());
            return Ok(ExitCode::from(2));
        }
    };
    // The operation set is the receipt's; the pipeline options take it from there.
    let pipeline = args
        .partitions
        .pipeline(args.device.device, Default::default());
    let run_receipt = !generation_receipt::is_generation_receipt(&text)
        && !embedding_receipt::is_embedding_receipt(&text);
    if args.runs > 1 && (!run_receipt || pipeline.is_some()) {
        eprintln!(
            "error: --runs applies to run receipts (`samebits run`) re-run whole on one device, \
             without --n-partitions"
        );
        return Ok(ExitCode::from(2));
    }
    if generation_receipt::is_generation_receipt(&text) {
        verify_generation(
            &args.receipt,
            args.model.as_deref(),
            args.device.device,
            pipeline,
        )
    } else if args.model.is_some() {
        eprintln!(
            "error: --model applies to generation receipts; {} is not one",
            args.receipt.display()
        );
        Ok(ExitCode::from(2))
    } else if embedding_receipt::is_embedding_receipt(&text) {
        verify_embedding(&args.receipt)
    } else {
        verify_run(
            &args.receipt,
            args.device.device,
            pipeline,
            args.runs.into(),
        )
    }
}

fn verify_run(
    path: &Path,
    device: Device,
    pipeline: Option<PipelineOptions>,
    runs: usize,
) -> Result<ExitCode> {
    let verified = match pipeline {
        None => receipt::verify_runs_on(path, device, runs),
        Some(mut options) => receipt::verify_with(path, &mut |model, operation_set, inputs| {
            options.operation_set = operation_set;
            let spec = ModelSpec::Onnx(model.to_path_buf());
            let run = || -> samebits_pipeline::Result<_> {
                let (mut pipeline, loaded) = Pipeline::start(&spec, &options)?;
                let Loaded::Onnx(compiled) = loaded else {
                    unreachable!("an ONNX spec loads an ONNX model")
                };
                eprintln!("re-running through {}", pipeline.description());
                drivers::run_named(&mut pipeline, &compiled, inputs)
            };
            let outputs =
                run().map_err(|e| samebits_runtime::RuntimeError::Usage(e.to_string()))?;
            Ok(outputs.into_iter().collect())
        }),
    };
    let v = match verified {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: cannot verify {}: {e}", path.display());
            return Ok(ExitCode::from(2));
        }
    };
    for c in &v.checks {
        match &c.actual {
            Some(a) if c.matches() => println!("match     {}  {a}", c.name),
            Some(a) => println!("MISMATCH  {}  expected {}  got {a}", c.name, c.expected),
            None => println!("MISSING   {}  expected {}", c.name, c.expected),
        }
    }
    if v.all_match() {
        let runs = match runs {
            1 => String::new(),
            n => format!(" in each of {n} runs"),
        };
        println!(
            "verified: all {} outputs are bit-identical{runs}",
            v.checks.len()
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!("NOT verified: outputs differ from the receipt");
        Ok(ExitCode::from(1))
    }
}

/// A generation receipt re-checked through N pipeline stages: one prefill through them.
fn verify_generation_staged(
    path: &Path,
    model: Option<&Path>,
    mut options: PipelineOptions,
) -> samebits_pipeline::Result<generation_receipt::GenerationCheck> {
    let (receipt, model) = generation_receipt::read_checked(path, model)?;
    options.operation_set = receipt.options.operation_set;
    let (mut pipeline, loaded) = Pipeline::start(&ModelSpec::Llm(model), &options)?;
    let Loaded::Llm(llm) = loaded else {
        unreachable!("a decoder spec loads a decoder")
    };
    eprintln!(
        "re-running through {} (the receipt was made with {} partitions)",
        pipeline.description(),
        receipt.n_partitions
    );
    let check = generation_receipt::check(&receipt, &llm, &mut |sequence| {
        drivers::prefill(&mut pipeline, sequence)
            .map_err(|e| samebits_llm::LlmError::Usage(e.to_string()))
    })?;
    Ok(check)
}

fn verify_generation(
    path: &Path,
    model: Option<&Path>,
    device: Device,
    pipeline: Option<PipelineOptions>,
) -> Result<ExitCode> {
    let checked = match pipeline {
        None => {
            generation_receipt::verify_model_on(path, model, device).map_err(anyhow::Error::from)
        }
        Some(options) => {
            verify_generation_staged(path, model, options).map_err(anyhow::Error::from)
        }
    };
    let check = match checked {
        Ok(check) => check,
        Err(e) => {
            eprintln!("error: cannot verify {}: {e}", path.display());
            return Ok(ExitCode::from(2));
        }
    };
    match check.first_mismatch {
        None => {
            println!(
                "verified: all {} generated tokens and their logits are bit-identical",
                check.steps_matched
            );
            Ok(ExitCode::SUCCESS)
        }
        Some(m) => {
            match m.step {
                Some(step) => println!("MISMATCH  step {step}: {}", m.message),
                None => println!("MISMATCH  {}", m.message),
            }
            println!(
                "NOT verified: {} steps matched before the first difference",
                check.steps_matched
            );
            Ok(ExitCode::from(1))
        }
    }
}

fn verify_embedding(path: &Path) -> Result<ExitCode> {
    let check = match embedding_receipt::verify(path) {
        Ok(check) => check,
        Err(e) => {
            eprintln!("error: cannot verify {}: {e}", path.display());
            return Ok(ExitCode::from(2));
        }
    };
    for i in &check.token_mismatches {
        println!("MISMATCH  text {i}: token ids differ from the receipt");
    }
    if check.sha256 == check.expected_sha256 {
        println!("match     embeddings  {}", check.sha256);
    } else {
        println!(
            "MISMATCH  embeddings  expected {}  got {}",
            check.expected_sha256, check.sha256
        );
    }
    if check.matches() {
        println!("verified: the embeddings are bit-identical");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("NOT verified: the embeddings differ from the receipt");
        Ok(ExitCode::from(1))
    }
}
