//! `samebits bench --model MODEL.gguf`: prompt-processing and generation tokens/s of a GGUF
//! language model, the tests of llama.cpp's llama-bench: "ppN" times one prefill pass of N tokens
//! into an empty cache returning the last position's logits (as llama-bench, and as generation
//! needs), "tgN" times N decode steps of one token each from an empty cache. On the CPU each
//! test's speed is also set against the machine's limit (`limits.rs`): decode's bytes read per
//! second against the measured memory bandwidth, prefill's FLOP/s against the FMA peak.

use super::limits::{Limits, TokenCost};
use super::{Args, quantile};
use anyhow::{Context, Result, bail};
use samebits_llm::Llm;
use samebits_pipeline::{Loaded, ModelSpec, Pipeline, drivers};
use samebits_runtime::Device;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

/// One timed test: the test, tokens processed per run and each run's wall time.
struct TestTimes {
    test: Test,
    tokens: usize,
    seconds: Vec<f64>,
}

impl TestTimes {
    /// Tokens per second of each run, slowest first.
    fn sorted_rates(&self) -> Vec<f64> {
        let mut rates: Vec<f64> = self
            .seconds
            .iter()
            .map(|s| self.tokens as f64 / s)
            .collect();
        rates.sort_by(f64::total_cmp);
        rates
    }
}

/// What one run of a test does.
#[derive(Clone, Copy)]
enum Test {
    /// One forward pass over `n` prompt tokens.
    Prompt(usize),
    /// `n` forward passes of one token each, every one after the tokens before it.
    Generate(usize),
}

impl Test {
    fn name(self) -> String {
        match self {
            Test::Prompt(n) => format!("pp{n}"),
            Test::Generate(n) => format!("tg{n}"),
        }
    }

    fn tokens(self) -> usize {
        match self {
            Test::Prompt(n) | Test::Generate(n) => n,
        }
    }

    /// Runs the test once from an empty cache and returns its wall time in seconds: on the
    /// whole model, or as `sequences` sequences at once through a pipeline's stages.
    fn run(
        self,
        llm: &Llm,
        staged: Option<(&mut Pipeline, usize, usize)>,
        tokens: &[u32],
    ) -> Result<f64> {
        if let Some((pipeline, sequences, micro_batch)) = staged {
            let batch = vec![tokens[..self.tokens()].to_vec(); sequences];
            let start = Instant::now();
            match self {
                Test::Prompt(_) => drop(drivers::prefill_many(pipeline, &batch, micro_batch)?),
                Test::Generate(_) => drop(drivers::decode_fixed(pipeline, &batch, micro_batch)?),
            }
            return Ok(start.elapsed().as_secs_f64());
        }
        let mut cache = llm.new_cache();
        let start = Instant::now();
        match self {
            Test::Prompt(n) => {
                llm.forward_last(&tokens[..n], &mut cache)?;
            }
            Test::Generate(n) => {
                for token in &tokens[..n] {
                    llm.forward(std::slice::from_ref(token), &mut cache)?;
                }
            }
        }
        Ok(start.elapsed().as_secs_f64())
    }
}

/// The limits and, per test, how close its median speed comes: a decode test's weight and KV
/// bytes per second against the memory read bandwidth (KV at the test's mean cached length), a
/// prefill test's product and attention FLOP/s against the FMA peak.
fn print_limits(results: &[TestTimes], limits: &Limits, cost: &TokenCost) {
    println!(
        "limits: memory read {:.1} GB/s, FMA peak {:.1} GFLOP/s ({}), {} threads",
        limits.read_bytes_per_s / 1e9,
        limits.flop_per_s / 1e9,
        limits.fma_path,
        rayon::current_num_threads()
    );
    for r in results {
        let rate = quantile(&r.sorted_rates(), 0.5);
        let mean_cached = (r.test.tokens().saturating_sub(1)) as f64 / 2.0;
        match r.test {
            Test::Generate(_) => {
                let kv = cost.kv_bytes_per_position * mean_cached;
                let bytes = cost.weight_bytes + kv;
                println!(
                    "{:<8} {:.1} MB read per token ({:.1} MB weights + {:.2} MB KV) = {:.2} GB/s, \
                     {:.0}% of memory read bandwidth",
                    r.test.name(),
                    bytes / 1e6,
                    cost.weight_bytes / 1e6,
                    kv / 1e6,
                    rate * bytes / 1e9,
                    100.0 * rate * bytes / limits.read_bytes_per_s
                );
            }
            Test::Prompt(_) => {
                let flop = 2.0
                    * (cost.product_elements + cost.attention_elements_per_position * mean_cached);
                println!(
                    "{:<8} {:.3} GFLOP per token = {:.1} GFLOP/s, {:.0}% of FMA peak",
                    r.test.name(),
                    flop / 1e9,
                    rate * flop / 1e9,
                    100.0 * rate * flop / limits.flop_per_s
                );
            }
        }
    }
}

/// `n` token ids in `0..vocab` from a fixed 64-bit linear congruential sequence (Knuth's MMIX
/// constants): the same ids on every run and machine.
fn fixed_tokens(n: usize, vocab: usize) -> Vec<u32> {
    let mut state = 0x5eed_u64;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 33) % vocab as u64) as u32
        })
        .collect()
}

pub fn main(model: &Path, args: &Args) -> Result<ExitCode> {
    let (runs, warmup) = (args.runs.unwrap_or(3), args.warmup.unwrap_or(1));
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let mut tests: Vec<Test> = args
        .prompt_tokens
        .iter()
        .map(|&n| Test::Prompt(n))
        .collect();
    if args.gen_tokens > 0 {
        tests.push(Test::Generate(args.gen_tokens));
    }
    if tests.iter().any(|t| t.tokens() == 0) {
        bail!("--prompt-tokens: every length must be at least 1");
    }
    let operation_set = args.options.operation_set;
    let pipelined = args
        .partitions
        .pipeline(args.options.device.device, operation_set);
    let sequences = args.sequences;
    if sequences == 0 || (sequences > 1 && pipelined.is_none()) {
        bail!("--sequences: 1, or more with --n-partitions");
    }
    let (llm, mut pipeline) = match &pipelined {
        None => {
            let llm = Llm::load_on(model, operation_set, args.options.device.device)
                .with_context(|| format!("cannot load model {}", model.display()))?;
            (llm, None)
        }
        Some(options) => match Pipeline::start(&ModelSpec::Llm(model.to_path_buf()), options)
            .with_context(|| format!("cannot start model {}", model.display()))?
        {
            (pipeline, Loaded::Llm(llm)) => (*llm, Some(pipeline)),
            (_, Loaded::Onnx(_)) => unreachable!("a decoder spec loads a decoder"),
        },
    };
    let micro_batch = args.partitions.micro_batch;
    let longest = tests.iter().map(|t| t.tokens()).max().unwrap_or(0);
    let tokens = fixed_tokens(longest, llm.vocab_size());
    let mut results = Vec::with_capacity(tests.len());
    for test in tests {
        let mut once = || {
            let staged = pipeline.as_mut().map(|p| (p, sequences, micro_batch));
            test.run(&llm, staged, &tokens)
        };
        for _ in 0..warmup {
            once()?;
        }
        let seconds = (0..runs)
            .map(|_| once())
            .collect::<Result<Vec<f64>>>()
            .with_context(|| format!("{} on {}", test.name(), model.display()))?;
        results.push(TestTimes {
            test,
            tokens: test.tokens() * sequences,
            seconds,
        });
    }
    let threads = rayon::current_num_threads();
    println!(
        "{}  operation set {operation_set}  threads {threads}  runs {runs}",
        model.display()
    );
    if pipeline.is_none() {
        println!("device {}", llm.device_description());
    }
    if let Some(pipeline) = &pipeline {
        println!(
            "device {}  sequences {sequences}  micro-batch {micro_batch}",
            pipeline.description()
        );
        for (k, stage) in pipeline.summary().iter().enumerate() {
            println!("stage {k}: {stage}");
        }
    }
    println!(
        "{:<8} {:>14} {:>22}",
        "test", "median tok/s", "tok/s p10-p90"
    );
    for r in &results {
        let rates = r.sorted_rates();
        println!(
            "{:<8} {:>14.1} {:>22}",
            r.test.name(),
            quantile(&rates, 0.5),
            format!("{:.1}-{:.1}", quantile(&rates, 0.1), quantile(&rates, 0.9))
        );
    }
    let on_cpu = pipeline.is_none() && args.options.device.device == Device::Cpu;
    let limits = match on_cpu {
        true => Some((Limits::measure(), TokenCost::of(model, &llm.config)?)),
        false => None,
    };
    if let Some((limits, cost)) = &limits {
        print_limits(&results, limits, cost);
    }
    if let Some(path) = &args.times_json {
        let tests: Vec<_> = results
            .iter()
            .map(|r| serde_json::json!({"test": r.test.name(), "tokens": r.tokens, "seconds": r.seconds}))
            .collect();
        let json = serde_json::json!({
            "engine": "samebits",
            "model": model.display().to_string(),
            "operation_set": operation_set.to_string(),
            "threads": threads,
            "tests": tests,
            "limits": limits.as_ref().map(|(l, _)| serde_json::json!({
                "memory_read_bytes_per_s": l.read_bytes_per_s,
                "fma_flop_per_s": l.flop_per_s,
                "fma_path": l.fma_path,
            })),
        });
        std::fs::write(path, json.to_string())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
