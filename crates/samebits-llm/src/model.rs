//! [`Llm`]: a llama-family GGUF decoder built as a samebits IR graph and compiled once into a
//! [`Plan`]; [`Llm::forward`] runs it over new tokens with a [`KvCache`].
//!
//! The graph is standard ONNX (opset 23) plus the two GGUF weight ops of domain `samebits`:
//!
//! ```text
//! x = GatherGguf(token_embd, input_ids)                                  [1, S, dim]
//! per layer i:
//!   h = RMSNormalization(x, attn_norm)
//!   q, k, v = Split(MatMulGguf(h, [attn_q; attn_k; attn_v]))        (one stacked matrix when the
//!                                                                     three share a panel type)
//!   q, k = RotaryEmbedding(q | k, rotary_cos, rotary_sin; interleaved)  (GGUF permutes Q/K rows
//!                                                                          for adjacent pairs)
//!   a, present_key_i, present_value_i = Attention(q, k, v, -, past_key_i, past_value_i;
//!                                                 is_causal, GQA)
//!   x = x + MatMulGguf(a, attn_output)
//!   h = RMSNormalization(x, ffn_norm)
//!   g, u = Split(MatMulGguf(h, [ffn_gate; ffn_up]))                  (likewise)
//!   x = x + MatMulGguf((g * Sigmoid(g)) * u, ffn_down)
//! logits = MatMulGguf(RMSNormalization(x, output_norm), output | token_embd (tied))
//! ```
//!
//! Inputs `input_ids` `[1, S]` i64, `rotary_cos`, `rotary_sin` `[1, S, rotary_dim / 2]` (the rows
//! of [`rotary_tables`] for the S positions, computed per call so that no table for the whole
//! context is held) and `past_key_i`, `past_value_i`
//! `[1, kv_heads, P, head_dim]` f32 (P = 0 for a prefill); outputs `logits` `[1, S, vocab]` and
//! `present_key_i`, `present_value_i` `[1, kv_heads, P + S, head_dim]`. Every op computes each
//! token's row in the contract's canonical order, independent of S and P, so one prefill over a
//! sequence and token-by-token decode give the same logits bit for bit. Stacking matrices changes
//! no bit either: each output is the dot product of its own weight row.

use crate::weights::{self, MatrixWeight};
use crate::{LlmError, Result};
use samebits_gguf::{GgufFile, GgufTokenizer, ModelConfig};
use samebits_ir::{
    Attribute, DType, Dim, Graph, Node, OpsetImports, Shape, Tensor, Value, ValueInfo, ValueType,
};
use samebits_kernels::{Isa, with_isa};
use samebits_ops::{OperationSet, Plan, RunOptions};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A loaded model: its GGUF file (memory-mapped), configuration, tokenizer and compiled plan.
pub struct Llm {
    pub path: PathBuf,
    pub file: GgufFile,
    pub config: ModelConfig,
    pub tokenizer: GgufTokenizer,
    pub operation_set: OperationSet,
    plan: Plan,
}

/// The keys and values of the tokens processed so far, per layer.
pub struct KvCache {
    /// `[key_0, value_0, key_1, value_1, ...]`, each `[1, kv_heads, len, head_dim]`.
    layers: Vec<Value>,
    len: usize,
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
    /// Opens the GGUF file at `path` and compiles its graph for `operation_set`.
    pub fn load(path: &Path, operation_set: OperationSet) -> Result<Llm> {
        let mut file = GgufFile::open(path)?;
        let config = ModelConfig::from_gguf(&file)?;
        let tokenizer = GgufTokenizer::from_gguf(&file)?;
        // The tokenizer holds the vocabulary and merges now; free the metadata's copy before
        // the weights are packed (peak memory).
        file.remove_metadata(&[
            "tokenizer.ggml.tokens",
            "tokenizer.ggml.token_type",
            "tokenizer.ggml.merges",
        ]);
        let (graph, opsets) = build_graph(&file, &config)?;
        let plan = Plan::build(&graph, &opsets, operation_set, &[])?;
        Ok(Llm {
            path: path.to_path_buf(),
            file,
            config,
            tokenizer,
            operation_set,
            plan,
        })
    }

    pub fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }

    /// A cache holding no tokens.
    pub fn new_cache(&self) -> KvCache {
        let c = &self.config;
        let empty = Tensor::from_vec(vec![1, c.head_count_kv, 0, c.head_dim], Vec::<f32>::new())
            .expect("an empty tensor");
        KvCache {
            layers: vec![Value::Tensor(empty); 2 * c.block_count],
            len: 0,
        }
    }

    /// Runs `tokens` after the tokens already in `cache` (at positions `cache.len()..`), appends
    /// their keys and values to it and returns their logits, `tokens.len()` rows of
    /// [`Llm::vocab_size`] values.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Vec<f32>> {
        let s = tokens.len();
        let end = cache.len + s;
        if end > self.config.context_length {
            return Err(LlmError::Usage(format!(
                "{end} tokens exceed the model's context of {} tokens",
                self.config.context_length
            )));
        }
        let ids: Vec<i64> = tokens.iter().map(|&t| i64::from(t)).collect();
        let c = &self.config;
        let (cos, sin) = rotary_tables(cache.len..end, c.rope_dimension_count, c.rope_freq_base);
        let mut inputs = vec![
            Tensor::from_vec(vec![1, s], ids)?.into(),
            cos.into(),
            sin.into(),
        ];
        inputs.append(&mut cache.layers);
        // The whole step runs on one thread of the rayon pool, so that the ops' parallel loops
        // start from inside it (work stealing) instead of each waking the pool from outside and
        // sleeping until it is done; the caller's ISA scope goes along.
        let isa = Isa::active();
        let outputs =
            rayon::scope(|_| with_isa(isa, || self.plan.run(inputs, RunOptions::default())));
        let mut outputs = outputs?.into_iter();
        let logits = outputs
            .next()
            .expect("the plan returns logits first")
            .into_tensor()?;
        cache.layers = outputs.collect();
        cache.len = end;
        Ok(logits.as_slice::<f32>()?.to_vec())
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

    /// `x · Wᵀ` for the weight `w`, stored as initializer `name`; the output is named `out`.
    fn matmul_weight(&mut self, x: &str, name: &str, w: MatrixWeight, out: &str) -> String {
        let attrs = w.attributes();
        self.initializer(name, w.blocks);
        self.node(("samebits", "MatMulGguf"), &[x, name], &[out], &attrs);
        out.to_string()
    }

    /// `x · Wᵀ` for the GGUF matrix `name`; the output is named `out`.
    fn matmul(&mut self, file: &GgufFile, x: &str, name: &str, out: &str) -> Result<String> {
        let w = weights::matrix(file, name)?;
        Ok(self.matmul_weight(x, name, w, out))
    }

    /// `x · Wᵀ` for each GGUF matrix of `names`, outputs named `outs`: one product with the
    /// matrices stacked and a Split when they can be stacked, else one product each.
    fn matmuls(
        &mut self,
        file: &GgufFile,
        x: &str,
        names: &[String],
        outs: &[String],
    ) -> Result<Vec<String>> {
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let Some(w) = weights::stacked(file, &refs)? else {
            return names
                .iter()
                .zip(outs)
                .map(|(name, out)| self.matmul(file, x, name, out))
                .collect();
        };
        let sizes: Vec<i64> = refs
            .iter()
            .map(|name| file.tensor_info(name).map_or(0, |i| i.dims[1] as i64))
            .collect();
        let stacked_name = names.join("+");
        let stacked_out = outs.join("+");
        let stacked = self.matmul_weight(x, &stacked_name, w, &stacked_out);
        let split_name = format!("{stacked_out}.split");
        let count = sizes.len();
        self.initializer(
            &split_name,
            Tensor::from_vec(vec![count], sizes).expect("one size per matrix"),
        );
        let out_refs: Vec<&str> = outs.iter().map(String::as_str).collect();
        self.node(
            ("", "Split"),
            &[&stacked, &split_name],
            &out_refs,
            &[("axis", Attribute::Int(-1))],
        );
        Ok(outs.to_vec())
    }

    fn rms_norm(
        &mut self,
        file: &GgufFile,
        x: &str,
        name: &str,
        eps: f32,
        out: &str,
    ) -> Result<String> {
        let scale = weights::vector(file, name)?;
        self.initializer(name, scale);
        Ok(self.onnx(
            "RMSNormalization",
            &[x, name],
            out,
            &[
                ("axis", Attribute::Int(-1)),
                ("epsilon", Attribute::Float(eps)),
            ],
        ))
    }
}

fn tensor_info(name: &str, dtype: DType, dims: Vec<Dim>) -> ValueInfo {
    ValueInfo {
        name: name.into(),
        ty: Some(ValueType::tensor(dtype, Some(Shape(dims)))),
    }
}

/// The rotary tables `[1, positions.len(), rotary_dim / 2]` of `positions` (docs/contract.md,
/// section `attention`, LLM decode): `inv_freq_i = exp(-((2i / R) * log(base)))`,
/// `angle = p * inv_freq_i`, then `cos` and `sin` of the angle, every operation one f32 rounding
/// with samebits-math's correctly rounded exp, log, cos and sin.
pub fn rotary_tables(positions: Range<usize>, rotary_dim: usize, base: f32) -> (Tensor, Tensor) {
    let half = rotary_dim / 2;
    let log_base = samebits_math::log(base);
    let inv_freq: Vec<f32> = (0..half)
        .map(|i| samebits_math::exp(-(((2 * i) as f32 / rotary_dim as f32) * log_base)))
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

/// The decoder graph of a llama-layout GGUF file.
fn build_graph(file: &GgufFile, c: &ModelConfig) -> Result<(Graph, OpsetImports)> {
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
    b.graph.inputs.push(tensor_info(
        "input_ids",
        DType::I64,
        vec![Dim::Known(1), seq()],
    ));
    let rotary_dims = || vec![Dim::Known(1), seq(), Dim::Known(c.rope_dimension_count / 2)];
    b.graph
        .inputs
        .push(tensor_info("rotary_cos", DType::F32, rotary_dims()));
    b.graph
        .inputs
        .push(tensor_info("rotary_sin", DType::F32, rotary_dims()));
    b.graph.outputs.push(tensor_info(
        "logits",
        DType::F32,
        vec![Dim::Known(1), seq(), Dim::Known(c.vocab_size)],
    ));

    let embedding = weights::matrix(file, "token_embd.weight")?;
    let embedding_attrs = embedding.attributes();
    b.initializer("token_embd.weight", embedding.blocks);
    b.node(
        ("samebits", "GatherGguf"),
        &["token_embd.weight", "input_ids"],
        &["embedded"],
        &embedding_attrs,
    );
    let mut x = "embedded".to_string();
    let eps = c.rms_norm_eps;
    let int = |v: usize| Attribute::Int(v as i64);
    for i in 0..c.block_count {
        let blk = |n: &str| format!("blk.{i}.{n}.weight");
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

        let h = b.rms_norm(file, &x, &blk("attn_norm"), eps, &val("attn_in"))?;
        let qkv = b.matmuls(
            file,
            &h,
            &[blk("attn_q"), blk("attn_k"), blk("attn_v")],
            &[val("q"), val("k"), val("v")],
        )?;
        let [q, k, v] = [&qkv[0], &qkv[1], &qkv[2]];
        let rotary = |heads: usize| {
            [
                ("interleaved", Attribute::Int(1)),
                ("num_heads", int(heads)),
                ("rotary_embedding_dim", int(c.rope_dimension_count)),
            ]
        };
        let q = b.onnx(
            "RotaryEmbedding",
            &[q, "rotary_cos", "rotary_sin"],
            &val("q_rot"),
            &rotary(c.head_count),
        );
        let k = b.onnx(
            "RotaryEmbedding",
            &[k, "rotary_cos", "rotary_sin"],
            &val("k_rot"),
            &rotary(c.head_count_kv),
        );
        let attended = val("attended");
        b.node(
            ("", "Attention"),
            &[&q, &k, v, "", &past_k, &past_v],
            &[&attended, &present_k, &present_v],
            &[
                ("is_causal", Attribute::Int(1)),
                ("q_num_heads", int(c.head_count)),
                ("kv_num_heads", int(c.head_count_kv)),
            ],
        );
        let o = b.matmul(file, &attended, &blk("attn_output"), &val("attn_out"))?;
        let x_attn = b.onnx("Add", &[&x, &o], &val("resid_attn"), &[]);
        let h = b.rms_norm(file, &x_attn, &blk("ffn_norm"), eps, &val("ffn_in"))?;
        let gate_up = b.matmuls(
            file,
            &h,
            &[blk("ffn_gate"), blk("ffn_up")],
            &[val("gate"), val("up")],
        )?;
        let [gate, up] = [&gate_up[0], &gate_up[1]];
        let sig = b.onnx("Sigmoid", &[gate], &val("gate_sigmoid"), &[]);
        let silu = b.onnx("Mul", &[gate, &sig], &val("gate_silu"), &[]);
        let hidden = b.onnx("Mul", &[&silu, up], &val("ffn_hidden"), &[]);
        let down = b.matmul(file, &hidden, &blk("ffn_down"), &val("ffn_out"))?;
        x = b.onnx("Add", &[&x_attn, &down], &val("resid_ffn"), &[]);
    }
    let h = b.rms_norm(file, &x, "output_norm.weight", eps, "final_norm")?;
    if c.tied_embeddings {
        b.node(
            ("samebits", "MatMulGguf"),
            &[&h, "token_embd.weight"],
            &["logits"],
            &embedding_attrs,
        );
    } else {
        b.matmul(file, &h, "output.weight", "logits")?;
    }
    Ok((b.graph, opsets()))
}
