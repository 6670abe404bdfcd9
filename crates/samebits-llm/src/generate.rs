//! Text generation: the prompt's tokens (raw, or through the model's chat template), one prefill
//! over them, then one decode step per token with the KV cache, until the end-of-sequence token,
//! the token budget or the context is exhausted. Text is streamed as it becomes complete UTF-8,
//! and each step's logits are hashed into the chain that generation receipts record.

use crate::receipt::LogitsChain;
use crate::sampling::{SamplingOptions, sample};
use crate::{Llm, Result};
use samebits_gguf::{ChatMessage, ChatTemplate};
use std::time::{Duration, Instant};

/// What to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateOptions {
    /// Wrap the prompt as one user message in the model's chat template.
    pub chat: bool,
    /// Most tokens to generate (the end-of-sequence token included).
    pub max_tokens: usize,
    pub sampling: SamplingOptions,
}

/// A finished generation.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    pub prompt_tokens: Vec<u32>,
    /// Generated ids, the end-of-sequence token included when it was produced.
    pub tokens: Vec<u32>,
    /// Hashes of each step's logits and their chain.
    pub logits: LogitsChain,
    /// The generated text.
    pub text: String,
    pub prefill_time: Duration,
    pub decode_time: Duration,
}

impl Generation {
    /// Prompt tokens per second of the prefill.
    pub fn prefill_tokens_per_second(&self) -> f64 {
        per_second(self.prompt_tokens.len(), self.prefill_time)
    }

    /// Tokens generated after the first one (which the prefill produced), per second of decode.
    pub fn decode_tokens_per_second(&self) -> f64 {
        per_second(self.decoded_tokens(), self.decode_time)
    }

    /// Tokens the decode steps produced: all generated tokens but the first.
    pub fn decoded_tokens(&self) -> usize {
        self.tokens.len().saturating_sub(1)
    }
}

fn per_second(tokens: usize, time: Duration) -> f64 {
    tokens as f64 / time.as_secs_f64().max(1e-9)
}

/// The token ids of `prompt`: with `chat`, the chat template's rendering of one user message with
/// the assistant's turn opened; else the raw text, with BOS when the tokenizer asks for it.
pub fn prompt_tokens(llm: &Llm, prompt: &str, chat: bool) -> Result<Vec<u32>> {
    if chat {
        let source = llm.chat_template.as_deref().ok_or_else(|| {
            crate::LlmError::Usage(format!(
                "--chat: {} has no chat template",
                llm.path.display()
            ))
        })?;
        let template = ChatTemplate::for_tokenizer(source, &llm.tokenizer)?;
        let text = template.render_chat(&[ChatMessage::new("user", prompt)], true)?;
        Ok(llm.tokenizer.encode(&text, false)?)
    } else {
        Ok(llm.tokenizer.encode(prompt, true)?)
    }
}

/// Generates from `prompt`, calling `on_text` with each piece of text as it is complete.
pub fn generate(
    llm: &Llm,
    prompt: &str,
    options: &GenerateOptions,
    mut on_text: impl FnMut(&str),
) -> Result<Generation> {
    options.sampling.check()?;
    let prompt_tokens = prompt_tokens(llm, prompt, options.chat)?;
    if prompt_tokens.is_empty() {
        return Err(crate::LlmError::Usage("--prompt gives no tokens".into()));
    }
    let vocab = llm.vocab_size();
    let eos = llm.tokenizer.eos_id();
    let mut cache = llm.new_cache();
    let mut decoder = llm.tokenizer.incremental_decoder();
    let mut chain = LogitsChain::default();
    let (mut tokens, mut text) = (Vec::new(), String::new());
    let start = Instant::now();
    let mut logits = llm.forward(&prompt_tokens, &mut cache)?;
    let prefill_time = start.elapsed();
    let start = Instant::now();
    let budget = options.max_tokens.min(
        llm.config
            .context_length
            .saturating_sub(prompt_tokens.len())
            + 1,
    );
    for step in 0..budget {
        let last = &logits[logits.len() - vocab..];
        chain.push(last);
        let token = sample(last, &options.sampling, step as u64);
        tokens.push(token);
        if Some(token) == eos {
            break;
        }
        let piece = decoder.push(token)?;
        on_text(&piece);
        text.push_str(&piece);
        if step + 1 < budget {
            logits = llm.forward(&[token], &mut cache)?;
        }
    }
    let rest = decoder.finish();
    on_text(&rest);
    text.push_str(&rest);
    Ok(Generation {
        prompt_tokens,
        tokens,
        logits: chain,
        text,
        prefill_time,
        decode_time: start.elapsed(),
    })
}
