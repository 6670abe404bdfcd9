//! Test-data files as the ONNX conformance suite writes them (`test_data_set_N/input_K.pb`): a
//! serialized `TensorProto`, `SequenceProto` or `OptionalProto`, read into IR values; and the
//! tensor writer that produces such files.

use crate::error::{OnnxError, Result};
use crate::external::ExternalData;
use crate::proto::{OptionalProto, SequenceProto, TensorProto, optional_proto, sequence_proto};
use crate::tensor::{decode_tensor, tensor_to_proto};
use prost::Message;
use samebits_ir::{Tensor, Value, ValueType};
use std::path::Path;

/// Reads a file holding one serialized `TensorProto`.
pub fn read_tensor_pb(path: &Path) -> Result<Tensor> {
    read_value_pb(path, None)?
        .into_tensor()
        .map_err(|e| OnnxError::from(e).in_file(&path.display().to_string()))
}

/// Reads a file holding a serialized value of the type `expected` (a `TensorProto` when it is a
/// tensor type or `None`, a `SequenceProto` or `OptionalProto` otherwise). The value's element
/// types must match `expected`'s.
pub fn read_value_pb(path: &Path, expected: Option<&ValueType>) -> Result<Value> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| OnnxError::io(path, e))?;
    let model_dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let mut external = ExternalData::new(Some(model_dir.unwrap_or(Path::new("."))));
    let value = match expected {
        None | Some(ValueType::Tensor { .. }) => {
            let proto = TensorProto::decode(bytes.as_slice())
                .map_err(|e| OnnxError::malformed(&file, "TensorProto", e))?;
            Value::Tensor(decode_tensor(proto, &mut external).map_err(|e| e.in_file(&file))?)
        }
        Some(ValueType::Sequence(_)) => {
            let proto = SequenceProto::decode(bytes.as_slice())
                .map_err(|e| OnnxError::malformed(&file, "SequenceProto", e))?;
            sequence_value(proto, &mut external).map_err(|e| e.in_file(&file))?
        }
        Some(ValueType::Optional(_)) => {
            let proto = OptionalProto::decode(bytes.as_slice())
                .map_err(|e| OnnxError::malformed(&file, "OptionalProto", e))?;
            optional_value(proto, &mut external).map_err(|e| e.in_file(&file))?
        }
    };
    if let Some(expected) = expected {
        check_matches(&value, expected).map_err(|e| e.in_file(&file))?;
    }
    Ok(value)
}

/// Serializes a tensor as a `TensorProto` file.
pub fn write_tensor_pb(tensor: &Tensor) -> Vec<u8> {
    tensor_to_proto(tensor, "").encode_to_vec()
}

fn sequence_value(proto: SequenceProto, external: &mut ExternalData) -> Result<Value> {
    use sequence_proto::DataType;
    let elem_type = DataType::try_from(proto.elem_type()).map_err(|_| {
        OnnxError::invalid(format!(
            "sequence element type {} is unknown",
            proto.elem_type()
        ))
    })?;
    match elem_type {
        DataType::Tensor | DataType::Undefined
            if proto.sparse_tensor_values.is_empty()
                && proto.sequence_values.is_empty()
                && proto.map_values.is_empty()
                && proto.optional_values.is_empty() =>
        {
            let tensors = proto.tensor_values.into_iter().enumerate().map(|(i, t)| {
                decode_tensor(t, external).map_err(|e| e.within(format!("sequence element {i}")))
            });
            Ok(Value::Sequence(tensors.collect::<Result<_>>()?))
        }
        other => Err(OnnxError::unsupported(format!(
            "sequence of {} elements (the IR holds sequences of tensors)",
            other.as_str_name()
        ))),
    }
}

fn optional_value(proto: OptionalProto, external: &mut ExternalData) -> Result<Value> {
    use optional_proto::DataType;
    let elem_type = DataType::try_from(proto.elem_type()).map_err(|_| {
        OnnxError::invalid(format!(
            "optional element type {} is unknown",
            proto.elem_type()
        ))
    })?;
    let inner = match elem_type {
        DataType::Tensor => proto
            .tensor_value
            .map(|t| decode_tensor(t, external).map(Value::Tensor))
            .transpose()?,
        DataType::Sequence => proto
            .sequence_value
            .map(|s| sequence_value(s, external))
            .transpose()?,
        DataType::Optional => proto
            .optional_value
            .map(|o| optional_value(*o, external))
            .transpose()?,
        DataType::Undefined => None,
        other @ (DataType::SparseTensor | DataType::Map) => {
            return Err(OnnxError::unsupported(format!(
                "optional {} value",
                other.as_str_name()
            )));
        }
    };
    Ok(Value::Optional(inner.map(Box::new)))
}

/// Checks that a value's kind and element dtypes agree with the declared type.
fn check_matches(value: &Value, expected: &ValueType) -> Result<()> {
    let mismatch = || {
        OnnxError::invalid(format!(
            "file holds a {} value, the model declares {expected}",
            value.kind()
        ))
    };
    match (value, expected) {
        (Value::Tensor(t), ValueType::Tensor { dtype, .. }) => {
            if t.dtype() != *dtype {
                return Err(OnnxError::invalid(format!(
                    "file holds a {} tensor, the model declares {expected}",
                    t.dtype()
                )));
            }
            Ok(())
        }
        (Value::Sequence(items), ValueType::Sequence(elem)) => items.iter().try_for_each(|t| {
            check_matches(&Value::Tensor(t.clone()), elem).map_err(|_| mismatch())
        }),
        (Value::Optional(None), ValueType::Optional(_)) => Ok(()),
        (Value::Optional(Some(inner)), ValueType::Optional(elem)) => check_matches(inner, elem),
        _ => Err(mismatch()),
    }
}
