//! Pass 4: constant folding. A node whose inputs are all constants is evaluated once at compile
//! time by the same op code, in the same operation set, that the run would use, so folding
//! never changes output bits. Random ops, nodes with subgraphs, and folds that would create a
//! constant much larger than their inputs (say, ConstantOfShape of a large shape) are left alone.

use crate::{PassError, Result, build_op};
use samebits_ir::{Attribute, Model, Value};
use samebits_ops::{OperationSet, registry};

/// Ops whose output is not a function of their inputs.
const NONDETERMINISTIC: [&str; 6] = [
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
];

/// A folded constant may hold this many bytes more than the inputs it replaces.
const GROWTH_LIMIT_BYTES: usize = 1 << 20;

/// Folds what it can and returns the number of nodes folded.
pub fn run(model: &mut Model, operation_set: OperationSet) -> Result<usize> {
    let opsets = model.opset_imports.clone();
    let graph = &mut model.graph;
    let mut kept = Vec::with_capacity(graph.nodes.len());
    let mut folded = 0;
    for node in std::mem::take(&mut graph.nodes) {
        let foldable = !NONDETERMINISTIC.contains(&node.op_type.as_str())
            && !node
                .attributes
                .values()
                .any(|a| matches!(a, Attribute::Graph(_) | Attribute::Graphs(_)))
            && node
                .inputs
                .iter()
                .all(|i| i.is_empty() || graph.initializers.contains_key(i))
            && registry::global().supports(&node.domain, &node.op_type);
        if !foldable {
            kept.push(node);
            continue;
        }
        let err = |source: samebits_ops::OpError| PassError::Op {
            pass: "constant folding",
            source: source.at(&node.describe()),
        };
        let op = build_op(&node, graph, &opsets, operation_set, "constant folding")?;
        let inputs: Vec<Option<Value>> = node
            .inputs
            .iter()
            .map(|i| graph.initializers.get(i).cloned().map(Value::Tensor))
            .collect();
        let refs: Vec<Option<&Value>> = inputs.iter().map(Option::as_ref).collect();
        let outputs = op.eval(&refs).map_err(err)?;
        let input_bytes: usize = inputs
            .iter()
            .flatten()
            .filter_map(|v| v.as_tensor().ok()?.bytes().ok().map(<[u8]>::len))
            .sum();
        let tensors: Option<Vec<_>> = outputs.into_iter().map(|v| v.into_tensor().ok()).collect();
        let fits = tensors.as_ref().is_some_and(|ts| {
            ts.iter()
                .map(|t| t.numel() * t.dtype().size())
                .sum::<usize>()
                <= input_bytes + GROWTH_LIMIT_BYTES
        });
        match tensors {
            Some(ts) if fits && ts.len() >= node.outputs.len() => {
                for (name, t) in node.outputs.iter().zip(ts) {
                    if !name.is_empty() {
                        graph.value_types.remove(name);
                        graph.initializers.insert(name.clone(), t);
                    }
                }
                folded += 1;
            }
            _ => kept.push(node),
        }
    }
    graph.nodes = kept;
    Ok(folded)
}
