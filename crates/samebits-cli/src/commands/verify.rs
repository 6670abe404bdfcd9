//! `samebits verify`: re-run a receipt on this machine and compare every output hash.
//! Exit 0: all outputs match; 1: some output differs; 2: the receipt or its files are unusable.

use anyhow::Result;
use samebits_runtime::receipt;
use std::path::PathBuf;
use std::process::ExitCode;

/// Re-run a receipt here and check the outputs bit for bit.
///
/// Exit status: 0 when every output hash matches, 1 when any differs (each output is reported),
/// 2 when the receipt, the model or an input file is missing, corrupt or has another hash.
#[derive(clap::Args)]
pub struct Args {
    /// The receipt written by `samebits run --receipt`.
    receipt: PathBuf,
}

pub fn main(args: Args) -> Result<ExitCode> {
    let v = match receipt::verify(&args.receipt) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: cannot verify {}: {e}", args.receipt.display());
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
