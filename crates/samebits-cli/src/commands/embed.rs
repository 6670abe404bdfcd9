//! `samebits embed`: sentence embeddings with a BERT encoder folder (sentence-transformers
//! layout), printed or written as .npy, optionally with an embedding receipt.

use anyhow::{Context, Result};
use samebits_llm::Embedder;
use samebits_llm::embed::EmbeddingReceipt;
use samebits_runtime::OperationSet;
use samebits_runtime::tensor_file::write_npy;
use std::path::PathBuf;
use std::process::ExitCode;

/// Embed sentences with a BERT encoder (a Hugging Face / sentence-transformers folder such as
/// all-MiniLM-L6-v2: config.json, model.safetensors, tokenizer.json).
///
/// Each text is tokenized, run through the encoder, mean-pooled over its tokens and, when the
/// folder's modules.json lists a Normalize module, scaled to unit L2 norm. All texts run as one
/// padded batch; a text's embedding has the same bits alone or with others. Without --out, the
/// embeddings are printed one per line.
///
/// --receipt FILE records the model folder's hash, the texts, their token ids and the sha256 of
/// the embeddings; `samebits verify FILE` re-checks them anywhere.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  samebits embed --model all-MiniLM-L6-v2/ --text \"The cat sits on the mat.\" --text \"A kitten rests on a rug.\"
  samebits embed --model all-MiniLM-L6-v2/ --text \"hello\" --out e.npy --receipt embed.json && samebits verify embed.json")]
pub struct Args {
    /// The model folder.
    #[arg(long, value_name = "DIR")]
    model: PathBuf,
    /// A text to embed (repeat for several).
    #[arg(long, value_name = "TEXT", required = true)]
    text: Vec<String>,
    /// Write the embeddings, [texts, dim] float32, to this .npy file.
    #[arg(long, value_name = "FILE.npy")]
    out: Option<PathBuf>,
    /// Write an embedding receipt to FILE.
    #[arg(long, value_name = "FILE")]
    receipt: Option<PathBuf>,
    /// Kernel promise: reproducible (the default), deterministic or default; reproducible-int8 is
    /// reproducible with exact-integer products of Q4_0, Q4_1 and Q8_0 weights (8-bit
    /// activations: faster, other bits than reproducible's)
    #[arg(long, value_name = "SET", default_value = "reproducible")]
    operation_set: OperationSet,
}

pub fn main(args: Args) -> Result<ExitCode> {
    let embedder = Embedder::load(&args.model, args.operation_set)
        .with_context(|| format!("cannot load model {}", args.model.display()))?;
    let texts: Vec<&str> = args.text.iter().map(String::as_str).collect();
    let embeddings = embedder.embed(&texts)?;
    match &args.out {
        Some(path) => {
            write_npy(path, &embeddings)?;
            eprintln!(
                "embeddings: {} x {} float32 -> {}",
                texts.len(),
                embedder.dim,
                path.display()
            );
        }
        None => {
            for row in embeddings.as_slice::<f32>()?.chunks(embedder.dim) {
                let line: Vec<String> = row.iter().map(|x| format!("{x:e}")).collect();
                println!("{}", line.join(" "));
            }
        }
    }
    if let Some(path) = &args.receipt {
        EmbeddingReceipt::new(&embedder, &texts, &embeddings, path)?.write(path)?;
        eprintln!("receipt: {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
