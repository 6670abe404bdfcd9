//! Pass 7: elementwise fusion. A run of elementwise nodes of f32 (or not yet known) dtype (Add,
//! Sub, Mul, Div, Relu, Clip, Sigmoid, HardSigmoid, HardSwish, LeakyRelu, inference
//! BatchNormalization),
//! each after the first reading a value of the run and lying at most `MAX_GAP` nodes past the
//! previous one (nodes of other branches may sit between them), whose intermediate values
//! nobody outside the run reads, becomes one `samebits::ElementwiseChain` node, placed where
//! its last node was and carrying the original nodes as its `body` graph. A run may also start with a Conv or ConvTranspose
//! (then one elementwise node suffices): it becomes one `samebits::ConvChain` node, the
//! convolution in its `conv` graph, the elementwise nodes in its `body`. The fused ops compute
//! each output element by the same IEEE operations in the same order as the original nodes
//! (contract section `elementwise-fusion`), so fusion never changes bits; it only saves the
//! memory passes and allocations of the intermediates.

use samebits_ir::{Attribute, DType, Graph, Model, Node, ValueInfo};
use samebits_ops::fused::{CONV_CHAIN, DOMAIN, MAX_CHAIN, OP_TYPE, is_conv_head, is_fusable};
use samebits_ops::registry;
use std::collections::{BTreeMap, BTreeSet};

/// Most nodes between consecutive members of a chain (other branches' nodes an exporter placed
/// between them).
const MAX_GAP: usize = 8;

/// What the pass did.
pub struct FusionReport {
    pub chains: usize,
    pub nodes_fused: usize,
}

/// Fuses the chains of the main graph (subgraphs are left alone).
pub fn run(model: &mut Model) -> FusionReport {
    let opset = registry::opset_of(&model.opset_imports, "");
    let graph = &mut model.graph;
    // An unknown dtype may still be f32 (the ops check at run time and otherwise run their
    // parts one after the other); a known other dtype never takes the fast path.
    let maybe_f32 = |node: &Node| {
        graph
            .value_type(&node.outputs[0])
            .and_then(|t| t.dtype())
            .is_none_or(|d| d == DType::F32)
    };
    let fusable: Vec<bool> = graph
        .nodes
        .iter()
        .map(|node| is_fusable(node, opset) && maybe_f32(node))
        .collect();
    let head: Vec<bool> = graph
        .nodes
        .iter()
        .map(|node| is_conv_head(node) && maybe_f32(node))
        .collect();
    // Readers of each value: node indices, `usize::MAX` for a graph output.
    let mut readers: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        let captures = samebits_ops::node_captures(node);
        for name in node.inputs.iter().chain(&captures) {
            readers.entry(name.clone()).or_default().push(i);
        }
    }
    for out in &graph.outputs {
        readers
            .entry(out.name.clone())
            .or_default()
            .push(usize::MAX);
    }
    // Members `m` (node indices, in order) form a chain when only the last one's output is read
    // by nodes outside it.
    let is_chain = |m: &[usize]| {
        m[..m.len() - 1].iter().all(|&i| {
            readers
                .get(&graph.nodes[i].outputs[0])
                .is_none_or(|r| r.iter().all(|i| m.contains(i)))
        })
    };
    let mut taken = vec![false; graph.nodes.len()];
    let mut chains: Vec<Vec<usize>> = Vec::new();
    for s in 0..graph.nodes.len() {
        if taken[s] || (!fusable[s] && !head[s]) {
            continue;
        }
        // Members after the first need not be adjacent: an exporter may interleave branches
        // (Conv, Conv, Sigmoid, Mul, ...). Each reads a value of the chain and lies at most
        // `MAX_GAP` nodes past the previous member.
        let mut members = vec![s];
        let mut produced: BTreeSet<&str> = BTreeSet::from([graph.nodes[s].outputs[0].as_str()]);
        let mut e = s + 1;
        while e < graph.nodes.len() && e - members[members.len() - 1] <= MAX_GAP {
            if members.len() == MAX_CHAIN {
                break;
            }
            let node = &graph.nodes[e];
            if node.inputs.iter().any(|i| produced.contains(i.as_str())) {
                if !fusable[e] || taken[e] {
                    break;
                }
                produced.insert(node.outputs[0].as_str());
                members.push(e);
            }
            e += 1;
        }
        if let Some(end) = (2..=members.len())
            .rev()
            .find(|&end| is_chain(&members[..end]))
        {
            members.truncate(end);
            for &i in &members {
                taken[i] = true;
            }
            chains.push(members);
        }
    }
    let nodes_fused = chains.iter().map(|c| c.len()).sum();
    let is_head = |i: usize| head[i];
    let report = FusionReport {
        chains: chains.len(),
        nodes_fused,
    };
    // A fused node takes its last member's place: every operand of every member is computed
    // by then, and the chain's result is read only after it.
    let mut slots: Vec<Option<Node>> = std::mem::take(&mut graph.nodes)
        .into_iter()
        .map(Some)
        .collect();
    let mut fused_at: BTreeMap<usize, Node> = BTreeMap::new();
    for chain in chains {
        let last = chain[chain.len() - 1];
        let mut members: Vec<Node> = chain.iter().map(|&i| slots[i].take().unwrap()).collect();
        let node = if is_head(chain[0]) {
            let conv = members.remove(0);
            conv_chain_node(graph, conv, members)
        } else {
            fused_node(graph, members)
        };
        fused_at.insert(last, node);
    }
    graph.nodes = slots
        .into_iter()
        .enumerate()
        .filter_map(|(i, node)| fused_at.remove(&i).or(node))
        .collect();
    report
}

/// The `ConvChain` node replacing `conv` and the chain `members` that follows it.
fn conv_chain_node(graph: &Graph, conv: Node, members: Vec<Node>) -> Node {
    let chain = fused_node(graph, members);
    let Some(Attribute::Graph(body)) = chain.attributes.get("body") else {
        unreachable!("fused_node sets the body")
    };
    let conv_output = &conv.outputs[0];
    let mut inputs: Vec<String> = conv.inputs.clone();
    inputs.extend(chain.inputs.iter().filter(|n| *n != conv_output).cloned());
    let conv_graph = Graph {
        name: conv.name.clone(),
        inputs: conv
            .inputs
            .iter()
            .filter(|n| !n.is_empty())
            .map(|n| ValueInfo {
                name: n.clone(),
                ty: graph.value_type(n),
            })
            .collect(),
        outputs: vec![ValueInfo {
            name: conv_output.clone(),
            ty: graph.value_type(conv_output),
        }],
        nodes: vec![conv.clone()],
        initializers: BTreeMap::new(),
        value_types: BTreeMap::new(),
    };
    Node {
        name: format!(
            "fused {}",
            if conv.name.is_empty() {
                conv_output
            } else {
                &conv.name
            }
        ),
        op_type: CONV_CHAIN.to_string(),
        domain: DOMAIN.to_string(),
        inputs,
        outputs: chain.outputs.clone(),
        attributes: BTreeMap::from([
            ("conv".to_string(), Attribute::Graph(Box::new(conv_graph))),
            ("body".to_string(), Attribute::Graph(body.clone())),
        ]),
    }
}

/// The `ElementwiseChain` node replacing `members` (a chain, in order).
fn fused_node(graph: &Graph, members: Vec<Node>) -> Node {
    let produced: BTreeSet<&str> = members.iter().map(|n| n.outputs[0].as_str()).collect();
    let mut operands: Vec<String> = Vec::new();
    for name in members.iter().flat_map(|n| &n.inputs) {
        if !name.is_empty() && !produced.contains(name.as_str()) && !operands.contains(name) {
            operands.push(name.clone());
        }
    }
    let result = members.last().expect("a chain has nodes").outputs[0].clone();
    let value_types = members[..members.len() - 1]
        .iter()
        .filter_map(|n| Some((n.outputs[0].clone(), graph.value_type(&n.outputs[0])?)))
        .collect();
    let first = &members[0];
    let name = format!(
        "fused {}",
        if first.name.is_empty() {
            &first.outputs[0]
        } else {
            &first.name
        }
    );
    let body = Graph {
        name: name.clone(),
        inputs: operands
            .iter()
            .map(|n| ValueInfo {
                name: n.clone(),
                ty: graph.value_type(n),
            })
            .collect(),
        outputs: vec![ValueInfo {
            name: result.clone(),
            ty: graph.value_type(&result),
        }],
        nodes: members,
        initializers: BTreeMap::new(),
        value_types,
    };
    Node {
        name,
        op_type: OP_TYPE.to_string(),
        domain: DOMAIN.to_string(),
        inputs: operands,
        outputs: vec![result],
        attributes: BTreeMap::from([("body".to_string(), Attribute::Graph(Box::new(body)))]),
    }
}
