//! [`generate`]: one generation and its receipt.

use samebits_llm::receipt::GenerationReceipt;
use samebits_llm::{GenerateOptions, Generation, Llm, Result};
use std::path::{Path, PathBuf};

/// A finished generation and its receipt.
pub struct Generated {
    pub generation: Generation,
    pub receipt: GenerationReceipt,
}

/// Generates from `prompt`, streaming each piece of text to `on_text`, and builds the receipt;
/// writes it when `receipt_path` is given. A receipt kept in memory stores the model path as if
/// written in the current folder.
pub fn generate(
    llm: &Llm,
    prompt: &str,
    options: &GenerateOptions,
    receipt_path: Option<&Path>,
    on_text: impl FnMut(&str),
) -> Result<Generated> {
    let generation = samebits_llm::generate(llm, prompt, options, on_text)?;
    let path = receipt_path.map_or_else(|| PathBuf::from("receipt.json"), Path::to_path_buf);
    let receipt = GenerationReceipt::new(llm, prompt, options, &generation, &path)?;
    if receipt_path.is_some() {
        receipt.write(&path)?;
    }
    Ok(Generated {
        generation,
        receipt,
    })
}
