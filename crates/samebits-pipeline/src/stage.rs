//! What a rank computes: the [`Stage`] trait, its two kinds, and [`prepare`], which cuts a model
//! into N stages (the same cut on every rank) and builds the ones a process runs.
//!
//! - [`OnnxStage`]: one stage graph of [`crate::boundaries::split_graph`], compiled into a plan on
//!   its device (the CPU interpreter, or `CudaExecutor` on its GPU, where only its initializers
//!   are uploaded). An item carries the values live across the cut before it, in order.
//! - [`LlmStage`]: a [`DecoderStage`] (whole decoder layers, built only for its device) with one
//!   KV cache per sequence key. An item carries token ids (first stage) or a hidden state.

use crate::boundaries::{StageGraph, layer_stages, split_graph};
use crate::link::{Item, LAST_ROW, RELEASE};
use crate::{PipelineError, Result};
use samebits_ir::{Tensor, Value};
use samebits_llm::{DecoderStage, KvCache, Layers, Llm, LlmError};
use samebits_ops::{OperationSet, Plan, RunOptions};
use samebits_runtime::{CompileOptions, CompiledModel, Device, Executor, compile};
use sha2::{Digest, Sha256};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One stage's computation on one request.
pub trait Stage: Send {
    fn run(&mut self, item: Item) -> Result<Item>;
    /// Where it runs (`cpu`, `cuda:1 (<GPU name>)`).
    fn description(&self) -> String;
}

/// Runs a stage on every item of a group, in order.
pub fn run_group(stage: &mut dyn Stage, items: Vec<Item>) -> Result<Vec<Item>> {
    items.into_iter().map(|item| stage.run(item)).collect()
}

/// A stage of an ONNX graph on one device.
pub struct OnnxStage {
    executor: Executor,
}

impl OnnxStage {
    pub fn new(
        stage: &StageGraph,
        model: &CompiledModel,
        operation_set: OperationSet,
        device: Device,
    ) -> Result<OnnxStage> {
        let plan = Plan::build(&stage.graph, &model.model.opset_imports, operation_set, &[])?;
        Ok(OnnxStage {
            executor: Executor::new(Arc::new(plan), device)?,
        })
    }
}

impl Stage for OnnxStage {
    fn run(&mut self, item: Item) -> Result<Item> {
        let inputs = item.tensors.into_iter().map(Value::Tensor).collect();
        let outputs = self.executor.run(inputs, RunOptions::default())?;
        let tensors = outputs
            .into_iter()
            .map(|v| match v {
                Value::Tensor(t) => Ok(t),
                other => Err(PipelineError::Usage(format!(
                    "only tensors cross pipeline stages; a stage produced a {}",
                    other.kind()
                ))),
            })
            .collect::<Result<_>>()?;
        Ok(Item { tensors, ..item })
    }

    fn description(&self) -> String {
        self.executor.description()
    }
}

/// Decoder layers on one device, with the KV caches of the sequences passing through.
pub struct LlmStage {
    stage: DecoderStage,
    last: bool,
    caches: HashMap<u64, KvCache>,
}

impl LlmStage {
    pub fn new(stage: DecoderStage, block_count: usize) -> LlmStage {
        let last = stage.layers().end == block_count;
        LlmStage {
            stage,
            last,
            caches: HashMap::new(),
        }
    }
}

impl Stage for LlmStage {
    fn run(&mut self, item: Item) -> Result<Item> {
        if item.flags & RELEASE != 0 {
            self.caches.remove(&item.key);
            return Ok(Item {
                tensors: Vec::new(),
                ..item
            });
        }
        let input = item.tensors.into_iter().next().ok_or_else(|| {
            PipelineError::Link("a decoder stage received an item without a tensor".into())
        })?;
        let cache = self
            .caches
            .entry(item.key)
            .or_insert_with(|| self.stage.new_cache());
        let mut output = self.stage.forward(input, cache)?;
        if self.last && item.flags & LAST_ROW != 0 {
            output = last_row(&output)?;
        }
        Ok(Item {
            key: item.key,
            flags: item.flags,
            tensors: vec![output],
        })
    }

    fn description(&self) -> String {
        self.stage.description()
    }
}

/// The last position of `[1, S, vocab]` logits, as `[1, 1, vocab]`.
fn last_row(logits: &Tensor) -> Result<Tensor> {
    let vocab = *logits.shape().last().unwrap_or(&0);
    let data = logits.as_slice::<f32>()?;
    let row = data[data.len().saturating_sub(vocab)..].to_vec();
    Ok(Tensor::from_vec(vec![1, 1, row.len()], row)?)
}

/// A model to run as a pipeline.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelSpec {
    /// An ONNX file: stages are runs of nodes.
    Onnx(PathBuf),
    /// A llama-family decoder (GGUF file or checkpoint folder): stages are runs of layers.
    Llm(PathBuf),
}

impl ModelSpec {
    /// `.onnx` files are ONNX models; anything else is a decoder.
    pub fn from_path(path: &Path) -> ModelSpec {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("onnx") => ModelSpec::Onnx(path.to_path_buf()),
            _ => ModelSpec::Llm(path.to_path_buf()),
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            ModelSpec::Onnx(p) | ModelSpec::Llm(p) => p,
        }
    }

    /// `onnx` or `llm`, as the worker command line names it.
    pub fn kind(&self) -> &'static str {
        match self {
            ModelSpec::Onnx(_) => "onnx",
            ModelSpec::Llm(_) => "llm",
        }
    }
}

/// A model cut into stages, with the stages this process builds.
pub struct Prepared {
    /// Identifies the cut: every rank must compute the same (messages carry it).
    pub fingerprint: u64,
    /// One line per stage: what it holds (`layers 0..15, 49.3 MB`).
    pub summary: Vec<String>,
    /// The stages built, by rank.
    pub stages: Vec<(usize, Box<dyn Stage>)>,
    /// The whole ONNX model (compiled on the CPU; its graph is what was cut).
    pub onnx: Option<CompiledModel>,
    /// The decoder's configuration and tokenizer (its stages taken out).
    pub llm: Option<Llm>,
}

/// Cuts `spec` into `n` stages and builds stage `rank` on `device` for each `(rank, device)` of
/// `build`. Errors, before any work, when the model has fewer places than stages.
pub fn prepare(
    spec: &ModelSpec,
    n: usize,
    operation_set: OperationSet,
    build: &[(usize, Device)],
) -> Result<Prepared> {
    if n == 0 {
        return Err(PipelineError::Usage(
            "--n-partitions must be at least 1".into(),
        ));
    }
    match spec {
        ModelSpec::Onnx(path) => {
            let model = compile(
                path.as_path(),
                &CompileOptions {
                    requires_reproducibility: operation_set.is_reproducible(),
                    operation_set: Some(operation_set),
                    ..Default::default()
                },
            )?;
            let cut = split_graph(&model.model.graph, n)?;
            let summary: Vec<String> = cut
                .iter()
                .map(|s| {
                    format!(
                        "nodes {:?}, {} parameter bytes, receives {} values",
                        s.nodes,
                        s.param_bytes,
                        s.inputs.len()
                    )
                })
                .collect();
            let fingerprint = fingerprint(&format!(
                "onnx {n} {:?} {} {summary:?}",
                model.model_sha256, operation_set
            ));
            let mut stages: Vec<(usize, Box<dyn Stage>)> = Vec::new();
            for &(rank, device) in build {
                let stage = OnnxStage::new(&cut[rank], &model, operation_set, device)?;
                stages.push((rank, Box::new(stage)));
            }
            Ok(Prepared {
                fingerprint,
                summary,
                stages,
                onnx: Some(model),
                llm: None,
            })
        }
        ModelSpec::Llm(path) => {
            let cut: RefCell<(Vec<std::ops::Range<usize>>, Vec<u64>)> = RefCell::default();
            let choose = |_: &samebits_gguf::ModelConfig, bytes: &[u64]| {
                let ranges = layer_stages(bytes, n).map_err(|e| LlmError::Usage(e.to_string()))?;
                *cut.borrow_mut() = (ranges.clone(), bytes.to_vec());
                Ok(build
                    .iter()
                    .map(|&(rank, device)| (ranges[rank].clone(), device))
                    .collect())
            };
            let mut llm = Llm::load_layers(path, operation_set, Layers::Stages(&choose)).map_err(
                |e| match e {
                    LlmError::Usage(m) => PipelineError::Usage(m),
                    e => e.into(),
                },
            )?;
            let (ranges, bytes) = cut.into_inner();
            let summary: Vec<String> = ranges
                .iter()
                .map(|r| {
                    let b: u64 = bytes[r.clone()].iter().sum();
                    format!("layers {r:?}, {b} parameter bytes")
                })
                .collect();
            let fingerprint = fingerprint(&format!(
                "llm {n} {} {operation_set} {summary:?}",
                llm.config.block_count
            ));
            let block_count = llm.config.block_count;
            let stages = build
                .iter()
                .map(|&(rank, _)| rank)
                .zip(llm.take_stages())
                .map(|(rank, s)| {
                    (
                        rank,
                        Box::new(LlmStage::new(s, block_count)) as Box<dyn Stage>,
                    )
                })
                .collect();
            Ok(Prepared {
                fingerprint,
                summary,
                stages,
                onnx: None,
                llm: Some(llm),
            })
        }
    }
}

fn fingerprint(text: &str) -> u64 {
    let digest = Sha256::digest(text.as_bytes());
    u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}
