//! Where the decoder's weights come from. [`WeightSource`] hands the graph builder each tensor
//! under its GGUF name (`token_embd.weight`, `blk.{i}.attn_q.weight`, ...), whatever file holds
//! it: a GGUF file (here) or a Hugging Face checkpoint ([`crate::hf`]). A weight matrix becomes
//! the raw ggml blocks of its rows, a `u8` tensor viewing the memory-mapped file (no f32 copy),
//! read by `samebits::MatMulGguf` and `samebits::GatherGguf`; a norm scale or a bias becomes a
//! plain f32 tensor.
//!
//! For the CPU, a GGUF source can also repack Q4_0 / Q4_1 / Q8_0 matrices once into row panels
//! (`docs/gguf.md`, "Row panels"), read from the file piece by piece with positioned reads so
//! that the memory map's pages never become resident beside the packed copy. Matrices that
//! multiply the same activations (Q, K, V; gate, up) can be stacked into one panel matrix whose
//! output the graph splits, which changes no bit: every output row is its own dot product.
//!
//! Q and K matrices (and biases) are in GGUF's row order: within each head, the rows are permuted
//! so that rotary embedding rotates adjacent pairs `(2i, 2i + 1)`. A source in Hugging Face's
//! half-split order is brought into it at load: a checkpoint by [`crate::hf`], a GGUF file that
//! llama.cpp's converter left in that order (qwen2) by [`HalfSplitGguf`], both with
//! [`crate::hf::adjacent_rotary_rows`].

use crate::{LlmError, Result};
use samebits_gguf::{GgmlType, GgufFile, TensorData};
use samebits_ir::{Attribute, Tensor};
use samebits_kernels::{has_panel_layout, pack_panels};

/// A `[rows, cols]` weight matrix in its ggml encoding.
pub struct MatrixWeight {
    /// The blocks of all rows, row after row.
    pub blocks: Tensor,
    pub ggml_type: GgmlType,
    pub rows: usize,
    pub cols: usize,
    /// `"rows"` (ggml rows as in the file) or `"panels"`: the ops' `layout` attribute.
    pub layout: &'static str,
}

impl MatrixWeight {
    /// The attributes of a `MatMulGguf` / `GatherGguf` node reading this weight.
    pub fn attributes(&self) -> [(&'static str, Attribute); 4] {
        [
            ("ggml_type", Attribute::Int(i64::from(self.ggml_type.id()))),
            ("rows", Attribute::Int(self.rows as i64)),
            ("cols", Attribute::Int(self.cols as i64)),
            ("layout", Attribute::String(self.layout.into())),
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

    /// The matrices `names` stacked along their rows (in that order) and packed into row panels,
    /// or `None` when this source has no panel layout for them (then each is read with
    /// [`WeightSource::matrix`]).
    fn panels(&self, _names: &[&str]) -> Result<Option<MatrixWeight>> {
        Ok(None)
    }

    /// The vector `name`, which the model must have.
    fn vector(&self, name: &str) -> Result<Tensor> {
        self.optional_vector(name)?
            .ok_or_else(|| self.missing(name))
    }
}

impl WeightSource for GgufFile {
    /// The matrix `name` (ggml dims `[cols, rows]`).
    fn matrix(&self, name: &str) -> Result<MatrixWeight> {
        let info = self
            .tensor_info(name)
            .ok_or_else(|| self.missing(name))?
            .clone();
        let [cols, rows] = info.dims[..] else {
            return Err(LlmError::Model {
                model: self.name().into(),
                message: format!("tensor {name} has dims {:?}, expected a matrix", info.dims),
            });
        };
        let blocks = match self.tensor(name)? {
            TensorData::Quantized(q) => q.blocks_tensor()?,
            // Plain float matrices are rare in quantized files; their bytes are copied once.
            TensorData::Dense(_) => {
                let bytes = self.tensor_bytes(name)?.to_vec();
                Tensor::from_vec(vec![bytes.len()], bytes)?
            }
        };
        Ok(MatrixWeight {
            blocks,
            ggml_type: info.ggml_type,
            rows: rows as usize,
            cols: cols as usize,
            layout: "rows",
        })
    }

    fn panels(&self, names: &[&str]) -> Result<Option<MatrixWeight>> {
        stacked(self, names)
    }

    fn optional_vector(&self, name: &str) -> Result<Option<Tensor>> {
        if self.tensor_info(name).is_none() {
            return Ok(None);
        }
        Ok(Some(vector(self, name)?))
    }

    fn missing(&self, name: &str) -> LlmError {
        LlmError::Model {
            model: self.name().into(),
            message: format!("tensor {name} is missing (not a llama-layout GGUF file?)"),
        }
    }
}

/// A GGUF file whose Q / K rows and biases are in the half-split rotary order
/// (`ModelConfig::qk_rows_half_split`): those are permuted into the adjacent-pair order as they
/// are read (a copy of each Q / K matrix); every other tensor passes through.
pub struct HalfSplitGguf<'a> {
    pub file: &'a GgufFile,
    pub heads: usize,
    pub kv_heads: usize,
}

impl HalfSplitGguf<'_> {
    /// The heads of the Q (`attn_q`) or K (`attn_k`) tensor `name` (1 for their per-head norm
    /// scales), else `None`.
    fn rotary_heads(&self, name: &str) -> Option<usize> {
        match name.split('.').nth(2)? {
            "attn_q" => Some(self.heads),
            "attn_k" => Some(self.kv_heads),
            // One head's features: the per-head Q / K norm scales.
            "attn_q_norm" | "attn_k_norm" => Some(1),
            _ => None,
        }
    }

    fn error(&self, name: &str, message: String) -> LlmError {
        LlmError::Model {
            model: self.file.name().into(),
            message: format!("tensor {name}: {message}"),
        }
    }
}

impl WeightSource for HalfSplitGguf<'_> {
    fn matrix(&self, name: &str) -> Result<MatrixWeight> {
        let matrix = self.file.matrix(name)?;
        let Some(heads) = self.rotary_heads(name) else {
            return Ok(matrix);
        };
        let bytes = matrix.blocks.bytes()?;
        let row_bytes = bytes.len() / matrix.rows.max(1);
        let permuted = crate::hf::adjacent_rotary_rows(bytes, heads, matrix.rows, row_bytes)
            .map_err(|m| self.error(name, m))?;
        Ok(MatrixWeight {
            blocks: Tensor::from_vec(vec![permuted.len()], permuted)?,
            ..matrix
        })
    }

    /// Panels of one Q or K matrix are packed from its rows read in the adjacent-pair order;
    /// a stack holding one is left to [`WeightSource::matrix`] (`None`).
    fn panels(&self, names: &[&str]) -> Result<Option<MatrixWeight>> {
        let rotary: Vec<usize> = names.iter().filter_map(|n| self.rotary_heads(n)).collect();
        let (&[name], &[heads]) = (names, rotary.as_slice()) else {
            return match rotary.is_empty() {
                true => self.file.panels(names),
                false => Ok(None),
            };
        };
        let (ggml_type, rows, cols) = matrix_info(self.file, name)?;
        let Some(row_bytes) = ggml_type.row_bytes(cols) else {
            return Ok(None);
        };
        if !has_panel_layout(ggml_type) {
            return Ok(None);
        }
        if heads == 0 || !rows.is_multiple_of(2 * heads) {
            return Err(self.error(
                name,
                format!("{rows} rows do not split into {heads} heads of an even size"),
            ));
        }
        let d = rows / heads;
        let packed = pack_panels(ggml_type, rows, cols, |first, out| {
            for (k, row) in out.chunks_exact_mut(row_bytes).enumerate() {
                let source = crate::hf::half_split_row(first + k, d);
                self.file.read_tensor_bytes(name, source * row_bytes, row)?;
            }
            Ok::<(), samebits_gguf::Error>(())
        })?;
        Ok(Some(MatrixWeight {
            blocks: Tensor::from_vec(vec![packed.len()], packed)?,
            ggml_type,
            rows,
            cols,
            layout: "panels",
        }))
    }

    fn optional_vector(&self, name: &str) -> Result<Option<Tensor>> {
        let Some(v) = self.file.optional_vector(name)? else {
            return Ok(None);
        };
        let Some(heads) = self.rotary_heads(name) else {
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
        self.file.missing(name)
    }
}

/// `(ggml type, rows, cols)` of the matrix `name` (ggml dims `[cols, rows]`).
fn matrix_info(file: &GgufFile, name: &str) -> Result<(GgmlType, usize, usize)> {
    let info = file.tensor_info(name).ok_or_else(|| file.missing(name))?;
    let [cols, rows] = info.dims[..] else {
        return Err(LlmError::Model {
            model: file.name().into(),
            message: format!("tensor {name} has dims {:?}, expected a matrix", info.dims),
        });
    };
    Ok((info.ggml_type, rows as usize, cols as usize))
}

/// The matrices `names` stacked along their rows (in that order) and packed into panels, or
/// `None` when they differ in type or columns, or their type has no panel layout.
fn stacked(file: &GgufFile, names: &[&str]) -> Result<Option<MatrixWeight>> {
    let infos = names
        .iter()
        .map(|name| matrix_info(file, name))
        .collect::<Result<Vec<_>>>()?;
    let Some(&(ggml_type, _, cols)) = infos.first() else {
        return Ok(None);
    };
    if !has_panel_layout(ggml_type) || infos.iter().any(|i| (i.0, i.2) != (ggml_type, cols)) {
        return Ok(None);
    }
    let row_bytes = ggml_type.row_bytes(cols).ok_or_else(|| LlmError::Model {
        model: file.name().into(),
        message: format!(
            "tensor {} has rows of {cols} {ggml_type} elements",
            names[0]
        ),
    })?;
    // The first (stacked) row of each part.
    let starts: Vec<usize> = infos
        .iter()
        .scan(0, |next, i| {
            let start = *next;
            *next += i.1;
            Some(start)
        })
        .collect();
    let rows = infos.iter().map(|i| i.1).sum();
    let packed = pack_panels(ggml_type, rows, cols, |first, out| {
        let (mut row, mut at) = (first, 0);
        while at < out.len() {
            let part = starts
                .iter()
                .rposition(|&s| s <= row)
                .expect("row 0 starts part 0");
            let count = (starts[part] + infos[part].1 - row).min((out.len() - at) / row_bytes);
            let bytes = &mut out[at..at + count * row_bytes];
            file.read_tensor_bytes(names[part], (row - starts[part]) * row_bytes, bytes)?;
            (row, at) = (row + count, at + count * row_bytes);
        }
        Ok::<(), samebits_gguf::Error>(())
    })?;
    Ok(Some(MatrixWeight {
        blocks: Tensor::from_vec(vec![packed.len()], packed)?,
        ggml_type,
        rows,
        cols,
        layout: "panels",
    }))
}

/// The vector `name` (a norm scale) as f32, copied out of the file (an F32 one with a positioned
/// read, which keeps the memory map's pages, possibly large folios, out of the process).
fn vector(file: &GgufFile, name: &str) -> Result<Tensor> {
    let info = file.tensor_info(name).ok_or_else(|| file.missing(name))?;
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
