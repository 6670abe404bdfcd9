//! `samebits bench MODEL.onnx`: latency of an ONNX model over repeated runs after warm-up
//! (median, p95, min), optionally the time per op type.

use super::{Args, quantile};
use anyhow::{Context, Result, bail};
use samebits_ir::{DType, Tensor, Value};
use samebits_pipeline::{Loaded, ModelSpec, Pipeline, drivers};
use samebits_runtime::device::RunStats;
use samebits_runtime::{CompiledModel, compile, tensor_file};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Deterministic values in [-1, 1): a 64-bit linear congruential sequence (Knuth's MMIX
/// constants), top 24 bits scaled.
fn generated(shape: Vec<usize>, dtype: DType) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let mut state = 0x5eed_u64;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 40) as f32) / (1u64 << 23) as f32 - 1.0
    };
    Ok(match dtype {
        DType::F32 => Tensor::from_vec(shape, (0..n).map(|_| next()).collect::<Vec<f32>>())?,
        DType::I64 => Tensor::from_vec(shape, vec![1i64; n])?,
        other => bail!("cannot generate {other} inputs; pass a file with --input"),
    })
}

pub fn main(args: &Args) -> Result<ExitCode> {
    let model = args.model.as_deref().context("no model given")?;
    let (runs, warmup) = (args.runs.unwrap_or(20), args.warmup.unwrap_or(3));
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let pipelined = args
        .partitions
        .pipeline(args.options.device.device, args.options.operation_set);
    let (compiled, mut pipeline) = match &pipelined {
        None => (compile(model, &args.options.compile_options())?, None),
        Some(options) => match Pipeline::start(&ModelSpec::Onnx(model.to_path_buf()), options)? {
            (pipeline, Loaded::Onnx(compiled)) => (*compiled, Some(pipeline)),
            (_, Loaded::Llm(_)) => unreachable!("an ONNX spec loads an ONNX model"),
        },
    };
    let mut inputs = BTreeMap::new();
    for (name, path) in &args.inputs {
        let t = tensor_file::read_tensor(&PathBuf::from(path))
            .with_context(|| format!("input \"{name}\""))?;
        inputs.insert(name.clone(), Value::Tensor(t));
    }
    for (name, dims) in &args.input_shapes {
        let shape = dims
            .split(',')
            .map(|d| d.trim().parse::<usize>())
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("--input-shape {name}={dims}: dims must be integers"))?;
        let dtype = compiled
            .model
            .graph
            .value_type(name)
            .and_then(|t| t.dtype())
            .unwrap_or(DType::F32);
        inputs.insert(name.clone(), Value::Tensor(generated(shape, dtype)?));
    }
    let run_once = |pipeline: &mut Option<Pipeline>| -> Result<()> {
        match pipeline {
            None => drop(compiled.run(&inputs)?),
            Some(pipeline) => drop(drivers::run_named(pipeline, &compiled, &inputs)?),
        }
        Ok(())
    };
    for _ in 0..warmup {
        run_once(&mut pipeline)?;
    }
    let bar = indicatif::ProgressBar::new(runs as u64);
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t0 = Instant::now();
        run_once(&mut pipeline)?;
        times.push(t0.elapsed().as_secs_f64() * 1e3);
        bar.inc(1);
    }
    bar.finish_and_clear();
    if let Some(path) = &args.times_json {
        let json = serde_json::json!({ "times_ms": times });
        std::fs::write(path, json.to_string())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    times.sort_by(f64::total_cmp);
    let device = match &pipeline {
        Some(p) => p.description().to_string(),
        None => compiled.device_description(),
    };
    println!(
        "{}  operation set {}  device {}  threads {}  runs {}",
        model.display(),
        compiled.operation_set,
        device,
        rayon::current_num_threads(),
        times.len()
    );
    println!(
        "median {:.3} ms   p95 {:.3} ms   min {:.3} ms",
        quantile(&times, 0.5),
        quantile(&times, 0.95),
        times[0]
    );
    if let Some(pipeline) = pipeline.as_mut() {
        return pipelined_throughput(pipeline, &compiled, &inputs, runs, args);
    }
    match compiled.step_counts(&inputs)? {
        (steps, Some(special)) => println!(
            "plan steps {steps}; specialised to these input shapes {special} \
             (shape arithmetic folded)"
        ),
        (steps, None) => println!("plan steps {steps}"),
    }
    if let (_, Some(stats)) = compiled.run_counted(&inputs, Default::default())? {
        println!("{}", device_summary(&stats));
    }
    if args.profile {
        print_profile(&compiled, &inputs)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The pipeline's stages, and its throughput with all `runs` requests in flight.
fn pipelined_throughput(
    pipeline: &mut Pipeline,
    compiled: &CompiledModel,
    inputs: &BTreeMap<String, Value>,
    runs: usize,
    args: &Args,
) -> Result<ExitCode> {
    for (k, stage) in pipeline.summary().iter().enumerate() {
        println!("stage {k}: {stage}");
    }
    let request = drivers::ordered_inputs(compiled, inputs)?;
    let micro_batch = args.partitions.micro_batch;
    let t0 = Instant::now();
    drivers::run_requests(pipeline, vec![request; runs], micro_batch)?;
    let seconds = t0.elapsed().as_secs_f64();
    println!(
        "throughput {:.2} runs/s: {runs} requests in flight, micro-batch {micro_batch}, {:.3} s",
        runs as f64 / seconds,
        seconds
    );
    Ok(ExitCode::SUCCESS)
}

/// One line: steps on GPU kernels, steps that fell back (by op type), transfers, and whether
/// the run replayed a recorded CUDA graph.
pub fn device_summary(stats: &RunStats) -> String {
    let fallbacks: Vec<String> = stats
        .host_steps
        .iter()
        .map(|(op, n)| format!("{op} {n}"))
        .collect();
    format!(
        "steps on GPU kernels {}, on the CPU {} ({}), shape-only {}; uploads {} ({} B), \
         downloads {} ({} B){}",
        stats.device_steps,
        stats.host_step_count(),
        if fallbacks.is_empty() {
            "none".to_string()
        } else {
            fallbacks.join(", ")
        },
        stats.shape_only_steps,
        stats.uploads,
        stats.upload_bytes,
        stats.downloads,
        stats.download_bytes,
        if stats.graph_replays > 0 {
            "; replayed as a CUDA graph"
        } else {
            ""
        }
    )
}

/// Steps listed one by one after the per-op-type table.
const SLOWEST_STEPS: usize = 20;

/// Runs once, attributing the time between consecutive steps to the op type of the later one;
/// prints the time per op type, then the slowest steps with their first output's shape.
fn print_profile(
    compiled: &samebits_runtime::CompiledModel,
    inputs: &BTreeMap<String, Value>,
) -> Result<()> {
    let mut per_op: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    let mut steps: Vec<(f64, String, String)> = Vec::new();
    let mut last = Instant::now();
    let mut observer = |step: &samebits_ops::PlanStep<'_>, outputs: &[Value]| {
        let node = step.node;
        let now = Instant::now();
        let ms = (now - last).as_secs_f64() * 1e3;
        let op = node.split_whitespace().next().unwrap_or(node).to_string();
        let entry = per_op.entry(op).or_default();
        entry.0 += ms;
        entry.1 += 1;
        let shape = match outputs.first().map(Value::as_tensor) {
            Some(Ok(t)) => format!("{:?}", t.shape()),
            _ => String::new(),
        };
        steps.push((ms, node.to_string(), shape));
        last = now;
    };
    compiled.run_with(
        inputs,
        samebits_ops::RunOptions {
            observer: Some(&mut observer),
        },
    )?;
    let mut rows: Vec<_> = per_op.into_iter().collect();
    rows.sort_by(|a, b| b.1.0.total_cmp(&a.1.0));
    println!("{:<24} {:>10} {:>6}", "op", "ms", "nodes");
    for (op, (ms, n)) in rows {
        println!("{op:<24} {ms:>10.3} {n:>6}");
    }
    steps.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!("\n{:>10}  slowest steps (output shape)", "ms");
    for (ms, node, shape) in steps.iter().take(SLOWEST_STEPS) {
        println!("{ms:>10.3}  {node} {shape}");
    }
    Ok(())
}
