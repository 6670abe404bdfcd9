//! The engine: one thread that owns the model and generates for every request, with continuous
//! batching at token boundaries. Requests wait in a bounded queue; between two decode steps the
//! engine admits waiting ones (up to `max_running` sequences: prefill and first token) and
//! drops those whose client went away, then advances every running sequence by one token.
//!
//! Each sequence keeps its own KV cache and runs its own forward pass, so every product and
//! attention reduction of a sequence has the canonical order it has alone: its logits, tokens
//! and receipt do not depend on which other requests share the engine, or when they came
//! (docs/serve.md). Token `i` of a sequence is sampled with the request's own `seed` at step
//! `i`, as `samebits generate` samples it.

use crate::api::{ApiError, GenerationRequest, Prompt, usage};
use crate::metrics::{Metrics, Outcome};
use crate::receipts::ReceiptStore;
use crate::stop::StopFilter;
use axum::http::StatusCode;
use samebits_llm::checkpoint::model_sha256;
use samebits_llm::receipt::GenerationReceipt;
use samebits_llm::{GenerateOptions, KvCache, Llm, Sequence, chat_tokens, prompt_tokens};
use samebits_runtime::receipt::FileRecord;
use samebits_runtime::{Device, OperationSet};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;

/// One request handed to the engine.
pub struct Job {
    pub id: String,
    pub request: GenerationRequest,
    /// Where the engine sends the request's events; closed when the client goes away.
    pub events: UnboundedSender<Event>,
    /// When the request arrived (time to first token counts from here).
    pub received: Instant,
}

/// What the engine tells a request's handler, in this order: `Started` (or `Failed`), `Text`
/// pieces, then `Done` (or `Failed`).
#[derive(Debug)]
pub enum Event {
    /// The prompt was processed; `prompt_tokens` of them.
    Started {
        prompt_tokens: usize,
    },
    /// Generated text that is final (no stop string can start in it).
    Text(String),
    Done(Box<Finished>),
    Failed(ApiError),
}

/// A finished generation.
#[derive(Debug)]
pub struct Finished {
    /// The whole text, cut before the stop string if one appeared.
    pub text: String,
    /// `stop` (end-of-sequence token or stop string) or `length` (token budget or context).
    pub finish_reason: &'static str,
    /// The OpenAI `usage` object.
    pub usage: Value,
    /// The generation receipt (`samebits verify` takes it as is).
    pub receipt: Value,
}

/// What the engine runs.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    pub model: PathBuf,
    pub operation_set: OperationSet,
    pub device: Device,
    /// Most sequences generated at once; further requests wait in the queue.
    pub max_running: usize,
}

/// The loaded model, as the server describes it.
#[derive(Clone, Debug)]
pub struct ModelInfo {
    /// The model file or folder, absolute, as receipts record it.
    pub record: FileRecord,
    pub context_length: usize,
    /// Where it runs (`cpu`, `cuda:0 (<GPU name>)`).
    pub device: String,
}

/// The engine thread.
pub struct Engine {
    pub info: ModelInfo,
    thread: JoinHandle<()>,
}

impl Engine {
    /// Loads the model on a new thread (where it then stays) and starts taking `jobs`; returns
    /// once the model is loaded, or with the reason it could not be.
    pub fn start(
        options: EngineOptions,
        jobs: Receiver<Job>,
        metrics: Arc<Metrics>,
        receipts: Arc<ReceiptStore>,
    ) -> Result<Engine, String> {
        let (loaded, ready) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("samebits-engine".into())
            .spawn(move || {
                let llm = match load(&options) {
                    Ok(loaded_model) => loaded_model,
                    Err(e) => {
                        let _ = loaded.send(Err(e));
                        return;
                    }
                };
                let (llm, info) = llm;
                let _ = loaded.send(Ok(info.clone()));
                let engine = Scheduler {
                    llm: &llm,
                    info: &info,
                    metrics: &metrics,
                    receipts: &receipts,
                };
                engine.run(jobs, options.max_running.max(1));
            })
            .map_err(|e| format!("cannot start the engine thread: {e}"))?;
        match ready.recv() {
            Ok(Ok(info)) => Ok(Engine { info, thread }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err("the engine thread stopped while loading the model".into()),
        }
    }

    /// Waits for the engine to finish its running sequences once every sender of its queue is
    /// gone.
    pub fn join(self) {
        let _ = self.thread.join();
    }
}

fn load(options: &EngineOptions) -> Result<(Llm, ModelInfo), String> {
    let path = &options.model;
    let llm = Llm::load_on(path, options.operation_set, options.device)
        .map_err(|e| format!("cannot load model {}: {e}", path.display()))?;
    let absolute = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
    let sha256 = model_sha256(path).map_err(|e| format!("cannot hash {}: {e}", path.display()))?;
    let info = ModelInfo {
        record: FileRecord {
            path: absolute.to_string_lossy().into_owned(),
            sha256,
        },
        context_length: llm.config.context_length,
        device: llm.device_description(),
    };
    Ok((llm, info))
}

/// The model's name as the API shows it: the file or folder name.
pub fn model_id(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

struct Scheduler<'a> {
    llm: &'a Llm,
    info: &'a ModelInfo,
    metrics: &'a Metrics,
    receipts: &'a ReceiptStore,
}

/// A sequence being generated.
struct Running<'a> {
    job: Job,
    options: GenerateOptions,
    sequence: Sequence<'a>,
    cache: KvCache,
    /// The token to run next.
    next: u32,
    stop: StopFilter,
    prefill_time: Duration,
    decode_started: Instant,
    last_token: Instant,
}

/// Where a sequence stands after a step.
enum Progress {
    Continue,
    Finished(&'static str),
    /// Cancelled or failed; already reported.
    Ended,
}

impl<'a> Scheduler<'a> {
    fn run(&self, jobs: Receiver<Job>, max_running: usize) {
        let mut running: Vec<Running<'a>> = Vec::new();
        let mut open = true;
        loop {
            while open && running.len() < max_running {
                let job = if running.is_empty() {
                    match jobs.recv() {
                        Ok(job) => job,
                        Err(_) => {
                            open = false;
                            break;
                        }
                    }
                } else {
                    match jobs.try_recv() {
                        Ok(job) => job,
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => {
                            open = false;
                            break;
                        }
                    }
                };
                self.metrics.dequeued();
                if let Some(sequence) = self.admit(job) {
                    running.push(sequence);
                }
                self.metrics.set_running(running.len());
            }
            if running.is_empty() && !open {
                return;
            }
            let mut still = Vec::with_capacity(running.len());
            for mut sequence in running.drain(..) {
                match self.advance(&mut sequence) {
                    Progress::Continue => still.push(sequence),
                    Progress::Finished(reason) => self.finish(sequence, reason),
                    Progress::Ended => {}
                }
            }
            running = still;
            self.metrics.set_running(running.len());
        }
    }

    /// Tokenizes and prefills a request and takes its first token; `None` when it already
    /// ended (finished, failed or cancelled).
    fn admit(&self, job: Job) -> Option<Running<'a>> {
        let llm = self.llm;
        if job.events.is_closed() {
            self.metrics.ended(Outcome::Cancelled);
            return None;
        }
        let request = &job.request;
        let context = self.info.context_length;
        let options = GenerateOptions {
            chat: matches!(request.prompt, Prompt::Chat(_)),
            max_tokens: request.max_tokens.unwrap_or(context),
            sampling: request.sampling,
        };
        let (field, tokens) = match &request.prompt {
            Prompt::Text(text) => ("prompt", prompt_tokens(llm, text, false)),
            Prompt::Chat(messages) => ("messages", chat_tokens(llm, messages)),
        };
        let checked = tokens
            .map_err(|e| ApiError::field(field, e))
            .and_then(|tokens| match tokens.len() {
                0 => Err(ApiError::field(field, "gives no tokens")),
                n if n > context => Err(ApiError::field(
                    field,
                    format!("{n} tokens exceed the model's context of {context} tokens"),
                )),
                _ => Ok(tokens),
            })
            .and_then(|tokens| {
                Sequence::from_tokens(llm, tokens, &options).map_err(|e| ApiError::field(field, e))
            });
        let sequence = match checked {
            Ok(sequence) => sequence,
            Err(e) => {
                self.fail(&job, e);
                return None;
            }
        };
        let mut cache = llm.new_cache();
        let start = Instant::now();
        let logits = match llm.forward_last(sequence.prompt_tokens(), &mut cache) {
            Ok(logits) => logits,
            Err(e) => {
                self.fail(&job, internal(e));
                return None;
            }
        };
        let prompt_tokens = sequence.prompt_tokens().len();
        self.metrics.prompt_tokens(prompt_tokens);
        let _ = job.events.send(Event::Started { prompt_tokens });
        let now = Instant::now();
        self.metrics.time_to_first_token(now - job.received);
        let mut running = Running {
            stop: StopFilter::new(&job.request.stop),
            job,
            options,
            sequence,
            cache,
            next: 0,
            prefill_time: now - start,
            decode_started: now,
            last_token: now,
        };
        match self.take(&mut running, &logits) {
            Progress::Continue => Some(running),
            Progress::Finished(reason) => {
                self.finish(running, reason);
                None
            }
            Progress::Ended => None,
        }
    }

    /// One decode step of `running`.
    fn advance(&self, running: &mut Running<'a>) -> Progress {
        if running.job.events.is_closed() {
            self.metrics.ended(Outcome::Cancelled);
            return Progress::Ended;
        }
        match self.llm.forward(&[running.next], &mut running.cache) {
            Ok(logits) => {
                let now = Instant::now();
                self.metrics.inter_token_latency(now - running.last_token);
                running.last_token = now;
                self.take(running, &logits)
            }
            Err(e) => {
                self.fail(&running.job, internal(e));
                Progress::Ended
            }
        }
    }

    /// Samples the step's token from the last row of `logits` and releases its text.
    fn take(&self, running: &mut Running<'a>, logits: &[f32]) -> Progress {
        self.metrics.generated(1);
        let row = &logits[logits.len() - self.llm.vocab_size()..];
        let Running {
            sequence,
            stop,
            job,
            ..
        } = running;
        let next = sequence.step(row, |piece| release(stop, job, piece));
        match next {
            Err(e) => {
                self.fail(job, internal(e));
                Progress::Ended
            }
            Ok(_) if stop.stopped() => Progress::Finished("stop"),
            Ok(Some(token)) => {
                running.next = token;
                Progress::Continue
            }
            Ok(None) if sequence.ended_with_eos() => Progress::Finished("stop"),
            Ok(None) => Progress::Finished("length"),
        }
    }

    /// Sends the rest of the text, the receipt and the `Done` event.
    fn finish(&self, running: Running<'a>, finish_reason: &'static str) {
        let Running {
            job,
            options,
            sequence,
            mut stop,
            prefill_time,
            decode_started,
            ..
        } = running;
        let generation = sequence.finish(
            |piece| release(&mut stop, &job, piece),
            prefill_time,
            decode_started.elapsed(),
        );
        let rest = stop.finish();
        if !rest.is_empty() {
            let _ = job.events.send(Event::Text(rest));
        }
        let (prompt, messages) = match &job.request.prompt {
            Prompt::Text(text) => (text.as_str(), None),
            Prompt::Chat(messages) => ("", Some(messages.clone())),
        };
        let mut receipt = GenerationReceipt::with_model(
            self.llm,
            self.info.record.clone(),
            prompt,
            &options,
            &generation,
        );
        receipt.messages = messages;
        let receipt = serde_json::to_value(&receipt).expect("a receipt serializes");
        self.receipts.insert(&job.id, receipt.clone());
        self.metrics.ended(Outcome::Finished);
        let _ = job.events.send(Event::Done(Box::new(Finished {
            text: stop.text().to_string(),
            finish_reason,
            usage: usage(generation.prompt_tokens.len(), generation.tokens.len()),
            receipt,
        })));
    }

    fn fail(&self, job: &Job, error: ApiError) {
        self.metrics.ended(Outcome::Failed);
        let _ = job.events.send(Event::Failed(error));
    }
}

/// Passes a piece of generated text through the stop strings to the client.
fn release(stop: &mut StopFilter, job: &Job, piece: &str) {
    let text = stop.push(piece);
    if !text.is_empty() {
        let _ = job.events.send(Event::Text(text));
    }
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
}
