//! Text generation: the prompt's tokens (raw, or through the model's chat template), one prefill
//! over them, then one decode step per token with the KV cache, until the end-of-sequence token,
//! the token budget or the context is exhausted. Text is streamed as it becomes complete UTF-8,
//! and each step's logits are hashed into the chain that generation receipts record.

use crate::receipt::LogitsChain;
use crate::sampling::{SamplingOptions, sample};
use crate::{Llm, Result};
use samebits_tokenizer::IncrementalDecoder;
use samebits_tokenizer::{ChatMessage, ChatTemplate};
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
        chat_tokens(llm, &[ChatMessage::new("user", prompt)])
    } else {
        Ok(llm.tokenizer.encode(prompt, true)?)
    }
}

/// The token ids of a conversation: the chat template's rendering of `messages` with the
/// assistant's turn opened.
pub fn chat_tokens(llm: &Llm, messages: &[ChatMessage]) -> Result<Vec<u32>> {
    let source = llm.chat_template.as_deref().ok_or_else(|| {
        crate::LlmError::Usage(format!(
            "{} has no chat template (--chat and chat requests need one)",
            llm.path.display()
        ))
    })?;
    let template = ChatTemplate::for_tokenizer(source, &llm.tokenizer)?;
    let text = template.render_chat(messages, true)?;
    Ok(llm.tokenizer.encode(&text, false)?)
}

/// One generation in progress: the prompt's tokens, the tokens generated so far, their logits
/// chain and text. [`generate`] drives one with [`Llm::forward`]; a pipeline drives several at
/// once. Either way each step's token follows from its logits by the same rule.
pub struct Sequence<'a> {
    prompt_tokens: Vec<u32>,
    tokens: Vec<u32>,
    chain: LogitsChain,
    /// Logits rows taken by [`Sequence::step_unrecorded`] and not yet in `chain`, in order.
    unrecorded: Vec<Vec<f32>>,
    text: String,
    decoder: IncrementalDecoder<'a>,
    sampling: SamplingOptions,
    eos: Option<u32>,
    /// Most tokens this generation may produce (`max_tokens`, cut to the context).
    budget: usize,
    finished: bool,
}

impl<'a> Sequence<'a> {
    /// A generation from `prompt`; its first input is [`Sequence::prompt_tokens`].
    pub fn start(llm: &'a Llm, prompt: &str, options: &GenerateOptions) -> Result<Sequence<'a>> {
        let prompt_tokens = prompt_tokens(llm, prompt, options.chat)?;
        Sequence::from_tokens(llm, prompt_tokens, options)
    }

    /// A generation from prompt token ids already made ([`prompt_tokens`], [`chat_tokens`]).
    pub fn from_tokens(
        llm: &'a Llm,
        prompt_tokens: Vec<u32>,
        options: &GenerateOptions,
    ) -> Result<Sequence<'a>> {
        options.sampling.check()?;
        if prompt_tokens.is_empty() {
            return Err(crate::LlmError::Usage("--prompt gives no tokens".into()));
        }
        let budget = options.max_tokens.min(
            llm.config
                .context_length
                .saturating_sub(prompt_tokens.len())
                + 1,
        );
        Ok(Sequence {
            prompt_tokens,
            tokens: Vec::new(),
            chain: LogitsChain::default(),
            unrecorded: Vec::new(),
            text: String::new(),
            decoder: llm.tokenizer.incremental_decoder(),
            sampling: options.sampling,
            eos: llm.tokenizer.eos_id(),
            budget,
            finished: budget == 0,
        })
    }

    pub fn prompt_tokens(&self) -> &[u32] {
        &self.prompt_tokens
    }

    /// True once the end-of-sequence token or the budget is reached.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// True when the last generated token is the end-of-sequence token.
    pub fn ended_with_eos(&self) -> bool {
        self.eos.is_some() && self.tokens.last().copied() == self.eos
    }

    /// Tokens generated so far.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Takes the logits row of the last position run: hashes it into the chain, samples the
    /// step's token and streams its text. Returns the token to run next, or `None` when the
    /// generation is finished.
    pub fn step(&mut self, last: &[f32], on_text: impl FnMut(&str)) -> Result<Option<u32>> {
        if self.finished {
            return Ok(None);
        }
        self.record();
        self.chain.push(last);
        self.take(last, on_text)
    }

    /// [`Sequence::step`] that keeps the logits row for [`Sequence::record`] instead of hashing
    /// it into the chain now: a server hashes a round's rows while the next forward pass runs.
    /// The chain comes out the same (rows are recorded in step order, and
    /// [`Sequence::finish`] records the rest).
    pub fn step_unrecorded(
        &mut self,
        last: Vec<f32>,
        on_text: impl FnMut(&str),
    ) -> Result<Option<u32>> {
        if self.finished {
            return Ok(None);
        }
        let next = self.take(&last, on_text);
        self.unrecorded.push(last);
        next
    }

    /// Hashes the rows [`Sequence::step_unrecorded`] kept into the logits chain, in order.
    pub fn record(&mut self) {
        for row in self.unrecorded.drain(..) {
            self.chain.push(&row);
        }
    }

    /// Samples the step's token from `last` and streams its text (the chain is the caller's).
    fn take(&mut self, last: &[f32], mut on_text: impl FnMut(&str)) -> Result<Option<u32>> {
        let step = self.tokens.len();
        let token = sample(last, &self.sampling, step as u64);
        self.tokens.push(token);
        if Some(token) == self.eos {
            self.finished = true;
            return Ok(None);
        }
        let piece = self.decoder.push(token)?;
        on_text(&piece);
        self.text.push_str(&piece);
        self.finished = step + 1 >= self.budget;
        Ok((!self.finished).then_some(token))
    }

    /// The finished generation (the decoder's pending text flushed through `on_text`).
    pub fn finish(
        mut self,
        mut on_text: impl FnMut(&str),
        prefill_time: Duration,
        decode_time: Duration,
    ) -> Generation {
        self.record();
        let rest = self.decoder.finish();
        on_text(&rest);
        self.text.push_str(&rest);
        Generation {
            prompt_tokens: self.prompt_tokens,
            tokens: self.tokens,
            logits: self.chain,
            text: self.text,
            prefill_time,
            decode_time,
        }
    }
}

/// Generates from `prompt`, calling `on_text` with each piece of text as it is complete.
pub fn generate(
    llm: &Llm,
    prompt: &str,
    options: &GenerateOptions,
    mut on_text: impl FnMut(&str),
) -> Result<Generation> {
    let mut sequence = Sequence::start(llm, prompt, options)?;
    let vocab = llm.vocab_size();
    let mut cache = llm.new_cache();
    let start = Instant::now();
    let mut logits = llm.forward_last(sequence.prompt_tokens(), &mut cache)?;
    let prefill_time = start.elapsed();
    let start = Instant::now();
    while let Some(token) = sequence.step(&logits[logits.len() - vocab..], &mut on_text)? {
        logits = llm.forward(&[token], &mut cache)?;
    }
    let decode_time = start.elapsed();
    Ok(sequence.finish(on_text, prefill_time, decode_time))
}
