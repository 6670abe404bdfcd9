//! Pass 3: type and shape inference. Walks the nodes in order and asks each op for its output
//! types given the types known so far; what an op cannot infer stays unknown (the run computes
//! real shapes). Declared types of graph outputs are kept.

use crate::{PassError, Result};
use samebits_ir::{Model, ValueType};
use samebits_ops::{BuildContext, OperationSet, registry};

pub fn run(model: &mut Model, operation_set: OperationSet) -> Result<()> {
    let opsets = model.opset_imports.clone();
    let graph = &mut model.graph;
    for i in 0..graph.nodes.len() {
        let node = &graph.nodes[i];
        let input_types: Vec<Option<ValueType>> =
            node.inputs.iter().map(|n| graph.value_type(n)).collect();
        let captures: Vec<String> = samebits_ops::node_captures(node).into_iter().collect();
        let ctx = BuildContext {
            node,
            opset: registry::opset_of(&opsets, &node.domain),
            operation_set,
            opsets: &opsets,
            input_types: &input_types,
            constant_inputs: &[],
            captures: &captures,
        };
        let err = |source: samebits_ops::OpError| PassError::Op {
            pass: "shape inference",
            source: source.at(&node.describe()),
        };
        let op = registry::global().build(&ctx).map_err(err)?;
        let inferred = op.infer(&input_types).map_err(err)?;
        let outputs = node.outputs.clone();
        for (name, ty) in outputs.iter().zip(inferred) {
            if let Some(ty) = ty
                && !name.is_empty()
            {
                graph.value_types.insert(name.clone(), ty);
            }
        }
    }
    Ok(())
}
