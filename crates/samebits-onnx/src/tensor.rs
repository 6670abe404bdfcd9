//! `TensorProto` ↔ [`Tensor`]: decoding every IR-mappable data type from `raw_data`, from the
//! typed repeated fields or from external data; densifying `SparseTensorProto`; encoding a tensor
//! back into a `TensorProto`.
//!
//! The storage-only dtypes (float8, float4, 4- and 2-bit integers) are packed in files as ONNX
//! says (two 4-bit or four 2-bit elements to a byte, first in the lowest bits) and unpacked to a
//! byte per element in memory.
//!
//! Sizes read from a file are never trusted: a tensor's element count is checked against the
//! bytes or values actually present before anything is allocated for it.

use crate::error::{OnnxError, Result};
use crate::external::{ExternalData, is_external};
use crate::proto::{SparseTensorProto, TensorProto};
use crate::types::{dtype_from_onnx, onnx_data_type};
use samebits_ir::{ByteSource, DType, Tensor, checked_numel, small_types};
use std::path::Path;
use std::sync::Arc;

/// The largest tensor, in bytes, that densifying a sparse tensor may create.
pub const MAX_DENSIFIED_BYTES: usize = 1 << 30;

/// Decodes a `TensorProto`. External data is resolved against `model_dir`.
pub fn tensor_from_proto(proto: TensorProto, model_dir: Option<&Path>) -> Result<Tensor> {
    let name = proto.name().to_string();
    decode_tensor(proto, &mut ExternalData::new(model_dir))
        .map_err(|e| e.within(format!("tensor \"{name}\"")))
}

/// The dims of a tensor as sizes; negative dims are an error.
fn shape_from_dims(dims: &[i64]) -> Result<Vec<usize>> {
    dims.iter()
        .map(|&d| {
            usize::try_from(d)
                .map_err(|_| OnnxError::invalid(format!("tensor has negative dim {d} in {dims:?}")))
        })
        .collect()
}

/// The typed repeated fields of a `TensorProto` that hold values, by field name.
fn filled_typed_fields(p: &TensorProto) -> impl Iterator<Item = &'static str> {
    [
        ("float_data", !p.float_data.is_empty()),
        ("int32_data", !p.int32_data.is_empty()),
        ("string_data", !p.string_data.is_empty()),
        ("int64_data", !p.int64_data.is_empty()),
        ("double_data", !p.double_data.is_empty()),
        ("uint64_data", !p.uint64_data.is_empty()),
    ]
    .into_iter()
    .filter_map(|(name, filled)| filled.then_some(name))
}

/// The typed field the ONNX schema assigns to a dtype.
fn typed_field(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float_data",
        DType::F64 => "double_data",
        DType::I64 => "int64_data",
        DType::U32 | DType::U64 => "uint64_data",
        DType::String => "string_data",
        DType::F16
        | DType::BF16
        | DType::I8
        | DType::I16
        | DType::I32
        | DType::U8
        | DType::U16
        | DType::Bool
        | DType::F8E4M3FN
        | DType::F8E4M3FNUZ
        | DType::F8E5M2
        | DType::F8E5M2FNUZ
        | DType::F8E8M0
        | DType::F4E2M1
        | DType::I4
        | DType::U4
        | DType::I2
        | DType::U2 => "int32_data",
    }
}

/// Narrows the values of a typed field to the element type, refusing values out of its range.
fn narrow<S: Copy + std::fmt::Display, T: TryFrom<S>>(
    values: &[S],
    dtype: DType,
    field: &str,
) -> Result<Vec<T>> {
    values
        .iter()
        .map(|&v| {
            T::try_from(v).map_err(|_| {
                OnnxError::invalid(format!("{field} value {v} does not fit a {dtype} tensor"))
            })
        })
        .collect()
}

/// Decodes a tensor, resolving external data through `external`.
pub(crate) fn decode_tensor(proto: TensorProto, external: &mut ExternalData) -> Result<Tensor> {
    let dtype = dtype_from_onnx(proto.data_type.unwrap_or(0))?;
    let shape = shape_from_dims(&proto.dims)?;
    let numel = checked_numel(&shape)?;
    if proto.segment.is_some() {
        return Err(OnnxError::unsupported(
            "segmented tensor (TensorProto.segment)",
        ));
    }
    let typed_fields: Vec<_> = filled_typed_fields(&proto).collect();
    if is_external(&proto) {
        if proto.raw_data.is_some() || !typed_fields.is_empty() {
            return Err(OnnxError::invalid(
                "tensor has both external data and inline data",
            ));
        }
        return external.tensor(dtype, shape, &proto.external_data);
    }
    if let Some(raw) = proto.raw_data {
        if let Some(field) = typed_fields.first() {
            return Err(OnnxError::invalid(format!(
                "tensor has both raw_data and {field}"
            )));
        }
        if dtype == DType::String {
            return Err(OnnxError::invalid("string tensor stores raw_data"));
        }
        if dtype.is_storage_only() {
            return storage_tensor(dtype, shape, &raw, "raw_data");
        }
        let needed = numel
            .checked_mul(dtype.size())
            .ok_or_else(|| OnnxError::invalid(format!("shape {shape:?} is too large")))?;
        if raw.len() != needed {
            return Err(OnnxError::invalid(format!(
                "{dtype} tensor of shape {shape:?} needs {needed} bytes of raw_data, has {}",
                raw.len()
            )));
        }
        let len = raw.len();
        let source: Arc<dyn ByteSource> = Arc::new(raw);
        return Ok(Tensor::from_source(dtype, shape, source, 0, len)?);
    }
    let field = typed_field(dtype);
    if dtype.is_storage_only() {
        if let Some(other) = typed_fields.iter().find(|&&f| f != field) {
            return Err(OnnxError::invalid(format!(
                "{dtype} tensor stores its values in {other}, not {field}"
            )));
        }
        let bytes: Vec<u8> = narrow(&proto.int32_data, dtype, field)?;
        return storage_tensor(dtype, shape, &bytes, field);
    }
    if let Some(other) = typed_fields.iter().find(|&&f| f != field) {
        return Err(OnnxError::invalid(format!(
            "{dtype} tensor stores its values in {other}, not {field}"
        )));
    }
    let count = match field {
        "float_data" => proto.float_data.len(),
        "int32_data" => proto.int32_data.len(),
        "string_data" => proto.string_data.len(),
        "int64_data" => proto.int64_data.len(),
        "double_data" => proto.double_data.len(),
        _ => proto.uint64_data.len(),
    };
    if count != numel {
        return Err(OnnxError::invalid(format!(
            "{dtype} tensor of shape {shape:?} needs {numel} values, {field} has {count}"
        )));
    }
    let ints = &proto.int32_data;
    let tensor = match dtype {
        DType::F32 => Tensor::from_vec(shape, proto.float_data),
        DType::F64 => Tensor::from_vec(shape, proto.double_data),
        DType::I64 => Tensor::from_vec(shape, proto.int64_data),
        DType::U64 => Tensor::from_vec(shape, proto.uint64_data),
        DType::U32 => Tensor::from_vec::<u32>(shape, narrow(&proto.uint64_data, dtype, field)?),
        DType::I32 => Tensor::from_vec(shape, proto.int32_data),
        DType::I16 => Tensor::from_vec::<i16>(shape, narrow(ints, dtype, field)?),
        DType::I8 => Tensor::from_vec::<i8>(shape, narrow(ints, dtype, field)?),
        DType::U16 => Tensor::from_vec::<u16>(shape, narrow(ints, dtype, field)?),
        DType::U8 => Tensor::from_vec::<u8>(shape, narrow(ints, dtype, field)?),
        // Half-precision values are stored as their 16-bit patterns.
        DType::F16 => Tensor::from_vec(
            shape,
            narrow::<i32, u16>(ints, dtype, field)?
                .into_iter()
                .map(half::f16::from_bits)
                .collect(),
        ),
        DType::BF16 => Tensor::from_vec(
            shape,
            narrow::<i32, u16>(ints, dtype, field)?
                .into_iter()
                .map(half::bf16::from_bits)
                .collect(),
        ),
        DType::Bool => {
            let bools = ints.iter().map(|&v| match v {
                0 => Ok(false),
                1 => Ok(true),
                _ => Err(OnnxError::invalid(format!(
                    "int32_data value {v} is not a bool (0 or 1)"
                ))),
            });
            Tensor::from_bools(shape, bools.collect::<Result<_>>()?)
        }
        DType::F8E4M3FN
        | DType::F8E4M3FNUZ
        | DType::F8E5M2
        | DType::F8E5M2FNUZ
        | DType::F8E8M0
        | DType::F4E2M1
        | DType::I4
        | DType::U4
        | DType::I2
        | DType::U2 => unreachable!("storage-only dtypes decoded above"),
        DType::String => {
            let strings = proto.string_data.into_iter().enumerate().map(|(i, s)| {
                String::from_utf8(s).map_err(|_| {
                    OnnxError::unsupported(format!(
                        "string element {i} is not UTF-8 (the IR holds text strings)"
                    ))
                })
            });
            Tensor::from_strings(shape, strings.collect::<Result<_>>()?)
        }
    };
    Ok(tensor?)
}

/// A storage-only tensor from its file bytes (`field` names where they came from): packed for
/// the 4- and 2-bit dtypes, one byte per element otherwise.
pub(crate) fn storage_tensor(
    dtype: DType,
    shape: Vec<usize>,
    bytes: &[u8],
    field: &str,
) -> Result<Tensor> {
    let numel = checked_numel(&shape)?;
    let needed = small_types::packed_len(dtype, numel);
    if bytes.len() != needed {
        return Err(OnnxError::invalid(format!(
            "{dtype} tensor of shape {shape:?} needs {needed} bytes in {field}, has {}",
            bytes.len()
        )));
    }
    let codes = small_types::unpack(dtype, bytes, numel);
    Ok(Tensor::from_codes(dtype, shape, codes)?)
}

/// Densifies a sparse tensor: `values` (shape `[nnz]`) placed at `indices` (shape `[nnz]` of
/// linear indices, or `[nnz, rank]` of coordinates) in a zero tensor of shape `dims`.
pub(crate) fn densify_sparse(
    sparse: SparseTensorProto,
    external: &mut ExternalData,
) -> Result<Tensor> {
    let values = sparse
        .values
        .ok_or_else(|| OnnxError::invalid("sparse tensor has no values"))?;
    let values = decode_tensor(values, external).map_err(|e| e.within("values"))?;
    let indices = match sparse.indices {
        Some(indices) => decode_tensor(indices, external).map_err(|e| e.within("indices"))?,
        None => Tensor::from_vec::<i64>(vec![0], vec![])?,
    };
    let shape = shape_from_dims(&sparse.dims)?;
    let numel = checked_numel(&shape)?;
    let nnz = values.numel();
    if values.rank() != 1 {
        return Err(OnnxError::invalid(format!(
            "sparse values must be rank 1, have shape {:?}",
            values.shape()
        )));
    }
    let indices = indices
        .as_slice::<i64>()
        .map_err(|_| OnnxError::invalid("sparse indices must be int64"))?;
    let linear: Vec<usize> = if indices.len() == nnz {
        indices
            .iter()
            .map(|&i| usize::try_from(i).ok().filter(|&i| i < numel))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                OnnxError::invalid(format!("sparse index out of range for shape {shape:?}"))
            })?
    } else if Some(indices.len()) == nnz.checked_mul(shape.len()) && !shape.is_empty() {
        indices
            .chunks_exact(shape.len())
            .map(|coords| {
                coords.iter().zip(&shape).try_fold(0usize, |acc, (&c, &d)| {
                    usize::try_from(c)
                        .ok()
                        .filter(|&c| c < d)
                        .map(|c| acc * d + c)
                })
            })
            .collect::<Option<_>>()
            .ok_or_else(|| {
                OnnxError::invalid(format!(
                    "sparse coordinate out of range for shape {shape:?}"
                ))
            })?
    } else {
        return Err(OnnxError::invalid(format!(
            "{} sparse indices do not match {nnz} values of rank {}",
            indices.len(),
            shape.len()
        )));
    };
    let dtype = values.dtype();
    let element_bytes = match dtype {
        DType::String => std::mem::size_of::<String>(),
        _ => dtype.size(),
    };
    if numel.saturating_mul(element_bytes) > MAX_DENSIFIED_BYTES {
        return Err(OnnxError::unsupported(format!(
            "sparse tensor of shape {shape:?} densifies to more than {MAX_DENSIFIED_BYTES} bytes"
        )));
    }
    if dtype == DType::String {
        let mut dense = vec![String::new(); numel];
        for (&at, value) in linear.iter().zip(values.as_strings()?) {
            dense[at] = value.clone();
        }
        return Ok(Tensor::from_strings(shape, dense)?);
    }
    let size = dtype.size();
    let mut dense = vec![0u8; numel * size];
    for (&at, value) in linear.iter().zip(values.bytes()?.chunks_exact(size)) {
        dense[at * size..(at + 1) * size].copy_from_slice(value);
    }
    Ok(Tensor::from_le_bytes(dtype, shape, &dense)?)
}

/// Encodes a tensor as a `TensorProto`: `raw_data` for numbers and bools (4- and 2-bit dtypes
/// packed), `string_data` for strings.
pub fn tensor_to_proto(tensor: &Tensor, name: &str) -> TensorProto {
    let mut proto = TensorProto {
        dims: tensor.shape().iter().map(|&d| d as i64).collect(),
        data_type: Some(onnx_data_type(tensor.dtype())),
        name: (!name.is_empty()).then(|| name.to_string()),
        ..Default::default()
    };
    match tensor.as_strings() {
        Ok(strings) => proto.string_data = strings.iter().map(|s| s.clone().into_bytes()).collect(),
        Err(_) => {
            let bytes = tensor.bytes().unwrap_or_default();
            proto.raw_data = Some(small_types::pack(tensor.dtype(), bytes));
        }
    }
    proto
}
