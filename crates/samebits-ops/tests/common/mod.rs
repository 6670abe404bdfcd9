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
    let mut g = Graph::default();
    let mut names = Vec::new();
    let mut fed = Vec::new();
    for (i, v) in inputs.iter().enumerate() {
        match v {
            Some(v) => {
                let name = format!("in{i}");
                g.inputs.push(ValueInfo {
                    name: name.clone(),
                    ty: None,
                });
                fed.push(v.clone());
                names.push(name);
            }
            None => names.push(String::new()),
        }
    }
    let outputs: Vec<String> = (0..n_outputs).map(|i| format!("out{i}")).collect();
    g.outputs = outputs
        .iter()
        .map(|n| ValueInfo {
            name: n.clone(),
            ty: None,
        })
        .collect();
    g.nodes.push(Node {
        name: "under_test".into(),
        op_type: op_type.into(),
        domain: String::new(),
        inputs: names,
        outputs,
        attributes: attributes
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    });
    let opsets = [(String::new(), opset)].into_iter().collect();
    let plan = Plan::build(&g, &opsets, OperationSet::Reproducible, &[])?;
    plan.run(fed, RunOptions::default())
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
