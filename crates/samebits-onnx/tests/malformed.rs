//! Malformed, truncated and corrupted bytes give errors, never panics.

mod common;

use common::*;
use prost::Message;
use samebits_onnx::proto::attribute_proto::AttributeType;
use samebits_onnx::proto::{AttributeProto, GraphProto};
use samebits_onnx::{OnnxError, load_model, load_model_from_bytes};

fn valid_model_bytes() -> Vec<u8> {
    let mut graph = relu_graph(vec![f32_tensor("w", &[2], &[1.0, 2.0])]);
    graph.node[0].attribute.push(AttributeProto {
        g: Some(relu_graph(vec![])),
        ..attribute("body", AttributeType::Graph)
    });
    model(graph).encode_to_vec()
}

#[test]
fn garbage_bytes_are_a_malformed_protobuf_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.onnx");
    std::fs::write(&path, b"\x08\x96\x01\x3a\xff\xff\xff\xff\x0fnot a model").unwrap();
    let err = load_model(&path).unwrap_err();
    assert!(matches!(err, OnnxError::Malformed { .. }));
    assert!(
        err.to_string()
            .contains("model.onnx: truncated or malformed protobuf (failed to decode ModelProto: "),
        "{err}"
    );
    assert!(load_model(&dir.path().join("absent.onnx")).is_err());
}

#[test]
fn every_truncation_of_a_valid_model_is_handled() {
    let bytes = valid_model_bytes();
    assert!(load_model_from_bytes(&bytes, None).is_ok());
    let mut malformed = 0;
    for len in 0..bytes.len() {
        if let Err(OnnxError::Malformed { .. }) = load_model_from_bytes(&bytes[..len], None) {
            malformed += 1;
        }
    }
    assert!(
        malformed > bytes.len() / 2,
        "{malformed} of {} truncations",
        bytes.len()
    );
}

#[test]
fn every_single_byte_corruption_of_a_valid_model_is_handled() {
    let bytes = valid_model_bytes();
    let mut errors = 0;
    for at in 0..bytes.len() {
        for value in [0x00, 0x7f, 0xff] {
            let mut corrupt = bytes.clone();
            corrupt[at] = value;
            errors += load_model_from_bytes(&corrupt, None).is_err() as usize;
        }
    }
    assert!(errors > 0);
}

#[test]
fn deeply_nested_subgraphs_are_an_error_not_a_stack_overflow() {
    let mut graph = relu_graph(vec![]);
    for _ in 0..200 {
        let mut outer = relu_graph(vec![]);
        outer.node[0].attribute.push(AttributeProto {
            g: Some(graph),
            ..attribute("body", AttributeType::Graph)
        });
        graph = outer;
    }
    let bytes = model(graph).encode_to_vec();
    let err = load_model_from_bytes(&bytes, None).unwrap_err();
    assert!(matches!(err, OnnxError::Malformed { .. }), "{err}");
    let shallow = GraphProto::default();
    assert!(load_model_from_bytes(&model(shallow).encode_to_vec(), None).is_ok());
}
