//! Pass 5: cast hoisting. A `Cast` to float32 of a data-movement node's output (Reshape,
//! Squeeze, Unsqueeze, Flatten, Identity, Expand, Transpose) becomes the movement of the cast
//! input: `Cast(Expand(mask, s))` -> `Expand(Cast(mask), s)`. A cast converts each element by
//! itself and a movement only places elements, so the two orders give the same elements in the
//! same places, bit for bit. Exporters write attention and pooling masks as integer tensors
//! that are reshaped and expanded before a late cast; hoisted, the cast converts the small
//! mask once and the moves run on float32 tensors, which every device executor takes (a
//! device keeps integer tensors as raw bytes only). The rewrite applies when the movement's
//! output feeds only the cast, so nothing is computed twice, and repeats through chains of
//! movements.

use samebits_ir::{Attribute, DType, Graph, ValueType};
use std::collections::BTreeMap;

/// Ops whose output 0 is input 0's elements placed by the other inputs and attributes alone.
const MOVEMENTS: [&str; 7] = [
    "Reshape",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "Identity",
    "Expand",
    "Transpose",
];

/// ONNX's TensorProto code of float32 (Cast's `to`).
const ONNX_FLOAT: i64 = 1;

/// Hoists every float32 cast it can; returns how many hoists it made.
pub fn run(graph: &mut Graph) -> usize {
    // How many times each value is read (a subgraph's read counts as two, so that a value a
    // subgraph reads is never hoisted away). A hoist keeps every other value's count: the cast
    // reads the movement's input instead of the movement, which reads the new value once.
    let mut readers: BTreeMap<String, usize> = BTreeMap::new();
    for node in &graph.nodes {
        for input in node.inputs.iter().filter(|i| !i.is_empty()) {
            *readers.entry(input.clone()).or_default() += 1;
        }
        for name in samebits_ops::node_captures(node) {
            *readers.entry(name).or_default() += 2;
        }
    }
    let mut hoisted = 0;
    while let Some((cast, movement)) = next_hoist(graph, &readers) {
        let (moved, cast_value) = hoist(graph, cast, movement);
        readers.remove(&moved);
        readers.insert(cast_value, 1);
        hoisted += 1;
    }
    hoisted
}

/// The first cast (by node index) whose input a movement node computes for it alone, with
/// that movement's index.
fn next_hoist(graph: &Graph, readers: &BTreeMap<String, usize>) -> Option<(usize, usize)> {
    let producer: BTreeMap<&str, usize> = graph
        .nodes
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.outputs.iter().map(move |o| (o.as_str(), i)))
        .collect();
    graph.nodes.iter().enumerate().find_map(|(c, cast)| {
        let to_float = cast.op_type == "Cast"
            && cast.domain.is_empty()
            && matches!(cast.attributes.get("to"), Some(Attribute::Int(ONNX_FLOAT)));
        let moved = cast.inputs.first().filter(|_| to_float)?;
        let m = *producer.get(moved.as_str())?;
        let movement = &graph.nodes[m];
        let hoistable = MOVEMENTS.contains(&movement.op_type.as_str())
            && movement.domain.is_empty()
            && movement.outputs.len() == 1
            && movement.inputs.first().is_some_and(|i| !i.is_empty())
            && readers.get(moved) == Some(&1)
            && !graph.outputs.iter().any(|o| &o.name == moved);
        hoistable.then_some((c, m))
    })
}

/// Rewrites `cast(movement(x, ..))` into `movement(cast(x), ..)`: the cast reads `x` into a
/// new value placed just before the movement, which then writes the cast's old output.
/// Returns the value that is gone (the movement's old output) and the new one.
fn hoist(graph: &mut Graph, c: usize, m: usize) -> (String, String) {
    let moved = graph.nodes[c].inputs[0].clone();
    let result = graph.nodes[c].outputs[0].clone();
    let source = graph.nodes[m].inputs[0].clone();
    let cast_value = unique_name(graph, &format!("{source}/cast_to_float"));
    let source_shape = graph.value_type(&source).and_then(|t| t.shape().cloned());
    let mut cast = graph.nodes.remove(c);
    cast.inputs[0] = source;
    cast.outputs[0] = cast_value.clone();
    let movement = &mut graph.nodes[m];
    movement.inputs[0] = cast_value.clone();
    movement.outputs[0] = result;
    graph.value_types.remove(&moved);
    graph.value_types.insert(
        cast_value.clone(),
        ValueType::tensor(DType::F32, source_shape),
    );
    // The cast came after its movement (topological order), so `m` is unchanged.
    graph.nodes.insert(m, cast);
    (moved, cast_value)
}

/// `base`, or `base` with a counter, named by no value of the graph.
fn unique_name(graph: &Graph, base: &str) -> String {
    let taken = |n: &str| {
        graph.value_types.contains_key(n)
            || graph.initializers.contains_key(n)
            || graph.inputs.iter().any(|v| v.name == n)
            || graph
                .nodes
                .iter()
                .any(|node| node.outputs.iter().any(|o| o == n))
    };
    (0..)
        .map(|k| {
            if k == 0 {
                base.to_string()
            } else {
                format!("{base}_{k}")
            }
        })
        .find(|n| !taken(n))
        .expect("some name is free")
}
