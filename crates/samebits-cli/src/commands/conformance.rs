//! `samebits conformance`: run ONNX backend test cases and print a per-op table; the last line
//! is exactly `N passed, M failed, K skipped`.

use anyhow::{Context, Result};
use rayon::prelude::*;
use samebits_ops::OperationSet;
use samebits_runtime::conformance::{CaseResult, case_dirs, run_case};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

/// Run ONNX backend test cases (folders of model.onnx + test_data_set_N/) and compare every
/// output with its reference (floats: rtol 1e-3, atol 1e-7; integers, bools, strings: exact).
///
/// Prints one row per op (passed / failed / skipped), optionally each failure with its reason,
/// and ends with the line `N passed, M failed, K skipped`. Failed: the case ran and disagreed or
/// broke; skipped: samebits lacks an op or dtype it needs.
#[derive(clap::Args)]
pub struct Args {
    /// A folder of cases, e.g. onnx/backend/test/data/node from the onnx 1.22.0 wheel.
    dir: PathBuf,
    /// Kernel promise to run under.
    #[arg(long, value_name = "SET", default_value = "reproducible")]
    operation_set: OperationSet,
    /// Only cases whose folder name matches this regular expression.
    #[arg(long, value_name = "REGEX")]
    filter: Option<String>,
    /// Print every failed and skipped case with its reason.
    #[arg(long)]
    list_failures: bool,
    /// Write the names of the passing cases to FILE (an allowlist).
    #[arg(long, value_name = "FILE")]
    write_allowlist: Option<PathBuf>,
}

pub fn main(args: Args) -> Result<ExitCode> {
    let filter = args
        .filter
        .as_deref()
        .map(regex::Regex::new)
        .transpose()
        .context("--filter")?;
    let cases: Vec<PathBuf> = case_dirs(&args.dir)
        .with_context(|| format!("reading {}", args.dir.display()))?
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            filter.as_ref().is_none_or(|f| f.is_match(&name))
        })
        .collect();
    let bar = indicatif::ProgressBar::new(cases.len() as u64);
    let results: Vec<CaseResult> = cases
        .par_iter()
        .map(|c| {
            let r = run_case(c, args.operation_set);
            bar.inc(1);
            r
        })
        .collect();
    bar.finish_and_clear();
    print_report(&results, args.list_failures);
    if let Some(path) = &args.write_allowlist {
        let names: Vec<&str> = results
            .iter()
            .filter(|r| r.outcome.is_ok())
            .map(|r| r.name.as_str())
            .collect();
        std::fs::write(path, names.join("\n") + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_report(results: &[CaseResult], list_failures: bool) {
    #[derive(Default)]
    struct Row {
        passed: usize,
        failed: usize,
        skipped: usize,
    }
    let mut per_op: BTreeMap<&str, Row> = BTreeMap::new();
    let mut categories: BTreeMap<&str, usize> = BTreeMap::new();
    for r in results {
        let op = r.ops.first().map(String::as_str).unwrap_or("(no op)");
        let row = per_op.entry(op).or_default();
        match &r.outcome {
            Ok(()) => row.passed += 1,
            Err(reason) => {
                if reason.is_skip() {
                    row.skipped += 1;
                } else {
                    row.failed += 1;
                }
                *categories.entry(reason.category()).or_default() += 1;
            }
        }
    }
    println!(
        "{:<32} {:>7} {:>7} {:>8}",
        "op", "passed", "failed", "skipped"
    );
    for (op, row) in &per_op {
        println!(
            "{op:<32} {:>7} {:>7} {:>8}",
            row.passed, row.failed, row.skipped
        );
    }
    if !categories.is_empty() {
        println!("\nreasons:");
        for (c, n) in &categories {
            println!("  {c:<20} {n}");
        }
    }
    if list_failures {
        println!();
        for r in results {
            if let Err(reason) = &r.outcome {
                let kind = if reason.is_skip() { "SKIP" } else { "FAIL" };
                println!("{kind} {}: {reason}", r.name);
            }
        }
    }
    let passed = results.iter().filter(|r| r.outcome.is_ok()).count();
    let skipped = results
        .iter()
        .filter(|r| matches!(&r.outcome, Err(e) if e.is_skip()))
        .count();
    println!(
        "{passed} passed, {} failed, {skipped} skipped",
        results.len() - passed - skipped
    );
}
