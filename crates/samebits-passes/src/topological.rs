//! Pass 1: sorts the main graph's nodes so every node follows the producers of its inputs.

use crate::{PassError, Result};
use samebits_ir::Graph;
use std::collections::BTreeSet;

pub fn run(graph: &mut Graph) -> Result<()> {
    let available: BTreeSet<String> = graph
        .inputs
        .iter()
        .map(|v| v.name.clone())
        .chain(graph.initializers.keys().cloned())
        .collect();
    let order =
        samebits_ops::topological_order(graph, &available).map_err(|source| PassError::Op {
            pass: "topological order",
            source,
        })?;
    let mut nodes: Vec<Option<_>> = std::mem::take(&mut graph.nodes)
        .into_iter()
        .map(Some)
        .collect();
    graph.nodes = order.into_iter().filter_map(|i| nodes[i].take()).collect();
    Ok(())
}
