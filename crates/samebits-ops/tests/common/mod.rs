//! Shared helpers for op tests: run one node on given inputs.
#![allow(dead_code)]

use samebits_ir::{Attribute, Graph, Node, Tensor, Value, ValueInfo};
use samebits_ops::{OpError, OperationSet, Plan, RunOptions};

/// Runs a single `op_type` node (default domain, opset `opset`) with `attributes` on `inputs`
/// (`None` = omitted optional input) and returns its `n_outputs` outputs.
pub fn run_node_opset(
    op_type: &str,
    opset: i64,
    inputs: &[Option<Value>],
    attributes: &[(&str, Attribute)],
    n_outputs: usize,
) -> Result<Vec<Value>, OpError> {
    run_node_in_scope(op_type, opset, inputs, &[], attributes, n_outputs)
}

/// [`run_node_opset`] inside a graph that also holds the named values `outer`, which the node
/// does not take as inputs but its subgraph attributes may read (captures).
pub fn run_node_in_scope(
    op_type: &str,
    opset: i64,
    inputs: &[Option<Value>],
    outer: &[(&str, Value)],
    attributes: &[(&str, Attribute)],
    n_outputs: usize,
) -> Result<Vec<Value>, OpError> {
    let mut g = Graph::default();
    let mut names = Vec::new();
    let mut fed = Vec::new();
    for (i, v) in inputs.iter().enumerate() {
        match v {
            Some(v) => {
                let name = format!("in{i}");
                g.inputs.push(value_info(&name));
                fed.push(v.clone());
                names.push(name);
            }
            None => names.push(String::new()),
        }
    }
    for (name, v) in outer {
        g.inputs.push(value_info(name));
        fed.push(v.clone());
    }
    let outputs: Vec<String> = (0..n_outputs).map(|i| format!("out{i}")).collect();
    g.outputs = outputs.iter().map(|n| value_info(n)).collect();
    let mut under_test = node(op_type, &[], &[], attributes);
    under_test.name = "under_test".into();
    under_test.inputs = names;
    under_test.outputs = outputs;
    g.nodes.push(under_test);
    let opsets = [(String::new(), opset)].into_iter().collect();
    let plan = Plan::build(&g, &opsets, OperationSet::Reproducible, &[])?;
    plan.run(fed, RunOptions::default())
}

/// An untyped graph input or output.
pub fn value_info(name: &str) -> ValueInfo {
    ValueInfo {
        name: name.into(),
        ty: None,
    }
}

/// A default-domain node.
pub fn node(
    op_type: &str,
    inputs: &[&str],
    outputs: &[&str],
    attributes: &[(&str, Attribute)],
) -> Node {
    Node {
        name: String::new(),
        op_type: op_type.into(),
        domain: String::new(),
        inputs: inputs.iter().map(|s| s.to_string()).collect(),
        outputs: outputs.iter().map(|s| s.to_string()).collect(),
        attributes: attributes
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    }
}

/// A graph attribute (If/Loop/Scan/SequenceMap body) with untyped inputs and outputs.
pub fn subgraph(inputs: &[&str], nodes: Vec<Node>, outputs: &[&str]) -> Attribute {
    Attribute::Graph(Box::new(Graph {
        inputs: inputs.iter().map(|n| value_info(n)).collect(),
        outputs: outputs.iter().map(|n| value_info(n)).collect(),
        nodes,
        ..Graph::default()
    }))
}

/// [`run_node_opset`] at opset 21 with one output, returning it as a tensor.
pub fn run1(
    op_type: &str,
    inputs: &[Tensor],
    attributes: &[(&str, Attribute)],
) -> Result<Tensor, OpError> {
    let inputs: Vec<Option<Value>> = inputs.iter().cloned().map(|t| Some(t.into())).collect();
    let out = run_node_opset(op_type, 21, &inputs, attributes, 1)?;
    Ok(out.into_iter().next().unwrap().into_tensor()?)
}

pub fn f32s(shape: &[usize], data: &[f32]) -> Tensor {
    Tensor::from_vec(shape.to_vec(), data.to_vec()).unwrap()
}

pub fn i64s(shape: &[usize], data: &[i64]) -> Tensor {
    Tensor::from_vec(shape.to_vec(), data.to_vec()).unwrap()
}

pub fn bools(shape: &[usize], data: &[bool]) -> Tensor {
    Tensor::from_bools(shape.to_vec(), data.to_vec()).unwrap()
}

pub fn strings(shape: &[usize], data: &[&str]) -> Tensor {
    Tensor::from_strings(shape.to_vec(), data.iter().map(|s| s.to_string()).collect()).unwrap()
}

/// The value as a tensor, panicking (in a test) when it is not one.
pub fn tensor(v: &Value) -> &Tensor {
    v.as_tensor().unwrap()
}
