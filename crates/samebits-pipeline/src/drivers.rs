//! What rank 0 feeds the pipeline, micro-batched: groups of `micro_batch` requests travel
//! together, one group per stage at a time.
//!
//! - [`run_requests`]: ONNX requests (each a full set of graph inputs) → their outputs.
//! - [`run_sequences`]: decoder sequences, each a [`Program`] that chooses its next tokens from
//!   its last logits: generation ([`generate_many`]), one prefill ([`prefill`]), or a fixed
//!   token-by-token decode ([`decode_fixed`]). A group goes back in as soon as it comes out, so
//!   with G groups min(G, N) stages are busy. Every stage keeps each sequence's KV cache for its
//!   own layers; a finished sequence's caches are released by a `RELEASE` item.

use crate::link::{Item, LAST_ROW, RELEASE};
use crate::worker::Driver;
use crate::{Pipeline, PipelineError, Result};
use samebits_ir::{Tensor, Value};
use samebits_llm::{GenerateOptions, Generation, Llm, Sequence};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Runs ONNX `requests` (inputs in the model's input order), `micro_batch` per group; returns
/// each request's outputs in the model's output order.
pub fn run_requests(
    pipeline: &mut Pipeline,
    requests: Vec<Vec<Tensor>>,
    micro_batch: usize,
) -> Result<Vec<Vec<Tensor>>> {
    let count = requests.len();
    let items: Vec<Item> = requests
        .into_iter()
        .enumerate()
        .map(|(i, tensors)| Item {
            key: i as u64,
            flags: 0,
            tensors,
        })
        .collect();
    let mut driver = Requests {
        groups: chunks(items, micro_batch)?.into(),
        results: vec![None; count],
    };
    pipeline.drive(&mut driver)?;
    driver
        .results
        .into_iter()
        .map(|r| r.ok_or_else(|| PipelineError::Link("a request came back empty".into())))
        .collect()
}

/// [`run_requests`] of one request given by name; outputs by name, in the model's order.
pub fn run_named(
    pipeline: &mut Pipeline,
    model: &samebits_runtime::CompiledModel,
    inputs: &BTreeMap<String, Value>,
) -> Result<Vec<(String, Value)>> {
    let request = ordered_inputs(model, inputs)?;
    let outputs = run_requests(pipeline, vec![request], 1)?.remove(0);
    Ok(model
        .output_names()
        .into_iter()
        .zip(outputs.into_iter().map(Value::Tensor))
        .collect())
}

/// Named inputs in the model's input order (every input exactly once, tensors only).
pub fn ordered_inputs(
    model: &samebits_runtime::CompiledModel,
    inputs: &BTreeMap<String, Value>,
) -> Result<Vec<Tensor>> {
    let names = model.input_names();
    if let Some(extra) = inputs.keys().find(|k| !names.contains(k)) {
        return Err(PipelineError::Usage(format!(
            "the model has no input named \"{extra}\" (its inputs: {})",
            names.join(", ")
        )));
    }
    names
        .iter()
        .map(|name| match inputs.get(name) {
            Some(Value::Tensor(t)) => Ok(t.clone()),
            Some(other) => Err(PipelineError::Usage(format!(
                "input \"{name}\" is a {}; only tensors cross pipeline stages",
                other.kind()
            ))),
            None => Err(PipelineError::Usage(format!("missing input \"{name}\""))),
        })
        .collect()
}

fn chunks<T>(items: Vec<T>, size: usize) -> Result<Vec<Vec<T>>> {
    if size == 0 {
        return Err(PipelineError::Usage(
            "--micro-batch must be at least 1".into(),
        ));
    }
    let mut groups: Vec<Vec<T>> = Vec::new();
    for item in items {
        match groups.last_mut() {
            Some(g) if g.len() < size => g.push(item),
            _ => groups.push(vec![item]),
        }
    }
    Ok(groups)
}

struct Requests {
    groups: VecDeque<Vec<Item>>,
    results: Vec<Option<Vec<Tensor>>>,
}

impl Driver for Requests {
    fn next_group(&mut self) -> Result<Option<Vec<Item>>> {
        Ok(self.groups.pop_front())
    }

    fn finish(&mut self, items: Vec<Item>) -> Result<()> {
        for item in items {
            self.results[item.key as usize] = Some(item.tensors);
        }
        Ok(())
    }

    fn done(&self) -> bool {
        self.groups.is_empty()
    }
}

/// A decoder sequence's behaviour: its first tokens, then its next tokens from each result.
pub trait Program {
    /// The tokens of the first forward step (a prompt).
    fn first(&mut self) -> Vec<u32>;
    /// Takes the logits of the last step; returns the next step's tokens, or `None` when done.
    fn next(&mut self, logits: &Tensor) -> Result<Option<Vec<u32>>>;
    /// Whether the last stage may return only the last position's logits.
    fn last_row_only(&self) -> bool;
}

/// When a sequence was first injected, got its first logits, and finished.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub started: Instant,
    pub first_result: Option<Instant>,
    pub finished: Option<Instant>,
}

impl Timing {
    /// Time to the first logits (the prefill), and from there to the end (the decode).
    pub fn split(&self) -> (Duration, Duration) {
        let first = self.first_result.unwrap_or(self.started);
        let end = self.finished.unwrap_or(first);
        (first - self.started, end - first)
    }
}

/// Sequence keys, unique for the process's lifetime (stages key their KV caches by them).
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Running,
    Release,
    Done,
}

struct Running {
    key: u64,
    input: Vec<u32>,
    phase: Phase,
    timing: Option<Timing>,
}

struct Sequences<'p, P> {
    programs: &'p mut [P],
    sequences: Vec<Running>,
    /// Sequence indices per group, and whether the group is in the pipeline now.
    groups: Vec<(Vec<usize>, bool)>,
    by_key: HashMap<u64, usize>,
    /// Round-robin start for the next ready group.
    cursor: usize,
}

impl<P: Program> Driver for Sequences<'_, P> {
    fn next_group(&mut self) -> Result<Option<Vec<Item>>> {
        let count = self.groups.len();
        for offset in 0..count {
            let g = (self.cursor + offset) % count;
            if self.groups[g].1 {
                continue;
            }
            let mut items = Vec::new();
            for &s in &self.groups[g].0 {
                let seq = &mut self.sequences[s];
                match seq.phase {
                    Phase::Running => {
                        let ids: Vec<i64> = seq.input.iter().map(|&t| i64::from(t)).collect();
                        let flags = match self.programs[s].last_row_only() {
                            true => LAST_ROW,
                            false => 0,
                        };
                        seq.timing.get_or_insert(Timing {
                            started: Instant::now(),
                            first_result: None,
                            finished: None,
                        });
                        items.push(Item {
                            key: seq.key,
                            flags,
                            tensors: vec![Tensor::from_vec(vec![1, ids.len()], ids)?],
                        });
                    }
                    Phase::Release => items.push(Item {
                        key: seq.key,
                        flags: RELEASE,
                        tensors: Vec::new(),
                    }),
                    Phase::Done => {}
                }
            }
            if !items.is_empty() {
                self.groups[g].1 = true;
                self.cursor = (g + 1) % count;
                return Ok(Some(items));
            }
        }
        Ok(None)
    }

    fn finish(&mut self, items: Vec<Item>) -> Result<()> {
        let mut group = None;
        for item in items {
            let s = *self
                .by_key
                .get(&item.key)
                .ok_or_else(|| PipelineError::Link(format!("unknown sequence {}", item.key)))?;
            group = Some(s);
            let seq = &mut self.sequences[s];
            if item.flags & RELEASE != 0 {
                seq.phase = Phase::Done;
                continue;
            }
            let logits = item
                .tensors
                .first()
                .ok_or_else(|| PipelineError::Link("a sequence's logits came back empty".into()))?;
            let now = Instant::now();
            if let Some(t) = seq.timing.as_mut() {
                t.first_result.get_or_insert(now);
            }
            match self.programs[s].next(logits)? {
                Some(tokens) => seq.input = tokens,
                None => {
                    seq.phase = Phase::Release;
                    if let Some(t) = seq.timing.as_mut() {
                        t.finished = Some(now);
                    }
                }
            }
        }
        if let Some(s) = group {
            let g = self
                .groups
                .iter()
                .position(|(members, _)| members.contains(&s))
                .expect("every sequence has a group");
            self.groups[g].1 = false;
        }
        Ok(())
    }

    fn done(&self) -> bool {
        self.sequences.iter().all(|s| s.phase == Phase::Done)
    }
}

/// Runs decoder `programs` through the pipeline, `micro_batch` sequences per group; returns each
/// sequence's timing.
pub fn run_sequences<P: Program>(
    pipeline: &mut Pipeline,
    programs: &mut [P],
    micro_batch: usize,
) -> Result<Vec<Timing>> {
    let mut sequences = Vec::with_capacity(programs.len());
    for program in programs.iter_mut() {
        let input = program.first();
        if input.is_empty() {
            return Err(PipelineError::Usage(
                "a sequence has no tokens to run".into(),
            ));
        }
        sequences.push(Running {
            key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            input,
            phase: Phase::Running,
            timing: None,
        });
    }
    let by_key = sequences
        .iter()
        .enumerate()
        .map(|(i, s)| (s.key, i))
        .collect();
    let indices: Vec<usize> = (0..sequences.len()).collect();
    let groups = chunks(indices, micro_batch)?
        .into_iter()
        .map(|g| (g, false))
        .collect();
    let mut driver = Sequences {
        programs,
        sequences,
        groups,
        by_key,
        cursor: 0,
    };
    pipeline.drive(&mut driver)?;
    Ok(driver
        .sequences
        .iter()
        .map(|s| s.timing.expect("every sequence ran"))
        .collect())
}

/// Where generated text goes: `(prompt index, text)`.
type TextSink<'o> = RefCell<&'o mut dyn FnMut(usize, &str)>;

/// A generation: a [`Sequence`] fed with each step's last logits row.
struct Generating<'a, 'f, 'o> {
    sequence: Sequence<'a>,
    index: usize,
    vocab: usize,
    on_text: &'f TextSink<'o>,
}

impl Program for Generating<'_, '_, '_> {
    fn first(&mut self) -> Vec<u32> {
        self.sequence.prompt_tokens().to_vec()
    }

    fn next(&mut self, logits: &Tensor) -> Result<Option<Vec<u32>>> {
        let data = logits.as_slice::<f32>()?;
        let row = &data[data.len() - self.vocab..];
        let index = self.index;
        let mut on_text = self.on_text.borrow_mut();
        Ok(self
            .sequence
            .step(row, |text| on_text(index, text))?
            .map(|token| vec![token]))
    }

    fn last_row_only(&self) -> bool {
        true
    }
}

/// Generates from every prompt at once, `micro_batch` sequences per group, calling
/// `on_text(prompt index, text)` as each piece of text is complete. Each generation's tokens and
/// logits are those [`samebits_llm::generate`] gives on one device.
pub fn generate_many(
    pipeline: &mut Pipeline,
    llm: &Llm,
    prompts: &[String],
    options: &GenerateOptions,
    micro_batch: usize,
    on_text: &mut dyn FnMut(usize, &str),
) -> Result<Vec<Generation>> {
    let on_text = RefCell::new(on_text);
    let mut programs = Vec::with_capacity(prompts.len());
    for (index, prompt) in prompts.iter().enumerate() {
        programs.push(Generating {
            sequence: Sequence::start(llm, prompt, options)?,
            index,
            vocab: llm.vocab_size(),
            on_text: &on_text,
        });
    }
    let timings = run_sequences(pipeline, &mut programs, micro_batch)?;
    let mut on_text = on_text.borrow_mut();
    Ok(programs
        .into_iter()
        .zip(timings)
        .map(|(g, timing)| {
            let (prefill, decode) = timing.split();
            g.sequence
                .finish(|text| on_text(g.index, text), prefill, decode)
        })
        .collect())
}

/// Runs `tokens` from an empty cache in one step; returns all their logits rows.
struct Prefill {
    tokens: Vec<u32>,
    logits: Vec<f32>,
    last_row_only: bool,
}

impl Program for Prefill {
    fn first(&mut self) -> Vec<u32> {
        self.tokens.clone()
    }

    fn next(&mut self, logits: &Tensor) -> Result<Option<Vec<u32>>> {
        self.logits = logits.as_slice::<f32>()?.to_vec();
        Ok(None)
    }

    fn last_row_only(&self) -> bool {
        self.last_row_only
    }
}

/// The logits of every position of `tokens`, run in one prefill from an empty cache (what
/// generation receipts are verified with).
pub fn prefill(pipeline: &mut Pipeline, tokens: &[u32]) -> Result<Vec<f32>> {
    let mut program = [Prefill {
        tokens: tokens.to_vec(),
        logits: Vec::new(),
        last_row_only: false,
    }];
    run_sequences(pipeline, &mut program, 1)?;
    let [program] = program;
    Ok(program.logits)
}

/// Prefills of several sequences at once (the last row of each), `micro_batch` per group;
/// returns each one's timing.
pub fn prefill_many(
    pipeline: &mut Pipeline,
    sequences: &[Vec<u32>],
    micro_batch: usize,
) -> Result<(Vec<Vec<f32>>, Vec<Timing>)> {
    let mut programs: Vec<Prefill> = sequences
        .iter()
        .map(|tokens| Prefill {
            tokens: tokens.clone(),
            logits: Vec::new(),
            last_row_only: true,
        })
        .collect();
    let timings = run_sequences(pipeline, &mut programs, micro_batch)?;
    Ok((programs.into_iter().map(|p| p.logits).collect(), timings))
}

/// Feeds fixed tokens one per step (a decode whose tokens do not depend on its logits).
struct FixedDecode {
    tokens: Vec<u32>,
    next: usize,
    last_rows: Vec<f32>,
}

impl Program for FixedDecode {
    fn first(&mut self) -> Vec<u32> {
        self.next = 1;
        self.tokens[..1].to_vec()
    }

    fn next(&mut self, logits: &Tensor) -> Result<Option<Vec<u32>>> {
        self.last_rows.extend_from_slice(logits.as_slice::<f32>()?);
        let token = self.tokens.get(self.next).copied();
        self.next += 1;
        Ok(token.map(|t| vec![t]))
    }

    fn last_row_only(&self) -> bool {
        true
    }
}

/// Decodes each of `sequences` token by token from an empty cache (several in flight,
/// `micro_batch` per group); returns each one's logits rows and timing.
pub fn decode_fixed(
    pipeline: &mut Pipeline,
    sequences: &[Vec<u32>],
    micro_batch: usize,
) -> Result<(Vec<Vec<f32>>, Vec<Timing>)> {
    let mut programs: Vec<FixedDecode> = sequences
        .iter()
        .map(|tokens| FixedDecode {
            tokens: tokens.clone(),
            next: 0,
            last_rows: Vec::new(),
        })
        .collect();
    let timings = run_sequences(pipeline, &mut programs, micro_batch)?;
    Ok((programs.into_iter().map(|p| p.last_rows).collect(), timings))
}
