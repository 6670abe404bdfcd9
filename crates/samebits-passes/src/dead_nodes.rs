//! Pass 6: dead-node removal. Keeps the nodes some graph output depends on (through inputs and
//! through values their subgraphs read) and the initializers they read; drops the rest.

use samebits_ir::{Attribute, Graph};
use std::collections::BTreeSet;

/// Removes dead nodes and unused initializers; returns how many nodes were removed.
pub fn run(graph: &mut Graph) -> usize {
    let mut live: BTreeSet<String> = graph.outputs.iter().map(|o| o.name.clone()).collect();
    let mut keep = vec![false; graph.nodes.len()];
    for (i, node) in graph.nodes.iter().enumerate().rev() {
        if node.outputs.iter().any(|o| live.contains(o)) {
            keep[i] = true;
            live.extend(node.inputs.iter().filter(|n| !n.is_empty()).cloned());
            for attr in node.attributes.values() {
                let graphs: Vec<&Graph> = match attr {
                    Attribute::Graph(g) => vec![g],
                    Attribute::Graphs(gs) => gs.iter().collect(),
                    _ => continue,
                };
                for g in graphs {
                    live.extend(samebits_ops::free_variables(g));
                }
            }
        }
    }
    let before = graph.nodes.len();
    let mut flags = keep.into_iter();
    graph.nodes.retain(|_| flags.next().unwrap_or(false));
    let inputs: BTreeSet<&String> = graph.inputs.iter().map(|v| &v.name).collect();
    graph
        .initializers
        .retain(|name, _| live.contains(name) || inputs.contains(name));
    before - graph.nodes.len()
}
