//! Where the decoder's weights come from. [`WeightSource`] hands the graph builder each tensor
//! under its GGUF name (`token_embd.weight`, `blk.{i}.attn_q.weight`, ...), whatever file holds
//! it: a GGUF file (here) or a Hugging Face checkpoint ([`crate::hf`]). A weight matrix becomes
//! the raw ggml blocks of its rows, a `u8` tensor viewing the memory-mapped file (no f32 copy),
//! read by `samebits::MatMulGguf` and `samebits::GatherGguf`; a norm scale or a bias becomes a
//! plain f32 tensor.
//!
//! The weights are the same whatever device runs the graph: the CPU's `MatMulGguf` packs Q4_0 /
//! Q4_1 / Q8_0 rows into its row panels itself, on first use (samebits-ops `gguf_matmul.rs`).
//!
//! Q and K matrices (and biases) are in GGUF's row order: within each head, the rows are permuted
//! so that rotary embedding rotates adjacent pairs `(2i, 2i + 1)`. A source in Hugging Face's
//! half-split order is brought into it at load: a checkpoint by [`crate::hf`], a GGUF file that
//! llama.cpp's converter left in that order (qwen2, qwen3, phi3) by [`GgufWeights`], both with
//! [`crate::hf::half_split_row`].

use crate::{LlmError, Result};
use samebits_gguf::{GgmlType, GgufFile, ModelConfig, TensorData};
use samebits_ir::{Attribute, Tensor};

/// A `[rows, cols]` weight matrix in its ggml encoding.
pub struct MatrixWeight {
    /// The blocks of all rows, row after row.
    pub blocks: Tensor,
    pub ggml_type: GgmlType,
    pub rows: usize,
    pub cols: usize,
}

impl MatrixWeight {
    /// The attributes of a `MatMulGguf` / `GatherGguf` node reading this weight.
    pub fn attributes(&self) -> [(&'static str, Attribute); 3] {
        [
            ("ggml_type", Attribute::Int(i64::from(self.ggml_type.id()))),
            ("rows", Attribute::Int(self.rows as i64)),
            ("cols", Attribute::Int(self.cols as i64)),
        ]
    }
}

/// The tensors of a llama-layout decoder under their GGUF names.
pub trait WeightSource {
    /// The `[rows, cols]` matrix `name`.
    fn matrix(&self, name: &str) -> Result<MatrixWeight>;
    /// The vector `name` (a norm scale, a bias) as f32, or `None` when the model has none.
    fn optional_vector(&self, name: &str) -> Result<Option<Tensor>>;
    /// The error for a required tensor the model lacks.
    fn missing(&self, name: &str) -> LlmError;

    /// The vector `name`, which the model must have.
    fn vector(&self, name: &str) -> Result<Tensor> {
        self.optional_vector(name)?
            .ok_or_else(|| self.missing(name))
    }
}

/// The heads whose rows the Q / K tensor part `part` (`attn_q`, `attn_k`) holds, 1 for their
/// per-head norm scales (`attn_q_norm`, `attn_k_norm`), else `None`: the units that a
/// half-split rotary order is permuted within ([`crate::hf::adjacent_rotary_rows`]).
pub(crate) fn rotary_heads(part: &str, c: &ModelConfig) -> Option<usize> {
    match part {
        "attn_q" => Some(c.head_count),
        "attn_k" => Some(c.head_count_kv),
        "attn_q_norm" | "attn_k_norm" => Some(1),
        _ => None,
    }
}

/// Phi-3's fused projections: the fused part (GGUF's name) that holds matrix part `part` of a
/// layer, and its rows `(first, count)`: Q, K and V are consecutive rows of `attn_qkv`, gate and
/// up the two halves of an `ffn_up` of twice the feed-forward width.
pub(crate) fn fused_rows(part: &str, c: &ModelConfig) -> Option<(&'static str, usize, usize)> {
    let (q, kv, ffn) = (
        c.head_count * c.head_dim,
        c.head_count_kv * c.head_dim,
        c.feed_forward_length,
    );
    Some(match part {
        "attn_q" => ("attn_qkv", 0, q),
        "attn_k" => ("attn_qkv", q, kv),
        "attn_v" => ("attn_qkv", q + kv, kv),
        "ffn_gate" => ("ffn_up", 0, ffn),
        "ffn_up" => ("ffn_up", ffn, ffn),
        _ => return None,
    })
}

/// The llama-layout weights of a GGUF file ([`ModelConfig`] tells how the file stores them).
/// Each matrix the graph asks for is a range of rows of one file tensor:
/// - the tensor of that name, or, where the file fuses projections (phi3), a slice of the fused
///   one: `attn_q` / `attn_k` / `attn_v` are consecutive row ranges of `attn_qkv`, `ffn_gate`
///   and `ffn_up` the two halves of an `ffn_up` of twice the feed-forward width;
/// - with [`ModelConfig::qk_rows_half_split`] (qwen2, qwen3, phi3), the Q / K rows (and biases,
///   and Qwen3's per-head norm scales) read in the adjacent-pair order
///   ([`crate::hf::half_split_row`]).
///
/// A whole tensor in its own order is a view of the memory map; any other range is copied once,
/// row by row with positioned reads.
pub struct GgufWeights<'a> {
    pub file: &'a GgufFile,
    pub config: &'a ModelConfig,
}

/// Where a matrix lives: rows `first..first + rows` of the file tensor `tensor`, each head of
/// `half_split` rows (when set) read in the adjacent-pair order.
struct RowRange {
    tensor: String,
    first: usize,
    rows: usize,
    half_split: Option<usize>,
    /// The whole tensor in its own order.
    whole: bool,
}

impl GgufWeights<'_> {
    /// [`rotary_heads`] when the file holds Q / K rows in the half-split order.
    fn half_split_heads(&self, part: &str) -> Option<usize> {
        self.config
            .qk_rows_half_split
            .then(|| rotary_heads(part, self.config))
            .flatten()
    }

    /// Where the matrix `name` lives (type docs), or the missing-tensor error.
    fn locate(&self, name: &str) -> Result<(RowRange, GgmlType, usize)> {
        let mut parts = name.split('.');
        let (layer, part) = match (parts.next(), parts.next(), parts.next()) {
            (Some("blk"), Some(layer), Some(part)) => (layer, part),
            _ => ("", ""),
        };
        let gate_fused = self
            .file
            .tensor_info(&format!("blk.{layer}.ffn_gate.weight"))
            .is_none();
        let own = self.file.tensor_info(name).is_some() && !(gate_fused && part == "ffn_up");
        let slice = match own {
            true => None,
            false => fused_rows(part, self.config).and_then(|(fused, first, rows)| {
                let tensor = format!("blk.{layer}.{fused}.weight");
                self.file
                    .tensor_info(&tensor)
                    .is_some()
                    .then_some((tensor, first, rows))
            }),
        };
        let tensor = slice.as_ref().map_or(name, |s| s.0.as_str());
        let (ggml_type, rows, cols) = matrix_info(self.file, tensor)?;
        let (first, count) = slice.as_ref().map_or((0, rows), |s| (s.1, s.2));
        if first + count > rows {
            return Err(self.error(
                tensor,
                format!(
                    "{rows} rows, but {name} needs rows {first}..{}",
                    first + count
                ),
            ));
        }
        let half_split = match self.half_split_heads(part) {
            Some(heads) if heads > 0 && count.is_multiple_of(2 * heads) => Some(count / heads),
            Some(heads) => {
                return Err(self.error(
                    name,
                    format!("{count} rows do not split into {heads} heads of an even size"),
                ));
            }
            None => None,
        };
        let range = RowRange {
            tensor: tensor.to_string(),
            first,
            rows: count,
            whole: slice.is_none() && half_split.is_none(),
            half_split,
        };
        Ok((range, ggml_type, cols))
    }

    /// Rows `first..first + out.len() / row_bytes` of `range`, in its order.
    fn read_rows(
        &self,
        range: &RowRange,
        first: usize,
        row_bytes: usize,
        out: &mut [u8],
    ) -> std::result::Result<(), samebits_gguf::Error> {
        let Some(d) = range.half_split else {
            let offset = (range.first + first) * row_bytes;
            return self.file.read_tensor_bytes(&range.tensor, offset, out);
        };
        for (k, row) in out.chunks_exact_mut(row_bytes).enumerate() {
            let source = range.first + crate::hf::half_split_row(first + k, d);
            self.file
                .read_tensor_bytes(&range.tensor, source * row_bytes, row)?;
        }
        Ok(())
    }

    fn error(&self, name: &str, message: String) -> LlmError {
        LlmError::Model {
            model: self.file.name().into(),
            message: format!("tensor {name}: {message}"),
        }
    }
}

impl WeightSource for GgufWeights<'_> {
    fn matrix(&self, name: &str) -> Result<MatrixWeight> {
        let (range, ggml_type, cols) = self.locate(name)?;
        let blocks = match self.file.tensor(&range.tensor)? {
            TensorData::Quantized(q) if range.whole => q.blocks_tensor()?,
            _ => {
                let row_bytes = ggml_type.row_bytes(cols).ok_or_else(|| {
                    self.error(name, format!("rows of {cols} {ggml_type} elements"))
                })?;
                let mut bytes = vec![0u8; range.rows * row_bytes];
                self.read_rows(&range, 0, row_bytes, &mut bytes)?;
                Tensor::from_vec(vec![bytes.len()], bytes)?
            }
        };
        Ok(MatrixWeight {
            blocks,
            ggml_type,
            rows: range.rows,
            cols,
        })
    }

    fn optional_vector(&self, name: &str) -> Result<Option<Tensor>> {
        if self.file.tensor_info(name).is_none() {
            return Ok(None);
        }
        let v = vector(self.file, name)?;
        let Some(heads) = self.half_split_heads(name.split('.').nth(2).unwrap_or("")) else {
            return Ok(Some(v));
        };
        let permuted = crate::hf::adjacent_rotary_rows(v.bytes()?, heads, v.numel(), 4)
            .map_err(|m| self.error(name, m))?;
        let values: Vec<f32> = permuted
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Ok(Some(Tensor::from_vec(v.shape().to_vec(), values)?))
    }

    fn missing(&self, name: &str) -> LlmError {
        missing(self.file, name)
    }
}

/// The error for a tensor `name` the file lacks.
fn missing(file: &GgufFile, name: &str) -> LlmError {
    LlmError::Model {
        model: file.name().into(),
        message: format!("tensor {name} is missing (not a llama-layout GGUF file?)"),
    }
}

/// `(ggml type, rows, cols)` of the matrix `name` (ggml dims `[cols, rows]`).
fn matrix_info(file: &GgufFile, name: &str) -> Result<(GgmlType, usize, usize)> {
    let info = file.tensor_info(name).ok_or_else(|| missing(file, name))?;
    let [cols, rows] = info.dims[..] else {
        return Err(LlmError::Model {
            model: file.name().into(),
            message: format!("tensor {name} has dims {:?}, expected a matrix", info.dims),
        });
    };
    Ok((info.ggml_type, rows as usize, cols as usize))
}

/// The vector `name` (a norm scale) as f32, copied out of the file (an F32 one with a positioned
/// read, which keeps the memory map's pages, possibly large folios, out of the process).
fn vector(file: &GgufFile, name: &str) -> Result<Tensor> {
    let info = file.tensor_info(name).ok_or_else(|| missing(file, name))?;
    if info.ggml_type != GgmlType::F32 {
        return Ok(file.tensor(name)?.to_f32()?);
    }
    let mut bytes = vec![0u8; info.size];
    file.read_tensor_bytes(name, 0, &mut bytes)?;
    let values = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    Ok(Tensor::from_vec(info.shape(), values)?)
}
