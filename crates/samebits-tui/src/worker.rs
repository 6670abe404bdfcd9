//! The engine side of the UI: one thread that runs [`Job`]s (generate with a receipt, verify a
//! receipt) and reports [`WorkerEvent`]s over a channel, so the UI keeps drawing and reading keys
//! while the model computes. The loaded model is kept between runs while its file, operation set
//! and execution options stay the same. With Partitions above 1 the model runs through the
//! pipeline's stages (samebits-pipeline: simulated on the CPU, one GPU each over NCCL with a
//! CUDA device), as `samebits generate --n-partitions` runs it; the bits are the same. A run
//! with a Server goes to that `samebits serve` instead ([`crate::remote`]): the same reports
//! (after [`WorkerEvent::Sent`] in place of loading and prefill) and a receipt in the same
//! folder, which Verify re-runs here like any other.
//!
//! Every failure (missing model, unsupported device, unreadable receipt, even a panic inside the
//! engine) comes back as [`WorkerEvent::Failed`] with one line saying what went wrong.

use crate::execution::ExecutionOptions;
use crate::form::RunRequest;
use samebits_llm::receipt::{self, GenerationReceipt};
use samebits_llm::{Generation, Llm, generate, prompt_tokens};
use samebits_ops::OperationSet;
use samebits_pipeline::{Loaded, ModelSpec, Pipeline, PipelineOptions, drivers};
use samebits_runtime::hashing::sha256_file;
use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Work for the engine thread.
#[derive(Clone, Debug, PartialEq)]
pub enum Job {
    /// Generate, streaming tokens, and write a receipt.
    Generate(RunRequest),
    /// Re-run the receipt at this path and compare.
    Verify(PathBuf),
}

/// How far a generation has come.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Progress {
    /// Time from the start of the prefill to the first generated token.
    pub prefill: Duration,
    /// Pieces of text streamed so far: one per generated token but the end-of-sequence one,
    /// plus the final flush of any incomplete character (the finished run's counts are exact).
    pub tokens: usize,
    /// Time from the first generated token to the latest.
    pub decode: Duration,
}

/// A finished generation and its receipt.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutcome {
    pub text: String,
    pub prompt_tokens: usize,
    /// Generated tokens, the end-of-sequence token included.
    pub generated_tokens: usize,
    pub prefill_tokens_per_second: f64,
    pub decode_tokens_per_second: f64,
    pub receipt: PathBuf,
    /// sha256 of the receipt file.
    pub receipt_sha256: String,
    /// The chain of the logits hashes the receipt records.
    pub logits_digest: String,
}

/// What re-running a receipt found.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Every token and every step's logits are bit-identical.
    Match { steps: usize },
    /// The bits differ; `step` is the first generation step that differs (`None`: the prompt's
    /// tokens or the final digest).
    Mismatch {
        steps_matched: usize,
        step: Option<usize>,
        message: String,
    },
    /// The receipt or its model cannot be used (missing, corrupt, another sha256).
    Unusable(String),
}

/// What the engine thread reports, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkerEvent {
    /// Loading and compiling the model.
    Loading,
    /// The prompt is this many tokens; its prefill started.
    Prefilling {
        prompt_tokens: usize,
    },
    /// The request went to this server, which prefills it there (its token count comes with
    /// the receipt at the end).
    Sent {
        server: String,
    },
    /// One generated token's text (empty while a character is still incomplete).
    Token {
        text: String,
        progress: Progress,
    },
    Generated(RunOutcome),
    /// Re-running a receipt.
    Verifying,
    Verified {
        receipt: PathBuf,
        verdict: Verdict,
    },
    Failed(String),
}

/// The engine thread's mailbox and its reports.
pub struct Worker {
    jobs: Sender<Job>,
    pub events: Receiver<WorkerEvent>,
}

impl Worker {
    /// Starts the engine thread; receipts are written into `receipts_dir` (created when needed).
    pub fn spawn(receipts_dir: PathBuf) -> std::io::Result<Worker> {
        let (jobs, job_queue) = channel::<Job>();
        let (report, events) = channel();
        std::thread::Builder::new()
            .name(WORKER_THREAD.into())
            .spawn(move || {
                let mut engine = Engine {
                    receipts_dir,
                    loaded: None,
                    runs: 0,
                };
                for job in job_queue {
                    let send = |event| {
                        let _ = report.send(event);
                    };
                    let result = catch_unwind(AssertUnwindSafe(|| engine.run(job, &send)));
                    match result {
                        Ok(Ok(())) => {}
                        Ok(Err(message)) => send(WorkerEvent::Failed(message)),
                        Err(panic) => {
                            engine.loaded = None;
                            send(WorkerEvent::Failed(format!(
                                "internal error: {}",
                                panic_message(panic.as_ref())
                            )));
                        }
                    }
                }
            })?;
        Ok(Worker { jobs, events })
    }

    pub fn submit(&self, job: Job) {
        // The thread only ends when this sender is dropped.
        let _ = self.jobs.send(job);
    }
}

/// The engine thread's name; the panic hook leaves the terminal alone for panics on it, since
/// they come back as [`WorkerEvent::Failed`].
pub const WORKER_THREAD: &str = "samebits-tui-engine";

fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Identifies a loaded model: the file (and its size and time, so a replaced file reloads) and
/// how it was compiled.
#[derive(Clone, Debug, PartialEq)]
struct ModelKey {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
    operation_set: OperationSet,
    execution: ExecutionOptions,
}

/// A loaded model: whole in this process, or cut into pipeline stages.
enum LoadedModel {
    Whole(Llm),
    /// The stages, and the decoder's configuration and tokenizer (no layers).
    Staged(Box<Pipeline>, Llm),
}

impl LoadedModel {
    fn llm(&self) -> &Llm {
        match self {
            LoadedModel::Whole(llm) | LoadedModel::Staged(_, llm) => llm,
        }
    }
}

struct Engine {
    receipts_dir: PathBuf,
    loaded: Option<(ModelKey, LoadedModel)>,
    runs: usize,
}

impl Engine {
    fn run(&mut self, job: Job, send: &dyn Fn(WorkerEvent)) -> Result<(), String> {
        match job {
            Job::Generate(request) => {
                let outcome = self.generate(&request, send)?;
                send(WorkerEvent::Generated(outcome));
            }
            Job::Verify(receipt) => {
                send(WorkerEvent::Verifying);
                let verdict = verify(&receipt);
                send(WorkerEvent::Verified { receipt, verdict });
            }
        }
        Ok(())
    }

    fn model(
        &mut self,
        request: &RunRequest,
        send: &dyn Fn(WorkerEvent),
    ) -> Result<&mut LoadedModel, String> {
        request.execution.check_available()?;
        let path = &request.model;
        let metadata = std::fs::metadata(path)
            .map_err(|e| format!("Model: cannot open {}: {e}", path.display()))?;
        let key = ModelKey {
            path: path.clone(),
            len: metadata.len(),
            modified: metadata.modified().ok(),
            operation_set: request.operation_set,
            execution: request.execution,
        };
        if self.loaded.as_ref().is_none_or(|(k, _)| *k != key) {
            self.loaded = None;
            send(WorkerEvent::Loading);
            let cannot =
                |e: &dyn std::fmt::Display| format!("Model: cannot load {}: {e}", path.display());
            let execution = request.execution;
            let model = match execution.partitions {
                1 => LoadedModel::Whole(
                    Llm::load_on(path, request.operation_set, execution.device)
                        .map_err(|e| cannot(&e))?,
                ),
                n => {
                    let options = PipelineOptions {
                        n_partitions: n,
                        operation_set: request.operation_set,
                        device: execution.device,
                        rendezvous: None,
                    };
                    match Pipeline::start(&ModelSpec::Llm(path.clone()), &options) {
                        Ok((pipeline, Loaded::Llm(llm))) => {
                            LoadedModel::Staged(Box::new(pipeline), *llm)
                        }
                        Ok((_, Loaded::Onnx(_))) => {
                            unreachable!("a decoder spec loads a decoder")
                        }
                        Err(e) => return Err(cannot(&e)),
                    }
                }
            };
            self.loaded = Some((key, model));
        }
        Ok(&mut self.loaded.as_mut().expect("just loaded").1)
    }

    fn generate(
        &mut self,
        request: &RunRequest,
        send: &dyn Fn(WorkerEvent),
    ) -> Result<RunOutcome, String> {
        self.runs += 1;
        let receipts_dir = self.receipts_dir.clone();
        let receipt_path = receipts_dir.join(receipt_name(self.runs));
        if let Some(server) = &request.server {
            return crate::remote::generate(server, request, &receipt_path, send);
        }
        let model = self.model(request, send)?;
        let options = &request.generate;
        let prompt =
            prompt_tokens(model.llm(), &request.prompt, options.chat).map_err(|e| e.to_string())?;
        send(WorkerEvent::Prefilling {
            prompt_tokens: prompt.len(),
        });
        let start = Instant::now();
        let mut first_token: Option<Instant> = None;
        let mut progress = Progress::default();
        let mut on_text = |text: &str| {
            let now = Instant::now();
            let first = *first_token.get_or_insert(now);
            progress = Progress {
                prefill: first - start,
                tokens: progress.tokens + 1,
                decode: now - first,
            };
            send(WorkerEvent::Token {
                text: text.to_string(),
                progress,
            });
        };
        let generation: Generation = match model {
            LoadedModel::Whole(llm) => {
                generate(llm, &request.prompt, options, on_text).map_err(|e| e.to_string())?
            }
            LoadedModel::Staged(pipeline, llm) => drivers::generate_many(
                pipeline,
                llm,
                std::slice::from_ref(&request.prompt),
                options,
                1,
                &mut |_, text| on_text(text),
            )
            .map_err(|e| e.to_string())?
            .pop()
            .expect("one generation per prompt"),
        };
        std::fs::create_dir_all(&receipts_dir).map_err(|e| {
            format!(
                "cannot create the receipts folder {}: {e}",
                receipts_dir.display()
            )
        })?;
        let mut receipt = GenerationReceipt::new(
            model.llm(),
            &request.prompt,
            options,
            &generation,
            &receipt_path,
        )
        .map_err(|e| e.to_string())?;
        if let LoadedModel::Staged(pipeline, _) = model {
            receipt.device = pipeline.description().to_string();
            receipt.n_partitions = pipeline.n_partitions();
        }
        receipt.write(&receipt_path).map_err(|e| e.to_string())?;
        let receipt_sha256 = sha256_file(&receipt_path).map_err(|e| e.to_string())?;
        Ok(RunOutcome {
            prompt_tokens: generation.prompt_tokens.len(),
            generated_tokens: generation.tokens.len(),
            prefill_tokens_per_second: generation.prefill_tokens_per_second(),
            decode_tokens_per_second: generation.decode_tokens_per_second(),
            logits_digest: generation.logits.digest(),
            text: generation.text,
            receipt: receipt_path,
            receipt_sha256,
        })
    }
}

/// `generation-<unix seconds>-<run>.json`: unique within a session and across sessions.
fn receipt_name(run: usize) -> String {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("generation-{seconds}-{run}.json")
}

fn verify(path: &Path) -> Verdict {
    match receipt::verify(path) {
        Err(e) => Verdict::Unusable(e.to_string()),
        Ok(check) => match check.first_mismatch {
            None => Verdict::Match {
                steps: check.steps_matched,
            },
            Some(m) => Verdict::Mismatch {
                steps_matched: check.steps_matched,
                step: m.step,
                message: m.message,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::Device;
    use crate::form::Form;

    fn next(worker: &Worker) -> WorkerEvent {
        worker
            .events
            .recv_timeout(Duration::from_secs(60))
            .expect("the worker answers")
    }

    fn request(model: &Path) -> RunRequest {
        let mut form = Form::new(model.to_str().unwrap());
        form.prompt.set("Hi");
        form.request().unwrap()
    }

    #[test]
    fn an_unusable_model_or_device_comes_back_as_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let worker = Worker::spawn(dir.path().to_path_buf()).unwrap();
        let not_gguf = dir.path().join("model.gguf");
        std::fs::write(&not_gguf, b"not a gguf file").unwrap();
        worker.submit(Job::Generate(request(&not_gguf)));
        assert_eq!(next(&worker), WorkerEvent::Loading);
        let WorkerEvent::Failed(message) = next(&worker) else {
            panic!("expected a failure")
        };
        assert!(message.starts_with("Model: cannot load "), "{message}");
        assert!(!message.contains('\n'), "{message}");

        let mut on_gpu = request(&not_gguf);
        on_gpu.execution.device = Device::Cuda(999);
        worker.submit(Job::Generate(on_gpu));
        let WorkerEvent::Failed(message) = next(&worker) else {
            panic!("expected a failure")
        };
        assert!(message.starts_with("Device cuda:999: "), "{message}");
    }

    /// Runs `request` to its outcome, skipping the progress events.
    fn outcome(worker: &Worker, request: RunRequest) -> RunOutcome {
        worker.submit(Job::Generate(request));
        loop {
            match next(worker) {
                WorkerEvent::Generated(outcome) => return outcome,
                WorkerEvent::Failed(message) => panic!("{message}"),
                _ => {}
            }
        }
    }

    #[test]
    fn two_partitions_give_the_bits_of_one() {
        let Some(model) = samebits_testdata::cached(samebits_testdata::SMOLLM2_GGUF) else {
            samebits_testdata::skip("the SmolLM2 GGUF is not cached (scripts/setup.sh --data)");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let worker = Worker::spawn(dir.path().to_path_buf()).unwrap();
        let mut whole = request(&model);
        whole.generate.max_tokens = 6;
        let mut staged = whole.clone();
        staged.execution.partitions = 2;
        let one = outcome(&worker, whole);
        let two = outcome(&worker, staged);
        assert_eq!(one.text, two.text);
        assert_eq!(one.logits_digest, two.logits_digest);
        let receipt: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&two.receipt).unwrap()).unwrap();
        assert_eq!(receipt["n_partitions"], 2);
        worker.submit(Job::Verify(two.receipt.clone()));
        assert_eq!(next(&worker), WorkerEvent::Verifying);
        let WorkerEvent::Verified { verdict, .. } = next(&worker) else {
            panic!("expected a verdict")
        };
        assert_eq!(verdict, Verdict::Match { steps: 6 });
    }

    #[test]
    fn a_missing_receipt_is_unusable() {
        let dir = tempfile::tempdir().unwrap();
        let worker = Worker::spawn(dir.path().to_path_buf()).unwrap();
        let missing = dir.path().join("none.json");
        worker.submit(Job::Verify(missing.clone()));
        assert_eq!(next(&worker), WorkerEvent::Verifying);
        let WorkerEvent::Verified { receipt, verdict } = next(&worker) else {
            panic!("expected a verdict")
        };
        assert_eq!(receipt, missing);
        let Verdict::Unusable(message) = verdict else {
            panic!("expected unusable, got {verdict:?}")
        };
        assert!(message.contains("cannot read"), "{message}");
    }

    #[test]
    fn panics_in_the_engine_become_failures() {
        let payload: Box<dyn Any + Send> = Box::new("boom");
        assert_eq!(panic_message(payload.as_ref()), "boom");
        let payload: Box<dyn Any + Send> = Box::new(String::from("bang"));
        assert_eq!(panic_message(payload.as_ref()), "bang");
    }
}
