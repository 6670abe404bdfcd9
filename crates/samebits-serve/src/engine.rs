//! The engine: one thread that owns the model and generates for every request, with continuous
//! batching at token boundaries. Requests wait in a bounded queue; between two rounds the
//! engine admits waiting ones (up to `max_running` sequences) and drops those whose client
//! went away; each round then runs every running sequence's next tokens (a new sequence's
//! prompt, the others' last token) in one batched forward pass and takes one token for each.
//! (With `batch_from` above 1, sequences admitted while few run take their own pass.)
//!
//! Each sequence keeps its own KV cache; the batched pass ([`Llm::forward_last_batch`]) gives
//! each sequence the bits it gets alone (every product row and every attention reduction keeps
//! its canonical order), so its logits, tokens and receipt do not depend on which other
//! requests share the engine, or when they came (docs/serve.md). Token `i` of a sequence is
//! sampled with the request's own `seed` at step `i`, as `samebits generate` samples it. The
//! model may run in several pipeline stages of this process (`partitions`), the same bits.

use crate::api::{ApiError, GenerationRequest, Prompt, usage};
use crate::memory::HeapReleaser;
use crate::metrics::{Metrics, Outcome};
use crate::receipts::ReceiptStore;
use crate::stop::StopFilter;
use axum::http::StatusCode;
use rayon::prelude::*;
use samebits_llm::checkpoint::model_sha256;
use samebits_llm::model::ChooseStages;
use samebits_llm::receipt::GenerationReceipt;
use samebits_llm::{
    GenerateOptions, KvCache, Layers, Llm, LlmError, Sequence, chat_tokens, prompt_tokens,
};
use samebits_pipeline::boundaries::layer_stages;
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
/// pieces (streamed requests only), then `Done` (or `Failed`).
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
    /// Most prompt tokens one round prefills; other new sequences wait for a later round (a
    /// longer prompt still runs, alone among the prefills).
    pub max_batch_tokens: usize,
    /// From how many running sequences (the new one included) a new sequence joins the batched
    /// pass instead of running its own; `None`: 1 (every sequence batched).
    pub batch_from: Option<usize>,
    /// Pipeline stages in this process: the decoder's layers cut into this many stages balanced
    /// by parameter bytes (samebits-pipeline's `layer_stages`), stage `r` on `cuda:(K + r)` for
    /// `device` `cuda:K`, or every stage on the CPU. The bits do not depend on it.
    pub partitions: usize,
}

/// The loaded model, as the server describes it.
#[derive(Clone, Debug)]
pub struct ModelInfo {
    /// The model file or folder, absolute, as receipts record it.
    pub record: FileRecord,
    pub context_length: usize,
    /// Where it runs (`cpu`, `cuda:0 (<GPU name>)`; stages on several GPUs joined by ` + `).
    pub device: String,
    /// Pipeline stages the decoder runs in.
    pub partitions: usize,
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
                    batch_from: options.batch_from.unwrap_or(1),
                    max_batch_tokens: options.max_batch_tokens,
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
    let n = options.partitions.max(1);
    let device = |r: usize| match options.device {
        Device::Cpu => Device::Cpu,
        Device::Cuda(k) => Device::Cuda(k + r),
    };
    let choose: ChooseStages = &|_, bytes| {
        let ranges = layer_stages(bytes, n).map_err(|e| LlmError::Usage(e.to_string()))?;
        Ok(ranges
            .into_iter()
            .enumerate()
            .map(|(r, layers)| (layers, device(r)))
            .collect())
    };
    let layers = match n {
        1 => Layers::All(options.device),
        _ => Layers::Stages(choose),
    };
    let llm = Llm::load_layers(path, options.operation_set, layers)
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
        partitions: n,
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
    /// From how many running sequences (this one included) a new sequence joins the batched
    /// pass ([`EngineOptions::batch_from`]).
    batch_from: usize,
    /// Most prompt tokens one round prefills ([`EngineOptions::max_batch_tokens`]).
    max_batch_tokens: usize,
}

/// A sequence being generated.
struct Running<'a> {
    job: Job,
    options: GenerateOptions,
    sequence: Sequence<'a>,
    cache: KvCache,
    /// The tokens to run next: the prompt until the prefill ran, then the last token taken.
    next: Vec<u32>,
    /// Whether the sequence runs in the batched pass, else its own (`batch_from`).
    batched: bool,
    stop: StopFilter,
    prefill_time: Duration,
    decode_started: Instant,
    last_token: Instant,
}

impl Running<'_> {
    /// Whether the prompt has been run: its prefill round took the first token.
    fn started(&self) -> bool {
        !self.sequence.tokens().is_empty()
    }
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
        let mut heap = HeapReleaser::new();
        loop {
            heap.tick();
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
                let batched = running.len() + 1 >= self.batch_from;
                if let Some(sequence) = self.admit(job, batched) {
                    running.push(sequence);
                }
                self.metrics.set_running(running.len());
            }
            if running.is_empty() && !open {
                return;
            }
            running = self.round(running);
            self.metrics.set_running(running.len());
        }
    }

    /// Tokenizes and checks a request; `None` when it already ended (failed or cancelled).
    /// Its prompt runs in the next round, in the batched pass when `batched`.
    fn admit(&self, job: Job, batched: bool) -> Option<Running<'a>> {
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
        let now = Instant::now();
        Some(Running {
            stop: StopFilter::new(&job.request.stop),
            job,
            options,
            next: sequence.prompt_tokens().to_vec(),
            batched,
            sequence,
            cache: llm.new_cache(),
            prefill_time: Duration::ZERO,
            decode_started: now,
            last_token: now,
        })
    }

    /// One round: every running sequence whose client is still there runs its next tokens
    /// (the started ones their last token, new ones their prompt, in arrival order while their
    /// prompts fit `max_batch_tokens`, at least one), the batched ones in one batched forward
    /// pass and the others in their own, then takes its next token. Returns the sequences
    /// that go on.
    fn round(&self, running: Vec<Running<'a>>) -> Vec<Running<'a>> {
        let running: Vec<Running<'a>> = running
            .into_iter()
            .filter(|r| {
                let open = !r.job.events.is_closed();
                if !open {
                    self.metrics.ended(Outcome::Cancelled);
                }
                open
            })
            .collect();
        if running.is_empty() {
            return running;
        }
        let mut prefill = 0;
        let (running, waiting): (Vec<_>, Vec<_>) = running.into_iter().partition(|r| {
            let fits =
                r.started() || prefill == 0 || prefill + r.next.len() <= self.max_batch_tokens;
            if fits && !r.started() {
                prefill += r.next.len();
            }
            fits
        });
        let start = Instant::now();
        let (mut together, mut alone): (Vec<_>, Vec<_>) =
            running.into_iter().partition(|r| r.batched);
        // The forward passes, while the receipt chains take the last round's logits (each
        // sequence's rows in its step order, on other threads).
        let mut batch: Vec<(&[u32], &mut KvCache)> = Vec::with_capacity(together.len());
        let mut lone: Vec<(&[u32], &mut KvCache)> = Vec::with_capacity(alone.len());
        let mut sequences: Vec<&mut Sequence<'a>> = Vec::new();
        for (r, batched) in together
            .iter_mut()
            .map(|r| (r, true))
            .chain(alone.iter_mut().map(|r| (r, false)))
        {
            let Running {
                next,
                cache,
                sequence,
                ..
            } = r;
            match batched {
                true => batch.push((next.as_slice(), cache)),
                false => lone.push((next.as_slice(), cache)),
            }
            sequences.push(sequence);
        }
        let llm = self.llm;
        let forward = move || {
            let rows: Vec<Result<Vec<f32>, ApiError>> = match batch.is_empty() {
                true => Vec::new(),
                false => match llm.forward_last_batch(&mut batch) {
                    Ok(rows) => rows.into_iter().map(Ok).collect(),
                    Err(e) => vec![Err(internal(e)); batch.len()],
                },
            };
            let lone_rows: Vec<Result<Vec<f32>, ApiError>> = lone
                .into_iter()
                .map(|(next, cache)| llm.forward_last(next, cache).map_err(internal))
                .collect();
            (rows, lone_rows)
        };
        let record = move || sequences.into_par_iter().for_each(|s| s.record());
        let ((rows, lone_rows), ()) = rayon::join(forward, record);
        let mut results: Vec<(Running<'a>, Result<Vec<f32>, ApiError>)> =
            together.into_iter().zip(rows).collect();
        results.extend(alone.into_iter().zip(lone_rows));
        let now = Instant::now();
        let sequences = results.len();
        // Each sequence takes its token on its own (its seed, its receipt chain, its client):
        // in parallel, in the round's order (a lone sequence on this thread).
        let after = |(r, logits)| self.after_pass(r, logits, start, now);
        let went_on: Vec<Running<'a>> = match results.len() {
            0 | 1 => results.into_iter().filter_map(after).collect(),
            _ => results.into_par_iter().filter_map(after).collect(),
        };
        self.metrics
            .round(sequences, now - start, Instant::now() - now);
        let mut still = waiting;
        still.extend(went_on);
        still
    }

    /// A sequence after a round's forward pass gave it `logits` (the pass began at `start`
    /// and ended at `now`): its first-token or inter-token time, its token and text; the
    /// sequence if it goes on.
    fn after_pass(
        &self,
        mut r: Running<'a>,
        logits: Result<Vec<f32>, ApiError>,
        start: Instant,
        now: Instant,
    ) -> Option<Running<'a>> {
        let logits = match logits {
            Ok(logits) => logits,
            Err(e) => {
                self.fail(&r.job, e);
                return None;
            }
        };
        if r.started() {
            self.metrics.inter_token_latency(now - r.last_token);
        } else {
            let prompt_tokens = r.next.len();
            self.metrics.prompt_tokens(prompt_tokens);
            let _ = r.job.events.send(Event::Started { prompt_tokens });
            self.metrics.time_to_first_token(now - r.job.received);
            r.prefill_time = now - start;
            r.decode_started = now;
        }
        r.last_token = now;
        match self.take(&mut r, logits) {
            Progress::Continue => Some(r),
            Progress::Finished(reason) => {
                self.finish(r, reason);
                None
            }
            Progress::Ended => None,
        }
    }

    /// Samples the step's token from the last row of `logits` and releases its text.
    fn take(&self, running: &mut Running<'a>, mut logits: Vec<f32>) -> Progress {
        self.metrics.generated(1);
        // A decode step's logits are the row itself (split_off(0) would copy all of it).
        let row = match logits.len() - self.llm.vocab_size() {
            0 => logits,
            rest => logits.split_off(rest),
        };
        let Running {
            sequence,
            stop,
            job,
            ..
        } = running;
        // The row's hash joins the receipt chain during the next round's forward pass.
        let next = sequence.step_unrecorded(row, |piece| release(stop, job, piece));
        match next {
            Err(e) => {
                self.fail(job, internal(e));
                Progress::Ended
            }
            Ok(_) if stop.stopped() => Progress::Finished("stop"),
            Ok(Some(token)) => {
                running.next = vec![token];
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
        if job.request.stream && !rest.is_empty() {
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
        receipt.n_partitions = self.info.partitions;
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

/// Passes a piece of generated text through the stop strings, and to a streaming client (a
/// whole response takes its text from `Done`: no event, and no wake-up of its handler, per
/// token).
fn release(stop: &mut StopFilter, job: &Job, piece: &str) {
    let text = stop.push(piece);
    if job.request.stream && !text.is_empty() {
        let _ = job.events.send(Event::Text(text));
    }
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
}
