//! [`Llm`]: a llama-family decoder built as a samebits IR graph and compiled once into a
//! [`Plan`]; [`Llm::forward`] runs it over new tokens with a [`KvCache`]. The model is a GGUF file
//! or a Hugging Face checkpoint folder ([`crate::hf`]); both give their weights through one
//! [`WeightSource`] (GGUF names, GGUF's Q/K row order) to the one graph builder below, so the two
//! differ only in where the weights and hyper-parameters come from.
//!
//! The graph is standard ONNX (opset 23) plus the two GGUF weight ops of domain `samebits`:
//!
//! ```text
//! x = GatherGguf(token_embd, input_ids)                                  [1, S, dim]
//! per layer i:
//!   h = RMSNormalization(x, attn_norm)
//!   q, k, v = MatMulGguf(h, attn_q | attn_k | attn_v) (+ attn_q | attn_k | attn_v bias, if any)
//!   q, k = Reshape(RMSNormalization(Reshape(q | k, [heads, head_dim]), attn_q_norm | attn_k_norm))
//!          (qwen3 only: each head's features normalized, in the adjacent-pair order below)
//!   q, k = RotaryEmbedding(q | k, rotary_cos, rotary_sin; interleaved)  (GGUF permutes Q/K rows
//!                                                                          for adjacent pairs)
//!   a, present_key_i, present_value_i = Attention(q, k, v, -, past_key_i, past_value_i;
//!                                                 is_causal, GQA)
//!   x = x + MatMulGguf(a, attn_output) (+ attn_output bias, if any)
//!       (Gemma 3: RMSNormalization(.., post_attention_norm) of the product first)
//!   h = RMSNormalization(x, ffn_norm)
//!   g, u = MatMulGguf(h, ffn_gate | ffn_up)
//!   x = x + MatMulGguf((g * Sigmoid(g)) * u, ffn_down)
//! logits = MatMulGguf(RMSNormalization(x, output_norm), output | token_embd (tied))
//! ```
//!
//! Before it is compiled, the graph is rewritten by samebits-passes' decoder fusion: each SiLU
//! gate becomes one `samebits::SiluGate` node, each product with its residual Add one
//! `samebits::MatMulGgufAdd`, and each norm with the products of its output (and their
//! rotaries or gate) one `samebits::GgufProducts` (the same bits: their CPU evaluation runs the
//! nodes they replace; a GPU runs each as one launch when a decode step's few rows fit it). The
//! attention with its output product (`samebits::AttentionProduct`) is fused only with
//! `SAMEBITS_CUDA_FUSE=all` (see `fusion_rules`).
//!
//! Inputs `input_ids` `[1, S]` i64, `rotary_cos`, `rotary_sin` `[1, S, rotary_dim / 2]` (the rows
//! of [`rotary_tables`] for the S positions, computed per call so that no table for the whole
//! context is held) and `past_key_i`, `past_value_i`
//! `[1, kv_heads, P, head_dim]` f32 (P = 0 for a prefill); outputs `logits` `[1, S, vocab]` and
//! `present_key_i`, `present_value_i` `[1, kv_heads, P + S, head_dim]`. Every op computes each
//! token's row in the contract's canonical order, independent of S and P, so one prefill over a
//! sequence and token-by-token decode give the same logits bit for bit. The graph is the same
//! whatever device runs it: matrices stay in their ggml rows (the CPU's `MatMulGguf` packs the
//! row panels of its kernels itself, on first use).
//!
//! Each stage also compiles the batched form of its graph (`crate::batched`: several sequences'
//! rows at once, each attending to its own cache), over the same initializers.

use crate::batched::batched_graph;
use crate::weights::{GgufWeights, MatrixWeight, WeightSource};
use crate::{LlmError, Result};
use samebits_gguf::{GgufFile, ModelConfig};
use samebits_ir::{
    Attribute, DType, Dim, Graph, Node, OpsetImports, Shape, Tensor, Value, ValueInfo, ValueType,
};
use samebits_ops::{OperationSet, Plan};
use samebits_passes::decoder_fusion;
use samebits_runtime::pool::run_in_pool;
use samebits_runtime::{Device, Executor, IoValue};
use samebits_tokenizer::TextTokenizer;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A loaded model: its configuration, tokenizer, chat template and compiled plan (whose
/// initializers view the memory-mapped weight files).
pub struct Llm {
    /// The GGUF file or checkpoint folder.
    pub path: PathBuf,
    pub config: ModelConfig,
    pub tokenizer: TextTokenizer,
    /// The chat template's Jinja source, when the model has one.
    pub chat_template: Option<String>,
    pub operation_set: OperationSet,
    /// The stages this process runs, in layer order (one stage of all layers unless the model
    /// was loaded with [`Layers::Stages`]).
    stages: Vec<DecoderStage>,
}

/// Chooses a process's stages from the configuration and [`layer_bytes`]: ranges of
/// consecutive layers, each with its device.
pub type ChooseStages<'a> = &'a dyn Fn(&ModelConfig, &[u64]) -> Result<Vec<(Range<usize>, Device)>>;

/// Which decoder layers a load builds, and where they run.
pub enum Layers<'a> {
    /// The whole decoder as one stage on one device.
    All(Device),
    /// The stages `choose` returns, given the model's configuration and [`layer_bytes`]:
    /// ranges of consecutive layers, each with its device (the rest of the model is not built).
    Stages(ChooseStages<'a>),
}

/// Layers `layers` of the decoder compiled for one device: a pipeline stage. The first stage
/// (`layers.start == 0`) takes token ids `[1, S]` and embeds them, the others take the hidden
/// state `[1, S, dim]` of the stage before; the last (`layers.end == block_count`) returns the
/// logits `[1, S, vocab]`, the others their hidden state. Each stage keeps the KV cache of its
/// own layers. Every layer computes the same bits whichever stage it is in, so a chain of
/// stages gives the logits of the whole decoder bit for bit.
pub struct DecoderStage {
    layers: Range<usize>,
    config: ModelConfig,
    executor: Executor,
    /// The stage's batched plan (crate::batched), on the same device.
    batched: Executor,
}

/// What a model file or folder gives besides its weights: where it is, its configuration,
/// tokenizer and chat template.
pub struct LoadSource<'a> {
    pub path: &'a Path,
    pub config: ModelConfig,
    pub tokenizer: TextTokenizer,
    pub chat_template: Option<String>,
}

/// The keys and values of the tokens processed so far, per layer (of a stage, or of every
/// stage in order). On a GPU they stay on the device between calls, where Attention appends to
/// them in place.
pub struct KvCache {
    /// `[key_a, value_a, key_a+1, value_a+1, ...]`, each `[1, kv_heads, len, head_dim]`.
    pub(crate) layers: Vec<IoValue>,
    pub(crate) len: usize,
}

impl KvCache {
    /// Tokens held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Llm {
    /// Opens the model at `path` (a GGUF file, or a Hugging Face checkpoint folder) and compiles
    /// its graph for `operation_set`, on the CPU.
    pub fn load(path: &Path, operation_set: OperationSet) -> Result<Llm> {
        Llm::load_on(path, operation_set, Device::Cpu)
    }

    /// [`Llm::load`] running on `device` (the logits have the same bits on every device).
    pub fn load_on(path: &Path, operation_set: OperationSet, device: Device) -> Result<Llm> {
        Llm::load_layers(path, operation_set, Layers::All(device))
    }

    /// [`Llm::load`] building only the stages `layers` asks for.
    pub fn load_layers(path: &Path, operation_set: OperationSet, layers: Layers) -> Result<Llm> {
        if path.is_dir() {
            return crate::hf::load_decoder_layers(path, operation_set, layers);
        }
        let mut file = GgufFile::open(path)?;
        let config = ModelConfig::from_gguf(&file)?;
        let tokenizer = TextTokenizer::from_gguf(&file)?;
        let chat_template = match file.metadata().get("tokenizer.chat_template") {
            Some(_) => Some(file.metadata().str("tokenizer.chat_template")?.to_string()),
            None => None,
        };
        // The tokenizer holds the vocabulary and merges now; free the metadata's copy before
        // the weights are packed (peak memory).
        file.remove_metadata(&[
            "tokenizer.ggml.tokens",
            "tokenizer.ggml.token_type",
            "tokenizer.ggml.merges",
        ]);
        let config_copy = config.clone();
        let weights = GgufWeights {
            file: &file,
            config: &config_copy,
        };
        let source = LoadSource {
            path,
            config,
            tokenizer,
            chat_template,
        };
        Llm::build_layers(source, &weights, operation_set, layers)
    }

    /// Compiles the decoder described by `source` over `weights` for `device`.
    pub fn build(
        source: LoadSource,
        weights: &dyn WeightSource,
        operation_set: OperationSet,
        device: Device,
    ) -> Result<Llm> {
        Llm::build_layers(source, weights, operation_set, Layers::All(device))
    }

    /// [`Llm::build`] of the stages `layers` asks for.
    pub fn build_layers(
        source: LoadSource,
        weights: &dyn WeightSource,
        operation_set: OperationSet,
        layers: Layers,
    ) -> Result<Llm> {
        let LoadSource {
            path,
            config,
            tokenizer,
            chat_template,
        } = source;
        let chosen = match layers {
            Layers::All(device) => vec![(0..config.block_count, device)],
            Layers::Stages(choose) => choose(&config, &layer_bytes(weights, &config)?)?,
        };
        let mut stages = Vec::with_capacity(chosen.len());
        for (range, device) in chosen {
            if range.is_empty() || range.end > config.block_count {
                return Err(LlmError::Usage(format!(
                    "layers {range:?} are no stage of a decoder of {} layers",
                    config.block_count
                )));
            }
            let (mut graph, opsets) = build_graph(weights, &config, &range)?;
            let mut batched = batched_graph(&graph, range.end == config.block_count)?;
            let compile = |graph: &mut Graph| -> Result<Executor> {
                decoder_fusion::run(graph, &fusion_rules());
                let plan = Plan::build(graph, &opsets, operation_set, &[])?;
                Ok(Executor::new(Arc::new(plan), device)?)
            };
            stages.push(DecoderStage {
                layers: range,
                config: config.clone(),
                executor: compile(&mut graph)?,
                batched: compile(&mut batched)?,
            });
        }
        Ok(Llm {
            path: path.to_path_buf(),
            config,
            tokenizer,
            chat_template,
            operation_set,
            stages,
        })
    }

    /// The stages this process holds, in layer order.
    pub fn stages(&self) -> &[DecoderStage] {
        &self.stages
    }

    /// Takes the stages out (to run them elsewhere, as pipeline stages); the model keeps its
    /// configuration and tokenizer, and [`Llm::forward`] errors from then on.
    pub fn take_stages(&mut self) -> Vec<DecoderStage> {
        std::mem::take(&mut self.stages)
    }

    /// Where the model runs, as receipts record it (`cpu`, `cuda:0 (<GPU name>)`; stages on
    /// several devices are joined with ` + `).
    pub fn device_description(&self) -> String {
        let mut devices: Vec<String> = self.stages.iter().map(|s| s.description()).collect();
        devices.dedup();
        devices.join(" + ")
    }

    pub fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }

    /// A cache holding no tokens, for every layer of this process's stages.
    pub fn new_cache(&self) -> KvCache {
        let layers = self.stages.iter().map(|s| s.layers.len()).sum();
        empty_cache(&self.config, layers)
    }

    /// Runs `tokens` after the tokens already in `cache` (at positions `cache.len()..`), appends
    /// their keys and values to it and returns their logits, `tokens.len()` rows of
    /// [`Llm::vocab_size`] values. Needs stages covering every layer.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Vec<f32>> {
        self.run(tokens, cache, false)
    }

    /// [`Llm::forward`] returning only the logits of the last token, [`Llm::vocab_size`]
    /// values (the same bits as the last row of `forward`): what generation samples from
    /// after a prefill. On a GPU the other rows never leave the device.
    pub fn forward_last(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Vec<f32>> {
        self.run(tokens, cache, true)
    }

    /// [`Llm::forward`], or with `last_row` only the last token's logits.
    fn run(&self, tokens: &[u32], cache: &mut KvCache, last_row: bool) -> Result<Vec<f32>> {
        self.check_whole()?;
        let ids: Vec<i64> = tokens.iter().map(|&t| i64::from(t)).collect();
        let mut x = Tensor::from_vec(vec![1, tokens.len()], ids)?;
        let mut layers = std::mem::take(&mut cache.layers).into_iter();
        let mut present = Vec::new();
        let last = self.stages.len() - 1;
        for (n, stage) in self.stages.iter().enumerate() {
            let mut part = KvCache {
                layers: layers.by_ref().take(2 * stage.layers.len()).collect(),
                len: cache.len,
            };
            x = stage.run(x, &mut part, last_row && n == last)?;
            present.append(&mut part.layers);
        }
        cache.layers = present;
        cache.len += tokens.len();
        Ok(x.as_slice::<f32>()?.to_vec())
    }

    /// Running the whole decoder needs stages covering every layer, in order.
    pub(crate) fn check_whole(&self) -> Result<()> {
        let mut next = 0;
        for stage in &self.stages {
            if stage.layers.start != next {
                break;
            }
            next = stage.layers.end;
        }
        if next != self.config.block_count || self.stages.is_empty() {
            return Err(LlmError::Usage(format!(
                "this process holds layers {:?} of {}, not the whole decoder",
                self.stages
                    .iter()
                    .map(|s| s.layers.clone())
                    .collect::<Vec<_>>(),
                self.config.block_count
            )));
        }
        Ok(())
    }
}

fn empty_cache(c: &ModelConfig, layers: usize) -> KvCache {
    let empty = Tensor::from_vec(vec![1, c.head_count_kv, 0, c.head_dim], Vec::<f32>::new())
        .expect("an empty tensor");
    KvCache {
        layers: vec![IoValue::Host(Value::Tensor(empty)); 2 * layers],
        len: 0,
    }
}

impl DecoderStage {
    /// The decoder layers of this stage.
    pub fn layers(&self) -> Range<usize> {
        self.layers.clone()
    }

    /// The model's configuration.
    pub(crate) fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// An error when `end` tokens exceed the model's context.
    pub(crate) fn check_context(&self, end: usize) -> Result<()> {
        match end > self.config.context_length {
            true => Err(LlmError::Usage(format!(
                "{end} tokens exceed the model's context of {} tokens",
                self.config.context_length
            ))),
            false => Ok(()),
        }
    }

    /// The stage's inputs before its caches, for rows at `positions`: `input`, then the rotary
    /// tables of those positions (and, for Gemma 3, the local layers' own).
    pub(crate) fn leading_inputs(
        &self,
        input: Tensor,
        positions: impl ExactSizeIterator<Item = usize> + Clone,
    ) -> Vec<IoValue> {
        let c = &self.config;
        let mut inputs = vec![IoValue::Host(input.into())];
        let mut tables = |base: f32, divisors: Option<&[f32]>| {
            let (cos, sin) =
                rotary_tables(positions.clone(), c.rope_dimension_count, base, divisors);
            inputs.extend([IoValue::Host(cos.into()), IoValue::Host(sin.into())]);
        };
        tables(c.rope_freq_base, c.rope_freq_divisors.as_deref());
        if let Some(local) = c.variant.local_layers {
            tables(local.rope_freq_base, None);
        }
        inputs
    }

    /// Whether the stage runs on the CPU.
    pub(crate) fn on_cpu(&self) -> bool {
        self.executor.device() == Device::Cpu
    }

    /// The executor of the stage's batched plan (crate::batched).
    pub(crate) fn batched(&self) -> &samebits_runtime::Executor {
        &self.batched
    }

    /// Where the stage runs, as receipts record it (`cpu`, `cuda:0 (<GPU name>)`).
    pub fn description(&self) -> String {
        self.executor.description()
    }

    /// A cache holding no tokens for this stage's layers.
    pub fn new_cache(&self) -> KvCache {
        empty_cache(&self.config, self.layers.len())
    }

    /// Runs the stage over `input` (token ids `[1, S]` for the first stage, else the previous
    /// stage's hidden state `[1, S, dim]`) at positions `cache.len()..`, appends the keys and
    /// values of its layers to `cache` and returns its output: the hidden state `[1, S, dim]`,
    /// or for the last stage the logits `[1, S, vocab]`.
    pub fn forward(&self, input: Tensor, cache: &mut KvCache) -> Result<Tensor> {
        self.run(input, cache, false)
    }

    /// [`DecoderStage::forward`] returning only the last position's row, `[1, 1, width]` (on a
    /// GPU the other rows stay on the device).
    pub fn forward_last(&self, input: Tensor, cache: &mut KvCache) -> Result<Tensor> {
        self.run(input, cache, true)
    }

    fn run(&self, input: Tensor, cache: &mut KvCache, last_row: bool) -> Result<Tensor> {
        let s = input.shape().get(1).copied().unwrap_or(0);
        let end = cache.len + s;
        self.check_context(end)?;
        let mut inputs = self.leading_inputs(input, cache.len..end);
        let tables = inputs.len() - 1;
        inputs.append(&mut cache.layers);
        // Logits come back to the host (only the last row's with `last_row`: the output stays
        // on the device until then); the cache stays where it was computed.
        let keep: Vec<bool> = (0..inputs.len() - tables)
            .map(|i| i > 0 || last_row)
            .collect();
        let mut outputs = run_on_pool(&self.executor, inputs, &keep)?.into_iter();
        let first = outputs.next();
        let output = match (first, last_row) {
            (Some(IoValue::Host(output)), false) => output.into_tensor()?,
            (Some(value), true) => {
                let shape = match &value {
                    IoValue::Host(v) => v.as_tensor()?.shape().to_vec(),
                    IoValue::Device(t) => t.shape().to_vec(),
                };
                let width = shape.last().copied().unwrap_or(0);
                let row = self.executor.download_tail(&value, width)?;
                Tensor::from_vec(vec![1, 1, width], row)?
            }
            _ => unreachable!("the plan returns its hidden state or logits first, on the host"),
        };
        cache.layers = outputs.collect();
        cache.len = end;
        Ok(output)
    }
}

/// Runs one of a stage's plans on one thread of the rayon pool, so that the ops' parallel loops
/// start from inside it (work stealing); on the CPU the pool's other threads stay awake for the
/// length of the run (samebits_runtime::pool).
pub(crate) fn run_on_pool(
    executor: &Executor,
    inputs: Vec<IoValue>,
    keep: &[bool],
) -> Result<Vec<IoValue>> {
    let on_cpu = executor.device() == Device::Cpu;
    Ok(run_in_pool(on_cpu, || executor.run_io(inputs, keep))?)
}

/// The parameter bytes of each decoder layer: the initializer bytes of the stage graph of that
/// layer alone, with matrices in ggml rows (the layout of the model file, whatever device a
/// stage runs on), the embedding counted with layer 0 and the output head with the last layer.
/// A stage of layers `a..b` holds the sum of its layers' bytes (docs/pipeline.md).
pub fn layer_bytes(weights: &dyn WeightSource, c: &ModelConfig) -> Result<Vec<u64>> {
    (0..c.block_count)
        .map(|i| {
            let (graph, _) = build_graph(weights, c, &(i..i + 1))?;
            let mut bytes = 0u64;
            for t in graph.initializers.values() {
                bytes += t.bytes()?.len() as u64;
            }
            Ok(bytes)
        })
        .collect()
}

/// The decoder-fusion rules the graph is rewritten with (samebits-passes' `decoder_fusion.rs`):
/// all but the attention with its output product by default; every rule with
/// `SAMEBITS_CUDA_FUSE=all`; none with `SAMEBITS_CUDA_FUSE=0` (switches for measuring; the bits
/// are the same either way). The attention product is left out because it is slower: the
/// product then runs on the attention's few blocks (one per head group) instead of a products
/// launch of its own, and SmolLM2-135M Q4_1 decoded (tg128) at 729 / 740 tok/s with it against
/// 801 / 804 without on an H200 (`samebits bench`, alternating, 2026-11-27).
fn fusion_rules() -> Vec<decoder_fusion::Rule> {
    let all = decoder_fusion::RULES.iter().copied();
    match std::env::var("SAMEBITS_CUDA_FUSE").as_deref() {
        Ok("0") => Vec::new(),
        Ok("all") => all.collect(),
        _ => all
            .filter(|r| r.name != decoder_fusion::ATTENTION_PRODUCT_RULE.name)
            .collect(),
    }
}

/// Opsets of the graph: ONNX 23 (Attention, RotaryEmbedding, RMSNormalization) and samebits 1.
fn opsets() -> OpsetImports {
    [("".to_string(), 23), ("samebits".to_string(), 1)].into()
}

/// Appends nodes to a graph under generated value names.
struct GraphBuilder {
    graph: Graph,
}

impl GraphBuilder {
    fn node(
        &mut self,
        (domain, op_type): (&str, &str),
        inputs: &[&str],
        outputs: &[&str],
        attributes: &[(&str, Attribute)],
    ) {
        self.graph.nodes.push(Node {
            name: outputs[0].to_string(),
            op_type: op_type.into(),
            domain: domain.into(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: outputs.iter().map(|s| s.to_string()).collect(),
            attributes: attributes
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        });
    }

    /// One-output ONNX node named `out`.
    fn onnx(
        &mut self,
        op_type: &str,
        inputs: &[&str],
        out: &str,
        attributes: &[(&str, Attribute)],
    ) -> String {
        self.node(("", op_type), inputs, &[out], attributes);
        out.to_string()
    }

    fn initializer(&mut self, name: &str, t: Tensor) -> String {
        self.graph.initializers.insert(name.to_string(), t);
        name.to_string()
    }

    /// [`GraphBuilder::linear`] for each of `names` (outputs `outs`).
    fn linears(
        &mut self,
        weights: &dyn WeightSource,
        x: &str,
        names: &[String],
        outs: &[String],
    ) -> Result<Vec<String>> {
        names
            .iter()
            .zip(outs)
            .map(|(name, out)| self.linear(weights, x, name, out))
            .collect()
    }

    /// `x · Wᵀ` for the weight `w`, stored as initializer `name`; the output is named `out`.
    fn matmul_weight(&mut self, x: &str, name: &str, w: MatrixWeight, out: &str) -> String {
        let attrs = w.attributes();
        self.initializer(name, w.blocks);
        self.node(("samebits", "MatMulGguf"), &[x, name], &[out], &attrs);
        out.to_string()
    }

    /// `x · Wᵀ` for the matrix `name.weight`, plus the bias `name.bias` when the model has one;
    /// the output is named `out`.
    fn linear(
        &mut self,
        weights: &dyn WeightSource,
        x: &str,
        name: &str,
        out: &str,
    ) -> Result<String> {
        let (weight, bias) = (format!("{name}.weight"), format!("{name}.bias"));
        let w = weights.matrix(&weight)?;
        let Some(b) = weights.optional_vector(&bias)? else {
            return Ok(self.matmul_weight(x, &weight, w, out));
        };
        let product = self.matmul_weight(x, &weight, w, &format!("{out}.product"));
        self.initializer(&bias, b);
        Ok(self.onnx("Add", &[&product, &bias], out, &[]))
    }

    fn rms_norm(
        &mut self,
        weights: &dyn WeightSource,
        x: &str,
        name: &str,
        eps: f32,
        out: &str,
    ) -> Result<String> {
        let scale = weights.vector(name)?;
        self.initializer(name, scale);
        Ok(self.rms_norm_node(x, name, eps, out))
    }

    /// `RMSNormalization(x, scale)` over the last axis.
    fn rms_norm_node(&mut self, x: &str, scale: &str, eps: f32, out: &str) -> String {
        self.onnx(
            "RMSNormalization",
            &[x, scale],
            out,
            &[
                ("axis", Attribute::Int(-1)),
                ("epsilon", Attribute::Float(eps)),
            ],
        )
    }

    /// The RMSNorm `name` over each head's features of `x` `[1, S, heads * head_dim]` (Qwen3's
    /// `attn_q_norm` / `attn_k_norm`) when the model has that scale, else `x` unchanged.
    fn head_norm(
        &mut self,
        weights: &dyn WeightSource,
        x: &str,
        name: &str,
        heads: usize,
        c: &ModelConfig,
        out: &str,
    ) -> Result<String> {
        let Some(scale) = weights.optional_vector(name)? else {
            return Ok(x.to_string());
        };
        self.initializer(name, scale);
        let shape = |dims: &[usize]| {
            let dims: Vec<i64> = [0, 0]
                .into_iter()
                .chain(dims.iter().map(|&d| d as i64))
                .collect();
            Tensor::from_vec(vec![dims.len()], dims)
        };
        let split = self.initializer(&format!("{out}.split"), shape(&[heads, c.head_dim])?);
        let joined = self.initializer(&format!("{out}.joined"), shape(&[heads * c.head_dim])?);
        let per_head = self.onnx("Reshape", &[x, &split], &format!("{out}.per_head"), &[]);
        let normed = self.rms_norm_node(&per_head, name, c.rms_norm_eps, &format!("{out}.heads"));
        Ok(self.onnx("Reshape", &[&normed, &joined], out, &[]))
    }
}

fn tensor_info(name: &str, dtype: DType, dims: Vec<Dim>) -> ValueInfo {
    ValueInfo {
        name: name.into(),
        ty: Some(ValueType::tensor(dtype, Some(Shape(dims)))),
    }
}

/// The rotary tables `[1, positions.len(), rotary_dim / 2]` of `positions` (docs/contract.md,
/// section `attention`, LLM decode): `inv_freq_i = exp(-((2i / R) * log(base)))`, divided by
/// `divisors[i]` when the model scales its rope (Llama 3.1), `angle = p * inv_freq_i`, then `cos`
/// and `sin` of the angle, every operation one f32 rounding with samebits-math's correctly
/// rounded exp, log, cos and sin.
pub fn rotary_tables(
    positions: impl ExactSizeIterator<Item = usize>,
    rotary_dim: usize,
    base: f32,
    divisors: Option<&[f32]>,
) -> (Tensor, Tensor) {
    let half = rotary_dim / 2;
    let log_base = samebits_math::log(base);
    let inv_freq: Vec<f32> = (0..half)
        .map(|i| {
            let f = samebits_math::exp(-(((2 * i) as f32 / rotary_dim as f32) * log_base));
            divisors.map_or(f, |d| f / d[i])
        })
        .collect();
    let count = positions.len();
    let angles: Vec<f32> = positions
        .flat_map(|p| inv_freq.iter().map(move |&f| p as f32 * f))
        .collect();
    let mut cos = vec![0f32; angles.len()];
    let mut sin = vec![0f32; angles.len()];
    samebits_math::cos_slice(&angles, &mut cos);
    samebits_math::sin_slice(&angles, &mut sin);
    let table = |v| Tensor::from_vec(vec![1, count, half], v).expect("positions * half values");
    (table(cos), table(sin))
}

/// The decoder graph of a llama-layout model, or of the stage of its layers `layers`: the first
/// stage embeds `input_ids`, the others read `hidden_in`; the last computes `logits`, the others
/// return the residual stream after their last layer.
fn build_graph(
    weights: &dyn WeightSource,
    c: &ModelConfig,
    layers: &Range<usize>,
) -> Result<(Graph, OpsetImports)> {
    let (first, last) = (layers.start == 0, layers.end == c.block_count);
    let mut b = GraphBuilder {
        graph: Graph {
            name: "llama".into(),
            ..Graph::default()
        },
    };
    let seq = || Dim::Symbol("seq".into());
    let cache_dims = |len: &str| {
        vec![
            Dim::Known(1),
            Dim::Known(c.head_count_kv),
            Dim::Symbol(len.into()),
            Dim::Known(c.head_dim),
        ]
    };
    let hidden_dims = || vec![Dim::Known(1), seq(), Dim::Known(c.embedding_length)];
    b.graph.inputs.push(match first {
        true => tensor_info("input_ids", DType::I64, vec![Dim::Known(1), seq()]),
        false => tensor_info("hidden_in", DType::F32, hidden_dims()),
    });
    let rotary_dims = || vec![Dim::Known(1), seq(), Dim::Known(c.rope_dimension_count / 2)];
    b.graph
        .inputs
        .push(tensor_info("rotary_cos", DType::F32, rotary_dims()));
    b.graph
        .inputs
        .push(tensor_info("rotary_sin", DType::F32, rotary_dims()));
    let local = c.variant.local_layers;
    if local.is_some() {
        for name in ["rotary_cos_local", "rotary_sin_local"] {
            b.graph
                .inputs
                .push(tensor_info(name, DType::F32, rotary_dims()));
        }
    }

    let embedding = match first || (last && c.tied_embeddings) {
        true => Some(weights.matrix("token_embd.weight")?),
        false => None,
    };
    if let Some(e) = &embedding
        && (e.rows != c.vocab_size || e.cols != c.embedding_length)
    {
        // The configuration's sizes come from metadata, not from the tensor: a file whose
        // vocabulary disagrees with its embedding would index past the logits later.
        return Err(LlmError::Model {
            model: "token_embd.weight".into(),
            message: format!(
                "[{}, {}] disagrees with the declared vocabulary of {} and width of {}",
                e.rows, e.cols, c.vocab_size, c.embedding_length
            ),
        });
    }
    let embedding_attrs = embedding.as_ref().map(|e| e.attributes());
    if let Some(embedding) = embedding {
        b.initializer("token_embd.weight", embedding.blocks);
    }
    if first {
        b.node(
            ("samebits", "GatherGguf"),
            &["token_embd.weight", "input_ids"],
            &["embedded"],
            embedding_attrs
                .as_ref()
                .expect("the first stage has the embedding"),
        );
    }
    let mut x = match first {
        true => "embedded".to_string(),
        false => "hidden_in".to_string(),
    };
    if let (true, Some(scale)) = (first, c.variant.embedding_scale) {
        let scale = b.initializer("embedding_scale", Tensor::scalar(scale));
        x = b.onnx("Mul", &[&x, &scale], "embedded_scaled", &[]);
    }
    let eps = c.rms_norm_eps;
    let int = |v: usize| Attribute::Int(v as i64);
    for i in layers.clone() {
        let blk = |n: &str| format!("blk.{i}.{n}");
        let norm = |n: &str| format!("blk.{i}.{n}.weight");
        let val = |n: &str| format!("l{i}.{n}");
        let (past_k, past_v) = (format!("past_key_{i}"), format!("past_value_{i}"));
        let (present_k, present_v) = (format!("present_key_{i}"), format!("present_value_{i}"));
        b.graph
            .inputs
            .push(tensor_info(&past_k, DType::F32, cache_dims("past")));
        b.graph
            .inputs
            .push(tensor_info(&past_v, DType::F32, cache_dims("past")));
        b.graph
            .outputs
            .push(tensor_info(&present_k, DType::F32, cache_dims("total")));
        b.graph
            .outputs
            .push(tensor_info(&present_v, DType::F32, cache_dims("total")));

        let h = b.rms_norm(weights, &x, &norm("attn_norm"), eps, &val("attn_in"))?;
        let qkv = b.linears(
            weights,
            &h,
            &[blk("attn_q"), blk("attn_k"), blk("attn_v")],
            &[val("q"), val("k"), val("v")],
        )?;
        let [q, k, v] = [&qkv[0], &qkv[1], &qkv[2]];
        let q = b.head_norm(
            weights,
            q,
            &norm("attn_q_norm"),
            c.head_count,
            c,
            &val("q_normed"),
        )?;
        let k = b.head_norm(
            weights,
            k,
            &norm("attn_k_norm"),
            c.head_count_kv,
            c,
            &val("k_normed"),
        )?;
        let rotary = |heads: usize| {
            [
                ("interleaved", Attribute::Int(1)),
                ("num_heads", int(heads)),
                ("rotary_embedding_dim", int(c.rope_dimension_count)),
            ]
        };
        // Gemma 3's local layers rotate with their own tables.
        let (cos, sin) = match local.is_some_and(|l| l.is_local(i)) {
            true => ("rotary_cos_local", "rotary_sin_local"),
            false => ("rotary_cos", "rotary_sin"),
        };
        let q = b.onnx(
            "RotaryEmbedding",
            &[&q, cos, sin],
            &val("q_rot"),
            &rotary(c.head_count),
        );
        let k = b.onnx(
            "RotaryEmbedding",
            &[&k, cos, sin],
            &val("k_rot"),
            &rotary(c.head_count_kv),
        );
        let attended = val("attended");
        let mut attention = vec![
            ("is_causal", Attribute::Int(1)),
            ("q_num_heads", int(c.head_count)),
            ("kv_num_heads", int(c.head_count_kv)),
        ];
        if let Some(scale) = c.variant.attention_scale {
            attention.push(("scale", Attribute::Float(scale)));
        }
        if let Some(cap) = c.variant.attention_softcap {
            attention.push(("softcap", Attribute::Float(cap)));
        }
        b.node(
            ("", "Attention"),
            &[&q, &k, v, "", &past_k, &past_v],
            &[&attended, &present_k, &present_v],
            &attention,
        );
        let mut o = b.linear(weights, &attended, &blk("attn_output"), &val("attn_out"))?;
        if c.variant.post_norms {
            let name = norm("post_attention_norm");
            o = b.rms_norm(weights, &o, &name, eps, &val("attn_out_normed"))?;
        }
        let x_attn = b.onnx("Add", &[&x, &o], &val("resid_attn"), &[]);
        let h = b.rms_norm(weights, &x_attn, &norm("ffn_norm"), eps, &val("ffn_in"))?;
        let gate_up = b.linears(
            weights,
            &h,
            &[blk("ffn_gate"), blk("ffn_up")],
            &[val("gate"), val("up")],
        )?;
        let [gate, up] = [&gate_up[0], &gate_up[1]];
        let activated = match c.variant.gelu_gate {
            true => b.onnx(
                "Gelu",
                &[gate],
                &val("gate_gelu"),
                &[("approximate", Attribute::String("tanh".into()))],
            ),
            false => {
                let sig = b.onnx("Sigmoid", &[gate], &val("gate_sigmoid"), &[]);
                b.onnx("Mul", &[gate, &sig], &val("gate_silu"), &[])
            }
        };
        let hidden = b.onnx("Mul", &[&activated, up], &val("ffn_hidden"), &[]);
        let mut down = b.linear(weights, &hidden, &blk("ffn_down"), &val("ffn_out"))?;
        if c.variant.post_norms {
            let name = norm("post_ffw_norm");
            down = b.rms_norm(weights, &down, &name, eps, &val("ffn_out_normed"))?;
        }
        x = b.onnx("Add", &[&x_attn, &down], &val("resid_ffn"), &[]);
    }
    if !last {
        let output = tensor_info(&x, DType::F32, hidden_dims());
        b.graph.outputs.insert(0, output);
        return Ok((b.graph, opsets()));
    }
    b.graph.outputs.insert(
        0,
        tensor_info(
            "logits",
            DType::F32,
            vec![Dim::Known(1), seq(), Dim::Known(c.vocab_size)],
        ),
    );
    let h = b.rms_norm(weights, &x, "output_norm.weight", eps, "final_norm")?;
    // Gemma 2 soft-caps the logits: tanh(logit / cap) * cap, op by op.
    let cap = c.variant.final_logit_softcap;
    let products = if cap.is_some() {
        "logits_uncapped"
    } else {
        "logits"
    };
    match embedding_attrs {
        Some(attrs) if c.tied_embeddings => b.node(
            ("samebits", "MatMulGguf"),
            &[&h, "token_embd.weight"],
            &[products],
            &attrs,
        ),
        _ => {
            b.linear(weights, &h, "output", products)?;
        }
    }
    if let Some(cap) = cap {
        let cap = b.initializer("logit_softcap", Tensor::scalar(cap));
        let scaled = b.onnx("Div", &[products, &cap], "logits_scaled", &[]);
        let capped = b.onnx("Tanh", &[&scaled], "logits_tanh", &[]);
        b.onnx("Mul", &[&capped, &cap], "logits", &[]);
    }
    Ok((b.graph, opsets()))
}
