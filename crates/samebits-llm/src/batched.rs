//! The batched decoder: the new tokens of several sequences, each with its own KV cache and
//! position, in one forward pass ([`Llm::forward_last_batch`]), as a server runs the sequences
//! it is generating (continuous batching). Each sequence's logits are the bits it gets alone.
//!
//! The batched graph is the one-sequence graph of [`crate::model`] (built once, its weights
//! shared) with three changes:
//! - the rows of every sequence go one after the other along the sequence axis: `input_ids`
//!   `[1, R]`, the rotary tables `[1, R, rotary_dim / 2]` (each row at its own sequence's
//!   position), and every row-wise op (embedding, norms, products, rotary, SiLU gate, residual
//!   adds) works on the R rows, each row in the canonical order it has alone;
//! - each Attention becomes `samebits::RaggedAttention` over a new input `sequence_rows` (`[B]`,
//!   the rows of each sequence) and caches that are sequences of B tensors: each sequence's rows
//!   attend to its own cache only, so its softmax reduces over exactly its own keys (padding the
//!   caches to one length would change the reduction's length, and so its bits);
//! - the last stage gathers the last row of each sequence (input `logit_rows`, `[B]`) before the
//!   final norm, so the output head computes `[1, B, vocab]` logits, not one row per token.
//!
//! On a GPU, RaggedAttention runs a launch per sequence on views of its rows, each extending
//! that sequence's cache storage in place (samebits-cuda `executor/ragged.rs`); the caches stay
//! on the device between steps. A batch of one sequence runs the one-sequence plan instead (the
//! same bits; on the CPU a little faster, measured 84-85 against 87-93 tok/s at one client of
//! `samebits serve`; on a GPU its recorded decode step replays), and the two plans take each
//! other's caches.
//!
//! The fusion rules run on it as on the one-sequence graph (decoder_fusion's rules match the
//! row-wise patterns; `RaggedAttention` is fused with nothing). docs/serve.md tells how the
//! server uses it.

use crate::model::{DecoderStage, KvCache, run_on_pool};
use crate::{Llm, LlmError, Result};
use samebits_ir::{Attribute, DType, Dim, Graph, Node, Shape, Tensor, ValueInfo, ValueType};
use samebits_runtime::IoValue;

/// The name of the batched graph's rows-per-sequence input.
const SEQUENCE_ROWS: &str = "sequence_rows";
/// The name of the last stage's input: the row of each sequence whose logits are wanted.
const LOGIT_ROWS: &str = "logit_rows";

/// The batched form (module docs) of a stage graph built by `model::build_graph`, which ends
/// with the logits when `last`.
pub(crate) fn batched_graph(graph: &Graph, last: bool) -> Result<Graph> {
    let mut g = graph.clone();
    g.name = format!("{}_batched", g.name);
    let caches = |info: &mut ValueInfo| {
        if info.name.starts_with("past_") || info.name.starts_with("present_") {
            info.ty = info.ty.take().map(|t| ValueType::Sequence(Box::new(t)));
        }
    };
    g.inputs.iter_mut().for_each(caches);
    g.outputs.iter_mut().for_each(caches);
    let sequences = || vec![Dim::Symbol("sequences".into())];
    g.inputs.push(ValueInfo {
        name: SEQUENCE_ROWS.into(),
        ty: Some(ValueType::tensor(DType::I64, Some(Shape(sequences())))),
    });
    let mut attentions = 0;
    for node in g.nodes.iter_mut() {
        if node.domain.is_empty() && node.op_type == "Attention" {
            let [q, k, v, _mask, past_k, past_v] = &node.inputs[..] else {
                return Err(LlmError::Usage(format!(
                    "attention node {} has {} inputs, the decoder graph gives 6",
                    node.name,
                    node.inputs.len()
                )));
            };
            node.inputs = vec![
                q.clone(),
                k.clone(),
                v.clone(),
                SEQUENCE_ROWS.into(),
                past_k.clone(),
                past_v.clone(),
            ];
            node.domain = "samebits".into();
            node.op_type = "RaggedAttention".into();
            attentions += 1;
        }
    }
    if attentions == 0 {
        return Err(LlmError::Usage("the decoder graph has no attention".into()));
    }
    if last {
        let at = g
            .nodes
            .iter()
            .position(|n| n.outputs.first().is_some_and(|o| o == "final_norm"))
            .ok_or_else(|| LlmError::Usage("the decoder graph has no final norm".into()))?;
        let hidden = std::mem::replace(&mut g.nodes[at].inputs[0], "last_rows".into());
        g.nodes.insert(
            at,
            Node {
                name: "last_rows".into(),
                op_type: "Gather".into(),
                domain: String::new(),
                inputs: vec![hidden, LOGIT_ROWS.into()],
                outputs: vec!["last_rows".into()],
                attributes: [("axis".to_string(), Attribute::Int(1))].into(),
            },
        );
        g.inputs.push(ValueInfo {
            name: LOGIT_ROWS.into(),
            ty: Some(ValueType::tensor(DType::I64, Some(Shape(sequences())))),
        });
        if let Some(ValueType::Tensor {
            shape: Some(Shape(dims)),
            ..
        }) = g.outputs[0].ty.as_mut()
        {
            dims[1] = Dim::Symbol("sequences".into());
        }
    }
    Ok(g)
}

impl Llm {
    /// Runs the new tokens of several sequences in one pass: `batch[b].0` after the tokens
    /// already in `batch[b].1` (at that cache's positions), appending their keys and values to
    /// that cache; returns the logits of each sequence's last new token ([`Llm::vocab_size`]
    /// values each), the same bits [`Llm::forward_last`] gives for that sequence alone. A
    /// sequence may bring its whole prompt (a prefill) while others bring one token (a decode
    /// step). Any cache of this model joins: a new one, or one of earlier batched or lone runs
    /// (on a GPU its layers stay on the device between them).
    pub fn forward_last_batch(
        &self,
        batch: &mut [(&[u32], &mut KvCache)],
    ) -> Result<Vec<Vec<f32>>> {
        self.check_whole()?;
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let mut rows = Vec::with_capacity(batch.len());
        let mut ids = Vec::new();
        for (b, (tokens, _)) in batch.iter().enumerate() {
            if tokens.is_empty() {
                return Err(LlmError::Usage(format!(
                    "sequence {b} of the batch brings no tokens"
                )));
            }
            rows.push(tokens.len());
            ids.extend(tokens.iter().map(|&t| i64::from(t)));
        }
        // One sequence takes the one-sequence plan: the same bits, without the batched plan's
        // per-sequence steps (and on a GPU with its recorded decode step). The two plans' caches
        // are the same values: host tensors, or on a GPU cache storages.
        if let [(tokens, cache)] = batch {
            return Ok(vec![self.forward_last(tokens, cache)?]);
        }
        let mut x = Tensor::from_vec(vec![1, ids.len()], ids)?;
        let mut caches: Vec<&mut KvCache> = batch.iter_mut().map(|(_, c)| &mut **c).collect();
        let mut first_layer = 0;
        for stage in self.stages() {
            x = stage.forward_batch(x, &rows, &mut caches, first_layer)?;
            first_layer += 2 * stage.layers().len();
        }
        for (cache, n) in caches.iter_mut().zip(&rows) {
            cache.len += n;
        }
        let vocab = self.vocab_size();
        let logits = x.as_slice::<f32>()?;
        Ok(logits
            .chunks_exact(vocab.max(1))
            .map(<[f32]>::to_vec)
            .collect())
    }
}

impl DecoderStage {
    /// [`Llm::forward_last_batch`] through this stage: `input` holds every sequence's new rows
    /// one after the other (token ids `[1, R]` for the first stage, else the hidden state
    /// `[1, R, dim]`), `rows[b]` of them for sequence `b`, whose cache is `caches[b]` and whose
    /// layers of this stage sit at `first` in it. Returns the hidden state `[1, R, dim]`, or for
    /// the last stage the logits of each sequence's last row `[1, B, vocab]`. The caches'
    /// lengths are left for the caller to advance once every stage has run.
    pub fn forward_batch(
        &self,
        input: Tensor,
        rows: &[usize],
        caches: &mut [&mut KvCache],
        first: usize,
    ) -> Result<Tensor> {
        let mut positions = Vec::with_capacity(input.shape().get(1).copied().unwrap_or(0));
        for (b, (cache, &n)) in caches.iter().zip(rows).enumerate() {
            let end = cache.len + n;
            self.check_context(end)
                .map_err(|e| LlmError::Usage(format!("sequence {b}: {e}")))?;
            positions.extend(cache.len..end);
        }
        let mut inputs = self.leading_inputs(input, positions.iter().copied());
        let layers = 2 * self.layers().len();
        for i in first..first + layers {
            let items = caches
                .iter()
                .enumerate()
                .map(|(b, cache)| {
                    cache.layers.get(i).cloned().ok_or_else(|| {
                        LlmError::Usage(format!(
                            "sequence {b}'s cache holds {} layers, not this model's",
                            cache.layers.len() / 2
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            inputs.push(IoValue::sequence(items).ok_or_else(|| {
                LlmError::Usage("a sequence's cache holds a layer that is not a tensor".into())
            })?);
        }
        let counts: Vec<i64> = rows.iter().map(|&n| n as i64).collect();
        inputs.push(IoValue::Host(
            Tensor::from_vec(vec![rows.len()], counts)?.into(),
        ));
        if self.layers().end == self.config().block_count {
            let mut last = Vec::with_capacity(rows.len());
            let mut end = 0i64;
            for &n in rows {
                end += n as i64;
                last.push(end - 1);
            }
            inputs.push(IoValue::Host(
                Tensor::from_vec(vec![rows.len()], last)?.into(),
            ));
        }
        // A GPU stage's caches stay on the device, where the next step extends them in place.
        let mut keep = vec![!self.on_cpu(); 1 + layers];
        keep[0] = false;
        let mut outputs = run_on_pool(self.batched(), inputs, &keep)?.into_iter();
        let output = match outputs.next() {
            Some(IoValue::Host(v)) => v.into_tensor()?,
            _ => {
                return Err(LlmError::Usage(
                    "the batched plan left its output on the device".into(),
                ));
            }
        };
        for (i, present) in (first..first + layers).zip(outputs) {
            let items = present.into_items().ok_or_else(|| {
                LlmError::Usage("the batched plan's caches came back as no sequences".into())
            })?;
            if items.len() != caches.len() {
                return Err(LlmError::Usage(format!(
                    "the batched plan returned {} caches for {} sequences",
                    items.len(),
                    caches.len()
                )));
            }
            for (cache, item) in caches.iter_mut().zip(items) {
                cache.layers[i] = item;
            }
        }
        Ok(output)
    }
}
