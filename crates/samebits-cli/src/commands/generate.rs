//! `samebits generate`: generate text with a llama-family model (a GGUF file or a Hugging Face
//! checkpoint folder), streaming it to stdout, with prefill and decode speeds on stderr and
//! optionally a generation receipt.

use super::{DeviceOption, PartitionOptions};
use anyhow::{Context, Result};
use samebits_llm::receipt::GenerationReceipt;
use samebits_llm::{GenerateOptions, Generation, Llm, SamplingOptions, generate};
use samebits_pipeline::{Loaded, ModelSpec, Pipeline, drivers};
use samebits_runtime::OperationSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Generate text from a prompt with a llama-family language model: a GGUF file (architecture
/// llama, qwen2, qwen3, phi3, gemma2 or gemma3: SmolLM2, Llama 3.x, Qwen2.5, Qwen3, Phi-3, Gemma 2
/// and 3, ...) or a Hugging Face checkpoint folder (Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 2
/// and 3: config.json, *.safetensors, tokenizer.json, tokenizer_config.json).
///
/// The prompt is tokenized (with --chat, first wrapped as a user message in the model's own chat
/// template), processed in one prefill pass, then one token is generated per decode step with a
/// KV cache until the end-of-sequence token or --max-tokens. Text is printed as it is produced;
/// speeds go to stderr.
///
/// With --temperature 0 (the default) each token is the most likely one (lowest id on ties). With
/// a temperature above 0 the logits are divided by it, turned into probabilities, cut to the
/// --top-k most likely tokens and then to the fewest whose probabilities reach --top-p, and one
/// token is drawn with a random number that depends only on --seed and the step
/// (docs/contract.md, section `sampling`): the same options give the same text on every machine.
///
/// --receipt FILE records the model hash, prompt, options, every generated token and the sha256
/// of each step's logits; `samebits verify FILE` re-checks all of it anywhere.
///
/// --prompt may be repeated: the prompts are generated one after another, or with
/// --n-partitions all at once through the pipeline's stages (--micro-batch per group). Their
/// texts are printed when all are done, each after a `== prompt I` line, and their receipts go
/// to FILE with `.I` before its extension.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  samebits generate --model SmolLM2-135M-Instruct.Q4_1.gguf --prompt \"The capital of France is\"
  samebits generate --model m.gguf --chat --prompt \"Write a haiku\" --temperature 0.7 --top-p 0.9 --seed 7
  samebits generate --model m.gguf --prompt \"Once upon a time\" --receipt gen.json && samebits verify gen.json
  samebits generate --model SmolLM2-135M-Instruct/ --chat --prompt \"Hi\"
  samebits generate --model m.gguf --device cuda --n-partitions 2 --prompt \"Hi\" --prompt \"Bye\" --micro-batch 2")]
pub struct Args {
    /// The GGUF model file, or a Hugging Face checkpoint folder.
    #[arg(long, value_name = "PATH")]
    model: PathBuf,
    /// The text to continue (or, with --chat, the user's message); repeat for several.
    #[arg(long = "prompt", value_name = "TEXT", required = true)]
    prompts: Vec<String>,
    /// Wrap the prompt in the model's chat template as one user turn.
    #[arg(long)]
    chat: bool,
    /// Most tokens to generate.
    #[arg(long, value_name = "N", default_value_t = 128)]
    max_tokens: usize,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, value_name = "T", default_value_t = 0.0)]
    temperature: f32,
    /// Sample only among the K most likely tokens (0: all).
    #[arg(long, value_name = "K", default_value_t = 0)]
    top_k: usize,
    /// Sample only among the most likely tokens whose probabilities reach P (1: all).
    #[arg(long, value_name = "P", default_value_t = 1.0)]
    top_p: f32,
    /// Seed of the random draws.
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// Write a generation receipt to FILE.
    #[arg(long, value_name = "FILE")]
    receipt: Option<PathBuf>,
    /// Kernel promise: reproducible (the default), deterministic or default; reproducible-int8 is
    /// reproducible with exact-integer products of Q4_0, Q4_1 and Q8_0 weights (8-bit
    /// activations: faster on the CPU, other bits than reproducible's, the same on CPU and GPU)
    #[arg(long, value_name = "SET", default_value = "reproducible")]
    operation_set: OperationSet,
    #[command(flatten)]
    device: DeviceOption,
    #[command(flatten)]
    partitions: PartitionOptions,
}

pub fn main(args: Args) -> Result<ExitCode> {
    let options = GenerateOptions {
        chat: args.chat,
        max_tokens: args.max_tokens,
        sampling: SamplingOptions {
            temperature: args.temperature,
            top_k: args.top_k,
            top_p: args.top_p,
            seed: args.seed,
        },
    };
    options.sampling.check()?;
    let pipelined = args
        .partitions
        .pipeline(args.device.device, args.operation_set);
    let (llm, mut pipeline) = match &pipelined {
        None => {
            let llm = Llm::load_on(&args.model, args.operation_set, args.device.device)
                .with_context(|| format!("cannot load model {}", args.model.display()))?;
            (llm, None)
        }
        Some(options) => match Pipeline::start(&ModelSpec::Llm(args.model.clone()), options)
            .with_context(|| format!("cannot start model {}", args.model.display()))?
        {
            (pipeline, Loaded::Llm(llm)) => (*llm, Some(pipeline)),
            (_, Loaded::Onnx(_)) => unreachable!("a decoder spec loads a decoder"),
        },
    };
    let several = args.prompts.len() > 1;
    let mut stdout = std::io::stdout();
    let mut texts = vec![String::new(); args.prompts.len()];
    let mut on_text = |i: usize, text: &str| match several {
        true => texts[i].push_str(text),
        false => {
            let _ = stdout.write_all(text.as_bytes());
            let _ = stdout.flush();
        }
    };
    let generations: Vec<Generation> = match pipeline.as_mut() {
        None => {
            let mut done = Vec::new();
            for (i, prompt) in args.prompts.iter().enumerate() {
                done.push(generate(&llm, prompt, &options, |t| on_text(i, t))?);
            }
            done
        }
        Some(pipeline) => drivers::generate_many(
            pipeline,
            &llm,
            &args.prompts,
            &options,
            args.partitions.micro_batch,
            &mut on_text,
        )?,
    };
    match several {
        true => {
            for (i, text) in texts.iter().enumerate() {
                println!("== prompt {i}\n{text}");
            }
        }
        false => println!(),
    }
    for (i, generation) in generations.iter().enumerate() {
        let label = match several {
            true => format!("prompt {i}: "),
            false => String::new(),
        };
        eprintln!(
            "{label}prefill: {} tokens in {:.3} s ({:.1} tok/s); decode: {} tokens in {:.3} s \
             ({:.1} tok/s)",
            generation.prompt_tokens.len(),
            generation.prefill_time.as_secs_f64(),
            generation.prefill_tokens_per_second(),
            generation.decoded_tokens(),
            generation.decode_time.as_secs_f64(),
            generation.decode_tokens_per_second(),
        );
    }
    if let Some(pipeline) = &pipeline {
        let tokens: usize = generations.iter().map(|g| g.tokens.len()).sum();
        let seconds = generations
            .iter()
            .map(|g| (g.prefill_time + g.decode_time).as_secs_f64())
            .fold(0.0, f64::max);
        eprintln!(
            "pipeline: {} ({}); {tokens} tokens generated in {seconds:.3} s ({:.1} tok/s overall)",
            pipeline.description(),
            pipeline.summary().join("; "),
            tokens as f64 / seconds.max(1e-9)
        );
    }
    if let Some(path) = &args.receipt {
        for (i, (prompt, generation)) in args.prompts.iter().zip(&generations).enumerate() {
            let path = match several {
                true => numbered(path, i),
                false => path.clone(),
            };
            let mut receipt = GenerationReceipt::new(&llm, prompt, &options, generation, &path)?;
            if let Some(pipeline) = &pipeline {
                receipt.device = pipeline.description().to_string();
                receipt.n_partitions = pipeline.n_partitions();
            }
            receipt.write(&path)?;
            eprintln!("receipt: {}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `gen.json` → `gen.I.json` (the receipt of prompt I of several).
fn numbered(path: &Path, i: usize) -> PathBuf {
    match path.extension() {
        Some(ext) => path.with_extension(format!("{i}.{}", ext.to_string_lossy())),
        None => path.with_extension(i.to_string()),
    }
}
