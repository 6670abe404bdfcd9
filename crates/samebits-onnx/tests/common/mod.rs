//! Builders for small ONNX protobuf messages, shared by the integration tests.
#![allow(dead_code)] // each test binary uses a different subset

use samebits_onnx::proto::tensor_proto::{DataLocation, DataType};
use samebits_onnx::proto::tensor_shape_proto::{Dimension, dimension};
use samebits_onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto,
    TensorProto, TensorShapeProto, TypeProto, ValueInfoProto, attribute_proto::AttributeType,
    type_proto,
};

pub fn f32_tensor(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Float as i32),
        raw_data: Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ..Default::default()
    }
}

pub fn external_f32_tensor(name: &str, dims: &[i64], entries: &[(&str, &str)]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Float as i32),
        data_location: Some(DataLocation::External as i32),
        external_data: entries
            .iter()
            .map(|(k, v)| StringStringEntryProto {
                key: Some(k.to_string()),
                value: Some(v.to_string()),
            })
            .collect(),
        ..Default::default()
    }
}

pub enum D {
    Value(i64),
    Param(&'static str),
    Absent,
}

pub fn tensor_type(elem: DataType, dims: Option<&[D]>) -> TypeProto {
    let shape = dims.map(|dims| TensorShapeProto {
        dim: dims
            .iter()
            .map(|d| Dimension {
                denotation: None,
                value: match d {
                    D::Value(v) => Some(dimension::Value::DimValue(*v)),
                    D::Param(p) => Some(dimension::Value::DimParam(p.to_string())),
                    D::Absent => None,
                },
            })
            .collect(),
    });
    TypeProto {
        denotation: None,
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: Some(elem as i32),
            shape,
        })),
    }
}

pub fn value_info(name: &str, ty: TypeProto) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(ty),
        ..Default::default()
    }
}

pub fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// An attribute of `kind` named `name`; the caller fills in the value field.
pub fn attribute(name: &str, kind: AttributeType) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

pub fn int_attribute(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        i: Some(value),
        ..attribute(name, AttributeType::Int)
    }
}

pub fn opset(domain: &str, version: i64) -> OperatorSetIdProto {
    OperatorSetIdProto {
        domain: Some(domain.into()),
        version: Some(version),
    }
}

/// A model around `graph` importing default-domain opset 17.
pub fn model(graph: GraphProto) -> ModelProto {
    ModelProto {
        ir_version: Some(10),
        producer_name: Some("samebits-tests".into()),
        opset_import: vec![opset("", 17)],
        graph: Some(graph),
        ..Default::default()
    }
}

/// A one-node graph `y = Relu(x)` over f32[2] plus the given initializers.
pub fn relu_graph(initializers: Vec<TensorProto>) -> GraphProto {
    GraphProto {
        name: Some("main".into()),
        node: vec![node("Relu", "relu", &["x"], &["y"])],
        input: vec![value_info(
            "x",
            tensor_type(DataType::Float, Some(&[D::Value(2)])),
        )],
        output: vec![value_info(
            "y",
            tensor_type(DataType::Float, Some(&[D::Value(2)])),
        )],
        initializer: initializers,
        ..Default::default()
    }
}
