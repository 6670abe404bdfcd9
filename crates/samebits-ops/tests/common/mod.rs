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
    // Output buffers start as NaN, so a kernel that leaves an element unwritten fails here.
    samebits_ir::poison_taken_buffers();
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

/// `len` reproducible pseudo-random values in [-1, 1) from `seed` (a 64-bit LCG), for tests
/// that need data without structure.
pub fn pseudo_random(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Runs `f` on a rayon pool of `threads` threads.
pub fn with_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

/// The bit patterns of an f32 tensor, for bit-exact comparisons.
pub fn bits(t: &Tensor) -> Vec<u32> {
    t.as_slice::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

/// The shape `op_type` (opset 21) infers for its first output from f32 inputs of `shapes`.
pub fn infer_shape(
    op_type: &str,
    shapes: &[&[usize]],
    attributes: &[(&str, Attribute)],
) -> Result<Option<Vec<usize>>, OpError> {
    let node = Node {
        name: "under_test".into(),
        op_type: op_type.into(),
        domain: String::new(),
        inputs: (0..shapes.len()).map(|i| format!("in{i}")).collect(),
        outputs: vec!["out0".into()],
        attributes: attributes
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    };
    let types: Vec<Option<samebits_ir::ValueType>> = shapes
        .iter()
        .map(|s| {
            Some(samebits_ir::ValueType::tensor(
                samebits_ir::DType::F32,
                Some(samebits_ir::Shape::known(s)),
            ))
        })
        .collect();
    let opsets = [(String::new(), 21)].into_iter().collect();
    let ctx = samebits_ops::BuildContext {
        node: &node,
        opset: 21,
        operation_set: OperationSet::Reproducible,
        opsets: &opsets,
        input_types: &types,
        constant_inputs: &[],
        captures: &[],
    };
    let op = samebits_ops::registry::global().build(&ctx)?;
    let out = op.infer(&types)?;
    Ok(out
        .first()
        .cloned()
        .flatten()
        .and_then(|t| t.shape().and_then(|s| s.concrete())))
}

/// Loop body whose condition never turns false: `cond_out = cond_in`, `v_out = v_in + one`
/// (`one` from the outer scope), and `v_out` as a scan output (the size-limit tests).
pub fn endless_loop_body() -> Attribute {
    subgraph(
        &["iter", "cond_in", "v_in"],
        vec![
            node("Identity", &["cond_in"], &["cond_out"], &[]),
            node("Add", &["v_in", "one"], &["v_out"], &[]),
            node("Identity", &["v_out"], &["v_scan"], &[]),
        ],
        &["cond_out", "v_out", "v_scan"],
    )
}
