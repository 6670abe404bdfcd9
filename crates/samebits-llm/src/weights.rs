//! Where the decoder's weights come from. [`WeightSource`] hands the graph builder each tensor
//! under its GGUF name (`token_embd.weight`, `blk.{i}.attn_q.weight`, ...), whatever file holds
//! it: a GGUF file (here) or a Hugging Face checkpoint ([`crate::hf`]). A weight matrix becomes
//! the raw ggml blocks of its rows, a `u8` tensor viewing the memory-mapped file (no f32 copy),
//! read by `samebits::MatMulGguf` and `samebits::GatherGguf`; a norm scale or a bias becomes a
//! plain f32 tensor.
//!
//! Q and K matrices (and biases) are in GGUF's row order: within each head, the rows are permuted
//! so that rotary embedding rotates adjacent pairs `(2i, 2i + 1)` (see [`crate::hf`] for the one
//! place a checkpoint in another order is brought into it).

use crate::{LlmError, Result};
use samebits_gguf::{GgmlType, GgufFile, TensorData};
use samebits_ir::Tensor;

/// A `[rows, cols]` weight matrix in its ggml encoding.
pub struct MatrixWeight {
    /// The blocks of all rows, row after row.
    pub blocks: Tensor,
    pub ggml_type: GgmlType,
    pub rows: usize,
    pub cols: usize,
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
        })
    }

    fn optional_vector(&self, name: &str) -> Result<Option<Tensor>> {
        if self.tensor_info(name).is_none() {
            return Ok(None);
        }
        Ok(Some(self.tensor(name)?.to_f32()?))
    }

    fn missing(&self, name: &str) -> LlmError {
        LlmError::Model {
            model: self.name().into(),
            message: format!("tensor {name} is missing (not a llama-layout GGUF file?)"),
        }
    }
}
