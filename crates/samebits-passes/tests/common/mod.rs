//! Graph-building helpers shared by the passes' integration tests.

use samebits_ir::{Model, Node};

/// A one-output node of `domain`, named after its output, without attributes.
pub fn node_in(domain: &str, op: &str, inputs: &[&str], output: &str) -> Node {
    Node {
        name: output.into(),
        op_type: op.into(),
        domain: domain.into(),
        inputs: inputs.iter().map(|s| s.to_string()).collect(),
        outputs: vec![output.into()],
        attributes: Default::default(),
    }
}

/// A default-domain [`node_in`].
#[allow(dead_code)] // decoder_fusion.rs names every node's domain
pub fn node(op: &str, inputs: &[&str], output: &str) -> Node {
    node_in("", op, inputs, output)
}

/// The op types of `model`'s nodes, in order.
#[allow(dead_code)] // not every test file lists op types
pub fn op_types(model: &Model) -> Vec<&str> {
    model
        .graph
        .nodes
        .iter()
        .map(|n| n.op_type.as_str())
        .collect()
}
