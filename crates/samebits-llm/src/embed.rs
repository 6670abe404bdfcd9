//! Sentence embeddings with BERT encoders from Hugging Face / sentence-transformers folders
//! (all-MiniLM-L6-v2 and kin): `config.json` (`model_type` `bert`), `model.safetensors`,
//! `tokenizer.json` (WordPiece), and optionally sentence-transformers' `modules.json`,
//! `sentence_bert_config.json` and `1_Pooling/config.json`.
//!
//! The encoder, mean pooling and normalisation are one IR graph of standard ONNX ops (opset 23)
//! compiled into a [`Plan`], so embeddings follow docs/contract.md like every other model:
//!
//! ```text
//! x = LayerNorm((Gather(word, ids) + Gather(token_type, type_ids)) + Gather(position, positions))
//! per layer:
//!   q, k, v = MatMul(x, Wq | Wk | Wv) + bias
//!   x = LayerNorm(MatMul(Attention(q, k, v, mask; heads), Wo) + bias + x)
//!   x = LayerNorm(MatMul(Gelu(MatMul(x, Wi) + bias), Wo2) + bias + x)
//! e = ReduceSum(x * mask, seq) / ReduceSum(mask, seq)          (mean over the text's tokens)
//! e = LpNormalization(e, p = 2)                                   (when modules.json has Normalize)
//! ```
//!
//! Texts are tokenized with `tokenizer.json` (its own truncation and padding switched off),
//! truncated to `sentence_bert_config.json`'s `max_seq_length` (else `max_position_embeddings`)
//! and embedded together as one batch padded with `[PAD]` to the longest; padded keys are masked
//! out of attention and pooling. Padding adds only exact zero terms to the canonical sums
//! (`fma(0, v, p) = p`, `p + 0 = p`), so a text's embedding has the same bits alone or in any
//! batch. The weights are widened to f32 at load, and the Linear matrices (stored `[out, in]`)
//! are transposed into MatMul's `[in, out]` (a copy; both exact).

use crate::checkpoint::{Checkpoint, file_in_folder, model_sha256, read_json};
use crate::{LlmError, Result};
use samebits_ir::{
    Attribute, DType, Dim, Graph, Node, OpsetImports, Shape, Tensor, ValueInfo, ValueType,
};
use samebits_ops::{OperationSet, Plan, RunOptions};
use samebits_runtime::hashing::sha256_tensor;
use samebits_runtime::receipt::{FileRecord, portable_path};
use samebits_tokenizer::parse_tokenizer_json;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tokenizers::Tokenizer;

/// A loaded encoder: tokenizer, settings and compiled plan.
pub struct Embedder {
    /// The checkpoint folder.
    pub path: PathBuf,
    /// Width of an embedding.
    pub dim: usize,
    /// Tokens per text at most (longer texts are truncated).
    pub max_tokens: usize,
    /// Whether embeddings are L2-normalised (sentence-transformers' Normalize module).
    pub normalize: bool,
    pub operation_set: OperationSet,
    tokenizer: Tokenizer,
    pad_id: u32,
    plan: Plan,
}

impl Embedder {
    /// Loads the BERT checkpoint in `dir` and compiles its graph for `operation_set`.
    pub fn load(dir: &Path, operation_set: OperationSet) -> Result<Embedder> {
        let ck = Checkpoint::open(dir)?;
        let config = BertConfig::read(&ck)?;
        let (normalize, pooling) = sentence_transformer_modules(dir)?;
        if let Some(pooling) = pooling
            && pooling["pooling_mode_mean_tokens"].as_bool() != Some(true)
        {
            return Err(ck.error(format!(
                "1_Pooling/config.json: only mean pooling is supported, found {pooling}"
            )));
        }
        let st_config = dir.join("sentence_bert_config.json");
        let max_tokens = match st_config.exists() {
            true => read_json(&st_config)?["max_seq_length"]
                .as_u64()
                .map_or(config.max_positions, |n| n as usize),
            false => config.max_positions,
        }
        .min(config.max_positions);
        let tokenizer_path = dir.join("tokenizer.json");
        let tokenizer_error = |message: String| LlmError::Model {
            model: tokenizer_path.display().to_string(),
            message,
        };
        let text =
            std::fs::read_to_string(&tokenizer_path).map_err(|e| tokenizer_error(e.to_string()))?;
        let (_, mut tokenizer) = parse_tokenizer_json(&text).map_err(tokenizer_error)?;
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: max_tokens,
                ..Default::default()
            }))
            .map_err(|e| tokenizer_error(e.to_string()))?
            .with_padding(None);
        let pad_id = tokenizer.token_to_id("[PAD]").unwrap_or(0);
        let graph = build_graph(&ck, &config, normalize)?;
        let opsets: OpsetImports = [(String::new(), 23)].into();
        let plan = Plan::build(&graph, &opsets, operation_set, &[])?;
        Ok(Embedder {
            path: dir.to_path_buf(),
            dim: config.hidden,
            max_tokens,
            normalize,
            operation_set,
            tokenizer,
            pad_id,
            plan,
        })
    }

    /// The token ids of `text`, with `[CLS]` and `[SEP]`, truncated to [`Embedder::max_tokens`].
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| LlmError::Usage(format!("cannot tokenize {text:?}: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The embeddings of `texts`, `[texts.len(), dim]` f32, computed as one padded batch.
    pub fn embed(&self, texts: &[&str]) -> Result<Tensor> {
        let ids = texts
            .iter()
            .map(|t| self.token_ids(t))
            .collect::<Result<Vec<_>>>()?;
        self.embed_ids(&ids)
    }

    /// The embeddings of already tokenized texts.
    pub fn embed_ids(&self, ids: &[Vec<u32>]) -> Result<Tensor> {
        let batch = ids.len();
        let seq = ids.iter().map(Vec::len).max().unwrap_or(0);
        if batch == 0 || seq == 0 {
            return Err(LlmError::Usage("nothing to embed: no text given".into()));
        }
        let mut input_ids = vec![i64::from(self.pad_id); batch * seq];
        let mut mask = vec![0i64; batch * seq];
        for (b, text) in ids.iter().enumerate() {
            for (s, &id) in text.iter().enumerate() {
                input_ids[b * seq + s] = i64::from(id);
                mask[b * seq + s] = 1;
            }
        }
        let inputs = vec![
            Tensor::from_vec(vec![batch, seq], input_ids)?.into(),
            Tensor::from_vec(vec![batch, seq], mask)?.into(),
            Tensor::from_vec(vec![batch, seq], vec![0i64; batch * seq])?.into(),
            Tensor::from_vec(vec![1, seq], (0..seq as i64).collect::<Vec<_>>())?.into(),
        ];
        let mut outputs = self.plan.run(inputs, RunOptions::default())?;
        Ok(outputs.remove(0).into_tensor()?)
    }
}

/// sentence-transformers' `modules.json` entries, or none when the folder has no such file.
fn modules(dir: &Path) -> Result<Vec<serde_json::Value>> {
    let path = dir.join("modules.json");
    if !path.exists() {
        return Ok(Vec::new());
    }
    Ok(read_json(&path)?.as_array().cloned().unwrap_or_default())
}

fn module_of_type<'a>(
    modules: &'a [serde_json::Value],
    suffix: &str,
) -> Option<&'a serde_json::Value> {
    modules
        .iter()
        .find(|m| m["type"].as_str().is_some_and(|t| t.ends_with(suffix)))
}

/// The Pooling module's `config.json` (in the subfolder `modules.json` names), when the folder
/// has one: read by the embedder, and covered by the folder's digest ([`crate::model_sha256`]).
pub(crate) fn pooling_config(dir: &Path) -> Result<Option<PathBuf>> {
    let modules = modules(dir)?;
    let Some(module) = module_of_type(&modules, ".Pooling") else {
        return Ok(None);
    };
    let folder = module["path"].as_str().unwrap_or("1_Pooling");
    let config =
        file_in_folder(dir, &format!("{folder}/config.json"), true).map_err(|message| {
            LlmError::Model {
                model: dir.join("modules.json").display().to_string(),
                message: format!("module path: {message}"),
            }
        })?;
    Ok(config.is_file().then_some(config))
}

/// sentence-transformers' modules: (Normalize present, the Pooling module's config). Without
/// `modules.json`: mean pooling, no normalisation.
fn sentence_transformer_modules(dir: &Path) -> Result<(bool, Option<serde_json::Value>)> {
    let pooling = pooling_config(dir)?.map(|p| read_json(&p)).transpose()?;
    Ok((
        module_of_type(&modules(dir)?, ".Normalize").is_some(),
        pooling,
    ))
}

/// The fields of a BERT `config.json` the graph needs.
struct BertConfig {
    hidden: usize,
    heads: usize,
    layers: usize,
    max_positions: usize,
    eps: f32,
    /// `bert.` when the tensors are saved under a task model (`BertForMaskedLM`, ...).
    prefix: &'static str,
}

impl BertConfig {
    fn read(ck: &Checkpoint) -> Result<BertConfig> {
        let model_type = ck.str_field("model_type")?;
        if model_type != "bert" {
            return Err(ck.error(format!(
                "config.json: model_type `{model_type}` is not a BERT encoder"
            )));
        }
        for (key, wanted) in [
            ("hidden_act", "gelu"),
            ("position_embedding_type", "absolute"),
        ] {
            if ck.field(key).is_some() && ck.str_field(key)? != wanted {
                return Err(ck.error(format!(
                    "config.json: {key} `{}` is not supported (only {wanted})",
                    ck.str_field(key)?
                )));
            }
        }
        let hidden = ck.usize_field("hidden_size")?;
        let heads = ck.usize_field("num_attention_heads")?;
        if heads == 0 || !hidden.is_multiple_of(heads) {
            return Err(ck.error(format!(
                "config.json: {heads} attention heads do not divide hidden_size {hidden}"
            )));
        }
        let prefix = match ck.contains("embeddings.word_embeddings.weight") {
            true => "",
            false => "bert.",
        };
        Ok(BertConfig {
            hidden,
            heads,
            layers: ck.usize_field("num_hidden_layers")?,
            max_positions: ck.usize_field("max_position_embeddings")?,
            eps: ck.f32_field("layer_norm_eps")?,
            prefix,
        })
    }
}

/// Appends ONNX nodes and initializers to the encoder graph.
struct EncoderBuilder<'a> {
    graph: Graph,
    ck: &'a Checkpoint,
    prefix: &'static str,
}

impl EncoderBuilder<'_> {
    fn onnx(
        &mut self,
        op_type: &str,
        inputs: &[&str],
        out: &str,
        attributes: &[(&str, Attribute)],
    ) -> String {
        self.graph.nodes.push(Node {
            name: out.to_string(),
            op_type: op_type.into(),
            domain: String::new(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: vec![out.to_string()],
            attributes: attributes
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        });
        out.to_string()
    }

    /// Checkpoint tensor `name` (without the prefix) as an f32 initializer.
    fn weight(&mut self, name: &str) -> Result<String> {
        let t = self.ck.f32(&format!("{}{name}", self.prefix))?;
        self.graph.initializers.insert(name.to_string(), t);
        Ok(name.to_string())
    }

    fn constant(&mut self, name: &str, t: Tensor) -> String {
        self.graph.initializers.insert(name.to_string(), t);
        name.to_string()
    }

    /// `x · Wᵀ + b` for the Linear module `name` (weight `[out, in]`, transposed here).
    fn linear(&mut self, x: &str, name: &str, out: &str) -> Result<String> {
        let w = self.ck.f32(&format!("{}{name}.weight", self.prefix))?;
        let &[rows, cols] = w.shape() else {
            return Err(self.ck.error(format!(
                "tensor {name}.weight has shape {:?}, expected a matrix",
                w.shape()
            )));
        };
        let values = w.as_slice::<f32>()?;
        let mut transposed = vec![0f32; rows * cols];
        for (r, row) in values.chunks_exact(cols).enumerate() {
            for (c, &v) in row.iter().enumerate() {
                transposed[c * rows + r] = v;
            }
        }
        let w_name = self.constant(
            &format!("{name}.weight_t"),
            Tensor::from_vec(vec![cols, rows], transposed)?,
        );
        let product = self.onnx("MatMul", &[x, &w_name], &format!("{out}.product"), &[]);
        let bias = self.weight(&format!("{name}.bias"))?;
        Ok(self.onnx("Add", &[&product, &bias], out, &[]))
    }

    fn layer_norm(&mut self, x: &str, name: &str, eps: f32, out: &str) -> Result<String> {
        let scale = self.weight(&format!("{name}.weight"))?;
        let bias = self.weight(&format!("{name}.bias"))?;
        Ok(self.onnx(
            "LayerNormalization",
            &[x, &scale, &bias],
            out,
            &[
                ("axis", Attribute::Int(-1)),
                ("epsilon", Attribute::Float(eps)),
            ],
        ))
    }
}

/// ONNX `TensorProto.DataType` codes for Cast's `to`.
const ONNX_FLOAT: i64 = 1;
const ONNX_BOOL: i64 = 9;

fn tensor_info(name: &str, dtype: DType, dims: Vec<Dim>) -> ValueInfo {
    ValueInfo {
        name: name.into(),
        ty: Some(ValueType::tensor(dtype, Some(Shape(dims)))),
    }
}

/// The encoder + pooling graph (module doc). Inputs `input_ids`, `attention_mask`,
/// `token_type_ids` `[B, S]` and `position_ids` `[1, S]` (i64); output `embeddings` `[B, dim]`.
fn build_graph(ck: &Checkpoint, c: &BertConfig, normalize: bool) -> Result<Graph> {
    let mut b = EncoderBuilder {
        graph: Graph {
            name: "bert".into(),
            ..Graph::default()
        },
        ck,
        prefix: c.prefix,
    };
    let (batch, seq) = (Dim::Symbol("batch".into()), Dim::Symbol("seq".into()));
    for name in ["input_ids", "attention_mask", "token_type_ids"] {
        b.graph.inputs.push(tensor_info(
            name,
            DType::I64,
            vec![batch.clone(), seq.clone()],
        ));
    }
    b.graph.inputs.push(tensor_info(
        "position_ids",
        DType::I64,
        vec![Dim::Known(1), seq.clone()],
    ));
    b.graph.outputs.push(tensor_info(
        "embeddings",
        DType::F32,
        vec![batch, Dim::Known(c.hidden)],
    ));
    let axes = |b: &mut EncoderBuilder, name: &str, v: Vec<i64>| {
        let n = v.len();
        b.constant(name, Tensor::from_vec(vec![n], v).expect("an axes vector"))
    };
    let mask_axes = axes(&mut b, "mask_axes", vec![1, 2]);
    let seq_axis = axes(&mut b, "seq_axis", vec![1]);
    let feature_axis = axes(&mut b, "feature_axis", vec![2]);
    let to = |onnx_type: i64| [("to", Attribute::Int(onnx_type))];

    let word = b.weight("embeddings.word_embeddings.weight")?;
    let types = b.weight("embeddings.token_type_embeddings.weight")?;
    let positions = b.weight("embeddings.position_embeddings.weight")?;
    let we = b.onnx("Gather", &[&word, "input_ids"], "word_embedded", &[]);
    let te = b.onnx("Gather", &[&types, "token_type_ids"], "type_embedded", &[]);
    let pe = b.onnx(
        "Gather",
        &[&positions, "position_ids"],
        "position_embedded",
        &[],
    );
    let sum = b.onnx("Add", &[&we, &te], "word_type", &[]);
    let sum = b.onnx("Add", &[&sum, &pe], "embedded", &[]);
    let mut x = b.layer_norm(&sum, "embeddings.LayerNorm", c.eps, "embedded_norm")?;

    let mask4 = b.onnx("Unsqueeze", &["attention_mask", &mask_axes], "mask_4d", &[]);
    let keep = b.onnx("Cast", &[&mask4], "attention_keep", &to(ONNX_BOOL));
    let heads = Attribute::Int(c.heads as i64);
    for i in 0..c.layers {
        let l = |n: &str| format!("encoder.layer.{i}.{n}");
        let q = b.linear(&x, &l("attention.self.query"), &l("q"))?;
        let k = b.linear(&x, &l("attention.self.key"), &l("k"))?;
        let v = b.linear(&x, &l("attention.self.value"), &l("v"))?;
        let attended = b.onnx(
            "Attention",
            &[&q, &k, &v, &keep],
            &l("attended"),
            &[
                ("q_num_heads", heads.clone()),
                ("kv_num_heads", heads.clone()),
            ],
        );
        let o = b.linear(&attended, &l("attention.output.dense"), &l("attn_out"))?;
        let r = b.onnx("Add", &[&o, &x], &l("attn_resid"), &[]);
        x = b.layer_norm(&r, &l("attention.output.LayerNorm"), c.eps, &l("attn_norm"))?;
        let h = b.linear(&x, &l("intermediate.dense"), &l("ffn_in"))?;
        let h = b.onnx("Gelu", &[&h], &l("ffn_gelu"), &[]);
        let o = b.linear(&h, &l("output.dense"), &l("ffn_out"))?;
        let r = b.onnx("Add", &[&o, &x], &l("ffn_resid"), &[]);
        x = b.layer_norm(&r, &l("output.LayerNorm"), c.eps, &l("ffn_norm"))?;
    }
    let mask3 = b.onnx(
        "Unsqueeze",
        &["attention_mask", &feature_axis],
        "mask_3d",
        &[],
    );
    let weights = b.onnx("Cast", &[&mask3], "mask_weights", &to(ONNX_FLOAT));
    let masked = b.onnx("Mul", &[&x, &weights], "masked_states", &[]);
    let keepdims = [("keepdims", Attribute::Int(0))];
    let summed = b.onnx(
        "ReduceSum",
        &[&masked, &seq_axis],
        "summed_states",
        &keepdims,
    );
    let count = b.onnx(
        "ReduceSum",
        &[&weights, &seq_axis],
        "token_count",
        &keepdims,
    );
    if normalize {
        let mean = b.onnx("Div", &[&summed, &count], "mean_pooled", &[]);
        b.onnx(
            "LpNormalization",
            &[&mean],
            "embeddings",
            &[("axis", Attribute::Int(-1)), ("p", Attribute::Int(2))],
        );
    } else {
        b.onnx("Div", &[&summed, &count], "embeddings", &[]);
    }
    Ok(b.graph)
}

/// The receipt of one `samebits embed`: enough to re-run it anywhere and check the bits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingReceipt {
    pub format: String,
    pub engine: String,
    pub operation_set: OperationSet,
    /// Relative to the receipt's folder; sha256 as [`model_sha256`] defines it.
    pub model: FileRecord,
    pub texts: Vec<String>,
    pub token_ids: Vec<Vec<u32>>,
    pub normalize: bool,
    /// `[texts, dim]`.
    pub shape: Vec<usize>,
    /// The sha256 of the embeddings' little-endian f32 bytes.
    pub sha256: String,
}

/// The format tag of embedding receipts.
pub const RECEIPT_FORMAT: &str = "samebits-embedding-receipt/1";

impl EmbeddingReceipt {
    /// The receipt of `embeddings` of `texts`; `receipt_path` is where it will be written.
    pub fn new(
        embedder: &Embedder,
        texts: &[&str],
        embeddings: &Tensor,
        receipt_path: &Path,
    ) -> Result<EmbeddingReceipt> {
        let base = receipt_path.parent().unwrap_or(Path::new("."));
        Ok(EmbeddingReceipt {
            format: RECEIPT_FORMAT.into(),
            engine: samebits_runtime::ENGINE.into(),
            operation_set: embedder.operation_set,
            model: FileRecord {
                path: portable_path(&embedder.path, base),
                sha256: model_sha256(&embedder.path)?,
            },
            texts: texts.iter().map(|t| t.to_string()).collect(),
            token_ids: texts
                .iter()
                .map(|t| embedder.token_ids(t))
                .collect::<Result<_>>()?,
            normalize: embedder.normalize,
            shape: embeddings.shape().to_vec(),
            sha256: sha256_tensor(embeddings),
        })
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).expect("receipt serialises");
        std::fs::write(path, text + "\n").map_err(|e| unusable(path, format!("cannot write: {e}")))
    }

    pub fn read(path: &Path) -> Result<EmbeddingReceipt> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| unusable(path, format!("cannot read: {e}")))?;
        let receipt: EmbeddingReceipt = serde_json::from_str(&text)
            .map_err(|e| unusable(path, format!("not a samebits embedding receipt: {e}")))?;
        if receipt.format != RECEIPT_FORMAT {
            return Err(unusable(
                path,
                format!(
                    "receipt format {:?} is not {RECEIPT_FORMAT:?}",
                    receipt.format
                ),
            ));
        }
        Ok(receipt)
    }
}

/// Whether `text` (a receipt file's contents) is an embedding receipt.
pub fn is_embedding_receipt(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text)
        .is_ok_and(|v| v["format"].as_str() == Some(RECEIPT_FORMAT))
}

fn unusable(path: &Path, message: String) -> LlmError {
    LlmError::Receipt {
        path: path.to_path_buf(),
        message,
    }
}

/// What re-running an embedding receipt found.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddingCheck {
    /// Texts whose token ids differ from the receipt's.
    pub token_mismatches: Vec<usize>,
    /// The sha256 of the recomputed embeddings.
    pub sha256: String,
    pub expected_sha256: String,
}

impl EmbeddingCheck {
    pub fn matches(&self) -> bool {
        self.token_mismatches.is_empty() && self.sha256 == self.expected_sha256
    }
}

/// Re-runs the receipt at `path` on this machine. `Err`: the receipt or model is unusable
/// (missing, corrupt, another sha256); `Ok` with a mismatch: the bits differ.
pub fn verify(path: &Path) -> Result<EmbeddingCheck> {
    let receipt = EmbeddingReceipt::read(path)?;
    let model_path = path
        .parent()
        .unwrap_or(Path::new("."))
        .join(&receipt.model.path);
    let actual = model_sha256(&model_path)?;
    if actual != receipt.model.sha256 {
        return Err(unusable(
            &model_path,
            format!(
                "model sha256 is {actual}, the receipt records {}",
                receipt.model.sha256
            ),
        ));
    }
    let embedder = Embedder::load(&model_path, receipt.operation_set)?;
    let texts: Vec<&str> = receipt.texts.iter().map(String::as_str).collect();
    let ids = texts
        .iter()
        .map(|t| embedder.token_ids(t))
        .collect::<Result<Vec<_>>>()?;
    let token_mismatches = (0..texts.len())
        .filter(|&i| receipt.token_ids.get(i) != Some(&ids[i]))
        .collect();
    let embeddings = embedder.embed_ids(&ids)?;
    Ok(EmbeddingCheck {
        token_mismatches,
        sha256: sha256_tensor(&embeddings),
        expected_sha256: receipt.sha256,
    })
}
