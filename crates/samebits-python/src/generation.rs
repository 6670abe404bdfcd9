//! `generate` and `generate_stream`: text generation with `samebits_llm::generate`, its result
//! as a [`Generation`] (text, token ids, the generation receipt as `samebits generate --receipt`
//! writes it), and [`GenerationStream`], an iterator of text pieces fed by the same generation
//! running on a thread of its own.

use crate::errors::llm_error;
use crate::options;
use pyo3::prelude::*;
use samebits_llm::{GenerateOptions, Llm, LlmError, SamplingOptions};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel};

/// A finished generation.
#[pyclass(frozen, get_all, module = "samebits._native")]
pub struct Generation {
    /// The generated text.
    text: String,
    /// The generated token ids (the end-of-sequence token included when it was produced).
    tokens: Vec<u32>,
    /// The prompt's token ids.
    prompt_tokens: Vec<u32>,
    /// The generation receipt as JSON text (`samebits.Generation.receipt` parses it).
    receipt_json: String,
    /// Where the receipt was written, when a path was given.
    receipt_path: Option<PathBuf>,
    /// Seconds of the prefill pass and of the decode steps.
    prefill_seconds: f64,
    decode_seconds: f64,
}

#[pymethods]
impl Generation {
    /// The generation receipt as a dict, as `samebits generate --receipt` writes it.
    #[getter]
    fn receipt<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("json")?
            .call_method1("loads", (self.receipt_json.as_str(),))
    }

    fn __repr__(&self) -> String {
        format!(
            "Generation(text={:?}, tokens={} generated, prompt_tokens={})",
            self.text,
            self.tokens.len(),
            self.prompt_tokens.len()
        )
    }
}

/// What a generation needs besides the model: the prompt, the options, where the receipt goes.
struct Request {
    prompt: String,
    options: GenerateOptions,
    receipt: Option<PathBuf>,
}

/// Checks the arguments (as the CLI does, before loading) and loads the model.
#[allow(clippy::too_many_arguments)]
fn load(
    py: Python<'_>,
    model_path: &Path,
    prompt: String,
    max_tokens: i128,
    temperature: f32,
    top_k: i128,
    top_p: f32,
    seed: i128,
    chat: bool,
    device: &str,
    operation_set: &str,
    receipt: Option<PathBuf>,
) -> PyResult<(Llm, Request)> {
    let options = GenerateOptions {
        chat,
        max_tokens: options::non_negative("max_tokens", max_tokens)? as usize,
        sampling: SamplingOptions {
            temperature,
            top_k: options::non_negative("top_k", top_k)? as usize,
            top_p,
            seed: options::non_negative("seed", seed)?,
        },
    };
    options.sampling.check().map_err(|e| llm_error(e, None))?;
    let device = options::device(device)?;
    let operation_set = options::operation_set(operation_set)?;
    let llm = py
        .detach(|| Llm::load_on(model_path, operation_set, device))
        .map_err(|e| llm_error(e, Some(model_path)))?;
    let request = Request {
        prompt,
        options,
        receipt,
    };
    Ok((llm, request))
}

/// Generates with `samebits_bindings::generate` (the receipt written when a path was given).
fn run(llm: &Llm, request: &Request, on_text: impl FnMut(&str)) -> Result<Generation, LlmError> {
    let receipt_path = request.receipt.as_deref();
    let generated = samebits_bindings::generate(
        llm,
        &request.prompt,
        &request.options,
        receipt_path,
        on_text,
    )?;
    let generation = generated.generation;
    Ok(Generation {
        text: generation.text,
        tokens: generation.tokens,
        prompt_tokens: generation.prompt_tokens,
        receipt_json: serde_json::to_string(&generated.receipt).expect("receipt serialises"),
        receipt_path: request.receipt.clone(),
        prefill_seconds: generation.prefill_time.as_secs_f64(),
        decode_seconds: generation.decode_time.as_secs_f64(),
    })
}

/// Generates text from `prompt` (see `samebits.generate`).
#[pyfunction]
#[pyo3(signature = (model_path, prompt, max_tokens=128, temperature=0.0, top_k=0, top_p=1.0,
                    seed=0, chat=false, device="cpu", operation_set="reproducible",
                    receipt=None))]
#[allow(clippy::too_many_arguments)]
pub fn generate(
    py: Python<'_>,
    model_path: PathBuf,
    prompt: String,
    max_tokens: i128,
    temperature: f32,
    top_k: i128,
    top_p: f32,
    seed: i128,
    chat: bool,
    device: &str,
    operation_set: &str,
    receipt: Option<PathBuf>,
) -> PyResult<Generation> {
    let (llm, request) = load(
        py,
        &model_path,
        prompt,
        max_tokens,
        temperature,
        top_k,
        top_p,
        seed,
        chat,
        device,
        operation_set,
        receipt,
    )?;
    py.detach(|| run(&llm, &request, |_| {}))
        .map_err(|e| llm_error(e, None))
}

/// What the generating thread sends: a piece of text, then the finished generation.
enum Event {
    Text(String),
    Done(Result<Generation, LlmError>),
}

/// An iterator of the text pieces of a generation running on its own thread; after the last
/// piece, `result` holds the [`Generation`]. Dropping the stream early lets the generation
/// finish unobserved.
#[pyclass(frozen, module = "samebits._native")]
pub struct GenerationStream {
    events: Mutex<Receiver<Event>>,
    result: Mutex<Option<Py<Generation>>>,
}

/// Like `generate`, but returns a [`GenerationStream`] at once (see `samebits.generate_stream`).
#[pyfunction]
#[pyo3(signature = (model_path, prompt, max_tokens=128, temperature=0.0, top_k=0, top_p=1.0,
                    seed=0, chat=false, device="cpu", operation_set="reproducible",
                    receipt=None))]
#[allow(clippy::too_many_arguments)]
pub fn generate_stream(
    py: Python<'_>,
    model_path: PathBuf,
    prompt: String,
    max_tokens: i128,
    temperature: f32,
    top_k: i128,
    top_p: f32,
    seed: i128,
    chat: bool,
    device: &str,
    operation_set: &str,
    receipt: Option<PathBuf>,
) -> PyResult<GenerationStream> {
    let (llm, request) = load(
        py,
        &model_path,
        prompt,
        max_tokens,
        temperature,
        top_k,
        top_p,
        seed,
        chat,
        device,
        operation_set,
        receipt,
    )?;
    let (sender, events): (Sender<Event>, _) = channel();
    std::thread::spawn(move || {
        let done = run(&llm, &request, |piece| {
            if !piece.is_empty() {
                let _ = sender.send(Event::Text(piece.to_string()));
            }
        });
        let _ = sender.send(Event::Done(done));
    });
    Ok(GenerationStream {
        events: Mutex::new(events),
        result: Mutex::new(None),
    })
}

#[pymethods]
impl GenerationStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next piece of text; `StopIteration` once the generation is done (errors of the
    /// generation are raised here).
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let event = py.detach(|| self.events.lock().expect("stream lock").recv().ok());
        match event {
            Some(Event::Text(piece)) => Ok(Some(piece)),
            Some(Event::Done(Ok(generation))) => {
                *self.result.lock().expect("result lock") = Some(Py::new(py, generation)?);
                Ok(None)
            }
            Some(Event::Done(Err(e))) => Err(llm_error(e, None)),
            // The thread is gone: the stream was already finished.
            None => Ok(None),
        }
    }

    /// The finished [`Generation`] once the stream is exhausted, else `None`.
    #[getter]
    fn result(&self, py: Python<'_>) -> Option<Py<Generation>> {
        self.result
            .lock()
            .expect("result lock")
            .as_ref()
            .map(|g| g.clone_ref(py))
    }
}
