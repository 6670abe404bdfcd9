//! GGUF tensors as graph initializers. A weight matrix becomes the raw ggml blocks of its rows, a
//! `u8` tensor viewing the memory-mapped file (no f32 copy), read by `samebits::MatMulGguf` and
//! `samebits::GatherGguf`; a norm scale becomes a plain f32 tensor.

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

/// The matrix `name` (ggml dims `[cols, rows]`).
pub fn matrix(file: &GgufFile, name: &str) -> Result<MatrixWeight> {
    let info = file
        .tensor_info(name)
        .ok_or_else(|| missing(file, name))?
        .clone();
    let [cols, rows] = info.dims[..] else {
        return Err(LlmError::Model {
            model: file.name().into(),
            message: format!("tensor {name} has dims {:?}, expected a matrix", info.dims),
        });
    };
    let blocks = match file.tensor(name)? {
        TensorData::Quantized(q) => q.blocks_tensor()?,
        // Plain float matrices are rare in quantized files; their bytes are copied once.
        TensorData::Dense(_) => {
            let bytes = file.tensor_bytes(name)?.to_vec();
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

/// The vector `name` (a norm scale) as f32.
pub fn vector(file: &GgufFile, name: &str) -> Result<Tensor> {
    if file.tensor_info(name).is_none() {
        return Err(missing(file, name));
    }
    Ok(file.tensor(name)?.to_f32()?)
}

fn missing(file: &GgufFile, name: &str) -> LlmError {
    LlmError::Model {
        model: file.name().into(),
        message: format!("tensor {name} is missing (not a llama-layout GGUF file?)"),
    }
}
