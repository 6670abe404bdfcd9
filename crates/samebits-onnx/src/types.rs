//! ONNX types → IR types: the one table from `TensorProto.DataType` codes to [`DType`], and
//! `TypeProto` → [`ValueType`] with symbolic dims.

use crate::error::{OnnxError, Result};
use crate::proto::tensor_proto::DataType;
use crate::proto::tensor_shape_proto::dimension;
use crate::proto::{TensorShapeProto, TypeProto, type_proto};
use samebits_ir::{DType, Dim, Shape, ValueType};

/// The IR dtype of an ONNX data type, or `None` for types the IR cannot hold (complex numbers)
/// and for `UNDEFINED`.
fn ir_dtype(data_type: DataType) -> Option<DType> {
    match data_type {
        DataType::Float => Some(DType::F32),
        DataType::Double => Some(DType::F64),
        DataType::Float16 => Some(DType::F16),
        DataType::Bfloat16 => Some(DType::BF16),
        DataType::Int8 => Some(DType::I8),
        DataType::Int16 => Some(DType::I16),
        DataType::Int32 => Some(DType::I32),
        DataType::Int64 => Some(DType::I64),
        DataType::Uint8 => Some(DType::U8),
        DataType::Uint16 => Some(DType::U16),
        DataType::Uint32 => Some(DType::U32),
        DataType::Uint64 => Some(DType::U64),
        DataType::Bool => Some(DType::Bool),
        DataType::String => Some(DType::String),
        DataType::Float8e4m3fn => Some(DType::F8E4M3FN),
        DataType::Float8e4m3fnuz => Some(DType::F8E4M3FNUZ),
        DataType::Float8e5m2 => Some(DType::F8E5M2),
        DataType::Float8e5m2fnuz => Some(DType::F8E5M2FNUZ),
        DataType::Float8e8m0 => Some(DType::F8E8M0),
        DataType::Float4e2m1 => Some(DType::F4E2M1),
        DataType::Int4 => Some(DType::I4),
        DataType::Uint4 => Some(DType::U4),
        DataType::Int2 => Some(DType::I2),
        DataType::Uint2 => Some(DType::U2),
        DataType::Undefined | DataType::Complex64 | DataType::Complex128 => None,
    }
}

/// The ONNX data type code of an IR dtype.
pub fn onnx_data_type(dtype: DType) -> i32 {
    let data_type = match dtype {
        DType::F32 => DataType::Float,
        DType::F64 => DataType::Double,
        DType::F16 => DataType::Float16,
        DType::BF16 => DataType::Bfloat16,
        DType::I8 => DataType::Int8,
        DType::I16 => DataType::Int16,
        DType::I32 => DataType::Int32,
        DType::I64 => DataType::Int64,
        DType::U8 => DataType::Uint8,
        DType::U16 => DataType::Uint16,
        DType::U32 => DataType::Uint32,
        DType::U64 => DataType::Uint64,
        DType::Bool => DataType::Bool,
        DType::String => DataType::String,
        DType::F8E4M3FN => DataType::Float8e4m3fn,
        DType::F8E4M3FNUZ => DataType::Float8e4m3fnuz,
        DType::F8E5M2 => DataType::Float8e5m2,
        DType::F8E5M2FNUZ => DataType::Float8e5m2fnuz,
        DType::F8E8M0 => DataType::Float8e8m0,
        DType::F4E2M1 => DataType::Float4e2m1,
        DType::I4 => DataType::Int4,
        DType::U4 => DataType::Uint4,
        DType::I2 => DataType::Int2,
        DType::U2 => DataType::Uint2,
    };
    data_type as i32
}

/// The schema's name of an ONNX data type code (`FLOAT8E4M3FN`), or `unknown`.
pub fn onnx_data_type_name(code: i32) -> &'static str {
    DataType::try_from(code).map_or("unknown", |d| d.as_str_name())
}

/// The IR dtype of an ONNX data type code; a clear error for types the IR cannot hold and for
/// codes the schema does not define.
pub fn dtype_from_onnx(code: i32) -> Result<DType> {
    let data_type = DataType::try_from(code)
        .map_err(|_| OnnxError::invalid(format!("unknown ONNX data type {code}")))?;
    if data_type == DataType::Undefined {
        return Err(OnnxError::invalid("data type is UNDEFINED"));
    }
    ir_dtype(data_type).ok_or(OnnxError::UnsupportedDataType {
        file: String::new(),
        at: Default::default(),
        type_name: data_type.as_str_name(),
        code,
    })
}

/// Names the dims a file leaves blank (`unk__0`, `unk__1`, ...), unique within one import.
#[derive(Default)]
pub(crate) struct UnknownDims {
    issued: usize,
}

impl UnknownDims {
    fn next(&mut self) -> Dim {
        self.issued += 1;
        Dim::Symbol(format!("unk__{}", self.issued - 1))
    }
}

fn shape_from_proto(shape: &TensorShapeProto, unknown: &mut UnknownDims) -> Shape {
    Shape(
        shape
            .dim
            .iter()
            .map(|d| match &d.value {
                Some(dimension::Value::DimValue(v)) if *v >= 0 => Dim::Known(*v as usize),
                Some(dimension::Value::DimParam(p)) if !p.is_empty() => Dim::Symbol(p.clone()),
                // Absent, empty or negative (some exporters write -1 for "unknown").
                _ => unknown.next(),
            })
            .collect(),
    )
}

/// The IR type of a `TypeProto`; `None` when the file leaves the type (or an element type)
/// unspecified.
pub(crate) fn value_type_from_proto(
    ty: &TypeProto,
    unknown: &mut UnknownDims,
) -> Result<Option<ValueType>> {
    let Some(value) = &ty.value else {
        return Ok(None);
    };
    Ok(match value {
        type_proto::Value::TensorType(t) => match t.elem_type.unwrap_or(0) {
            0 => None,
            code => Some(ValueType::tensor(
                dtype_from_onnx(code)?,
                t.shape.as_ref().map(|s| shape_from_proto(s, unknown)),
            )),
        },
        type_proto::Value::SequenceType(s) => match &s.elem_type {
            Some(elem) => {
                value_type_from_proto(elem, unknown)?.map(|e| ValueType::Sequence(Box::new(e)))
            }
            None => None,
        },
        type_proto::Value::OptionalType(o) => match &o.elem_type {
            Some(elem) => {
                value_type_from_proto(elem, unknown)?.map(|e| ValueType::Optional(Box::new(e)))
            }
            None => None,
        },
        type_proto::Value::MapType(_) => return Err(OnnxError::unsupported("map type")),
        type_proto::Value::SparseTensorType(_) => {
            return Err(OnnxError::unsupported("sparse tensor type"));
        }
    })
}
