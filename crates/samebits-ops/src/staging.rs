//! f32 staging for ops that compute in f32: reading f32, f16 and bf16 tensors as f32 (exact),
//! storing f32 results back in the input's dtype with one rounding (docs/contract.md,
//! "Arithmetic"), and reading the concrete shape of a statically typed input.

use std::borrow::Cow;

use crate::{Result, unsupported};
use half::{bf16, f16};
use samebits_ir::{DType, RecycledF32, Tensor, ValueType};

/// True for the dtypes [`f32_values`] and [`store_f32`] handle.
pub fn is_f32_staged(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
}

/// The elements of an f32, f16 or bf16 tensor as f32 (borrowed for f32). `what` names the
/// input in the error for other dtypes.
pub fn f32_values<'a>(t: &'a Tensor, what: &str) -> Result<Cow<'a, [f32]>> {
    Ok(match t.dtype() {
        DType::F32 => Cow::Borrowed(t.as_slice::<f32>()?),
        DType::F16 => Cow::Owned(t.as_slice::<f16>()?.iter().map(|v| v.to_f32()).collect()),
        DType::BF16 => Cow::Owned(t.as_slice::<bf16>()?.iter().map(|v| v.to_f32()).collect()),
        other => unsupported!("{what} of dtype {other} (f32, f16 and bf16 are supported)"),
    })
}

/// A tensor of `dtype` (f32, f16 or bf16) from f32 results, each rounded once to nearest even.
pub fn store_f32(dtype: DType, shape: Vec<usize>, data: Vec<f32>) -> Result<Tensor> {
    match dtype {
        DType::F32 => Ok(Tensor::from_vec(shape, data)?),
        _ => store_narrowed(dtype, shape, &data),
    }
}

/// [`store_f32`] for results in a [`RecycledF32`] (an f32 result keeps the buffer).
pub fn store_recycled_f32(dtype: DType, shape: Vec<usize>, data: RecycledF32) -> Result<Tensor> {
    match dtype {
        DType::F32 => Ok(Tensor::from_recycled(shape, data)?),
        _ => store_narrowed(dtype, shape, &data),
    }
}

/// f32 results rounded to f16 or bf16.
fn store_narrowed(dtype: DType, shape: Vec<usize>, data: &[f32]) -> Result<Tensor> {
    Ok(match dtype {
        DType::F16 => Tensor::from_vec(shape, data.iter().map(|&v| f16::from_f32(v)).collect())?,
        DType::BF16 => Tensor::from_vec(shape, data.iter().map(|&v| bf16::from_f32(v)).collect())?,
        other => unsupported!("results of dtype {other}"),
    })
}

/// The concrete shape of input `i` when its type is known.
pub fn known_shape(inputs: &[Option<ValueType>], i: usize) -> Option<Vec<usize>> {
    inputs.get(i)?.as_ref()?.shape()?.concrete()
}

/// The dtype of input `i` when its type is known.
pub fn known_dtype(inputs: &[Option<ValueType>], i: usize) -> Option<DType> {
    inputs.get(i)?.as_ref()?.dtype()
}

/// A tensor type of `dtype` and the given concrete shape.
pub fn tensor_type(dtype: DType, shape: &[usize]) -> ValueType {
    ValueType::tensor(dtype, Some(samebits_ir::Shape::known(shape)))
}
