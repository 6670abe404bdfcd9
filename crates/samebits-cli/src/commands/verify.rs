//! `samebits verify`: re-run a receipt on this machine and compare its hashes. Run receipts
//! (`samebits run`) compare every output; generation receipts (`samebits generate`) recompute
//! every step's logits in one prefill pass and check their hashes and the sampled tokens;
//! embedding receipts (`samebits embed`) re-embed the texts and compare token ids and hashes.
//! Exit 0: all match; 1: something differs; 2: the receipt or its files are unusable.

use super::DeviceOption;
use anyhow::Result;
use samebits_llm::embed as embedding_receipt;
use samebits_llm::receipt as generation_receipt;
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
    /// The receipt written by `samebits run`, `generate` or `embed` with `--receipt`.
    receipt: PathBuf,
    /// Re-run on this device; the bits are compared whatever device made the receipt.
    #[command(flatten)]
    device: DeviceOption,
}

pub fn main(args: Args) -> Result<ExitCode> {
    let text = match std::fs::read_to_string(&args.receipt) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", args.receipt.display());
            return Ok(ExitCode::from(2));
        }
    };
    if generation_receipt::is_generation_receipt(&text) {
        verify_generation(&args.receipt, args.device.device)
    } else if embedding_receipt::is_embedding_receipt(&text) {
        verify_embedding(&args.receipt)
    } else {
        verify_run(&args.receipt, args.device.device)
    }
}

fn verify_run(path: &Path, device: Device) -> Result<ExitCode> {
    let v = match receipt::verify_on(path, device) {
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
        println!("verified: all {} outputs are bit-identical", v.checks.len());
        Ok(ExitCode::SUCCESS)
    } else {
        println!("NOT verified: outputs differ from the receipt");
        Ok(ExitCode::from(1))
    }
}

fn verify_generation(path: &Path, device: Device) -> Result<ExitCode> {
    let check = match generation_receipt::verify_on(path, device) {
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
