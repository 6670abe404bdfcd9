//! `samebits conformance`: run ONNX backend test cases and print a per-op table; the last line
//! is exactly `N passed, M failed, K skipped`.

use super::DeviceOption;
use anyhow::{Context, Result};
use rayon::prelude::*;
use samebits_ops::OperationSet;
use samebits_runtime::conformance::{CaseResult, DeviceOutcome, case_dirs, run_case_on};
use samebits_runtime::device::{Device, RunStats};
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
    /// With cuda[:N], also run every passing case on that GPU and compare its outputs bit for
    /// bit with the CPU's; prints how many steps ran on GPU kernels and how many fell back.
    #[command(flatten)]
    device: DeviceOption,
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
    let run = |c: &PathBuf| {
        let r = run_case_on(c, args.operation_set, args.device.device);
        bar.inc(1);
        r
    };
    // A GPU run holds the device's stream while its CPU steps run on the rayon pool; cases in
    // that same pool could start on a thread that waits inside such a step and block on the
    // stream forever, so GPU cases run one after another.
    let results: Vec<CaseResult> = match args.device.device {
        Device::Cpu => cases.par_iter().map(run).collect(),
        _ => cases.iter().map(run).collect(),
    };
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
    print_device_report(results, list_failures);
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

/// The GPU comparison of the passing cases, when they ran on a GPU: per op, cases whose GPU
/// outputs have the CPU's bits, cases that differ, GPU failures, and the steps that ran on GPU kernels against those that fell back to the CPU.
fn print_device_report(results: &[CaseResult], list_failures: bool) {
    #[derive(Default)]
    struct Row {
        identical: usize,
        differ: usize,
        failed: usize,
        stats: RunStats,
    }
    let mut per_op: BTreeMap<&str, Row> = BTreeMap::new();
    let mut total = Row::default();
    for r in results {
        let Some(outcome) = &r.device else { continue };
        let op = r.ops.first().map(String::as_str).unwrap_or("(no op)");
        for row in [per_op.entry(op).or_default(), &mut total] {
            match outcome {
                DeviceOutcome::Identical(stats) => {
                    row.identical += 1;
                    row.stats.add(stats);
                }
                DeviceOutcome::Differs { stats, .. } => {
                    row.differ += 1;
                    row.stats.add(stats);
                }
                DeviceOutcome::Failed(_) => row.failed += 1,
            }
        }
    }
    if per_op.is_empty() {
        return;
    }
    println!(
        "\nGPU vs CPU, bit for bit (passing cases):\n{:<32} {:>9} {:>7} {:>7} {:>10} {:>9}",
        "op", "identical", "differ", "failed", "GPU steps", "CPU steps"
    );
    let line = |op: &str, row: &Row| {
        println!(
            "{op:<32} {:>9} {:>7} {:>7} {:>10} {:>9}",
            row.identical,
            row.differ,
            row.failed,
            row.stats.device_steps,
            row.stats.host_step_count()
        )
    };
    for (op, row) in &per_op {
        line(op, row);
    }
    line("TOTAL", &total);
    let fallbacks: Vec<String> = total
        .stats
        .host_steps
        .iter()
        .map(|(op, n)| format!("{op} {n}"))
        .collect();
    println!(
        "steps that fell back to the CPU, by op: {}",
        fallbacks.join(", ")
    );
    if list_failures {
        for r in results {
            match &r.device {
                Some(DeviceOutcome::Differs { message, .. }) => {
                    println!("GPU DIFFERS {}: {message}", r.name)
                }
                Some(DeviceOutcome::Failed(message)) => {
                    println!("GPU FAILED {}: {message}", r.name)
                }
                _ => {}
            }
        }
    }
}
