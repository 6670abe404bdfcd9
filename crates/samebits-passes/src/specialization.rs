//! Shape specialisation: a graph that computes values from its tensors' shapes (Shape and Size
//! nodes and the integer arithmetic on their outputs, as exporters write it for dynamic axes)
//! is specialised to the shapes of one run. Each Shape / Size node becomes the constant it
//! computes for those shapes ([`samebits_ops::Op::outputs_from_shapes`], the op's own
//! definition), then [`folding`] evaluates what depended only on it, with the same op code as
//! a run, and [`dead_nodes`] drops what no output reads. Data values are computed by the same
//! ops as before, so the specialised graph gives the same bits; on a GPU, the host round trips
//! of the shape arithmetic disappear.
//!
//! A shape read from a graph input is fixed by the run's input shapes. A shape read from an
//! intermediate value (a probe) usually follows from them too, but not always (the output of
//! NonZero, of a Loop), so every such probe becomes a guard: the specialised plan checks that
//! the probe has the recorded shape when a step produces it
//! ([`samebits_ops::Plan::guard_shapes`]), and the caller reruns a run that fails a guard with
//! the unspecialised graph (samebits-runtime's `CompiledModel`). A probe that the specialised
//! graph would no longer compute could not be checked, so the Shape / Size nodes reading it
//! stay.

use crate::{PassError, Result, build_op, dead_nodes, folding};
use samebits_ir::{Model, Value};
use samebits_ops::OperationSet;
use std::collections::{BTreeSet, HashMap};

/// A graph specialised to the shapes of one run.
#[derive(Debug)]
pub struct Specialization {
    pub model: Model,
    /// Intermediate values whose recorded shapes the specialisation assumed, with those shapes.
    pub guards: Vec<(String, Vec<usize>)>,
    /// Shape / Size nodes replaced by constants, and nodes folded after them.
    pub replaced: usize,
    pub folded: usize,
}

/// Whether a node reports its input's shape (the nodes a specialisation replaces).
fn reads_shape(node: &samebits_ir::Node) -> bool {
    node.domain.is_empty() && matches!(node.op_type.as_str(), "Shape" | "Size")
}

/// The values whose shapes a specialisation uses: the inputs of the graph's Shape and Size
/// nodes (graph inputs among them), each once, in graph order.
pub fn shape_probes(model: &Model) -> Vec<String> {
    let mut seen = BTreeSet::new();
    model
        .graph
        .nodes
        .iter()
        .filter(|n| reads_shape(n))
        .filter_map(|n| n.inputs.first())
        .filter(|p| !p.is_empty() && seen.insert(p.as_str()))
        .cloned()
        .collect()
}

/// Specialises `model` (a compiled graph) to the shapes in `shapes` (by value name: the graph
/// inputs and the probes of [`shape_probes`] a run recorded); `None` when nothing would change.
/// The Shape / Size nodes of a probe that the specialised graph would no longer compute stay
/// (module docs).
pub fn specialize(
    model: &Model,
    operation_set: OperationSet,
    shapes: &HashMap<String, Vec<usize>>,
) -> Result<Option<Specialization>> {
    let mut shapes = shapes.clone();
    loop {
        match attempt(model, operation_set, &shapes)? {
            Attempt::Done(special) => return Ok(special.map(|s| *s)),
            Attempt::Unchecked(probes) => {
                for probe in probes {
                    shapes.remove(&probe);
                }
            }
        }
    }
}

enum Attempt {
    Done(Option<Box<Specialization>>),
    /// These probes' shapes were used but nothing computes them any more.
    Unchecked(Vec<String>),
}

fn attempt(
    model: &Model,
    operation_set: OperationSet,
    shapes: &HashMap<String, Vec<usize>>,
) -> Result<Attempt> {
    let mut special = model.clone();
    let graph = &mut special.graph;
    let opsets = special.opset_imports.clone();
    let mut probes = BTreeSet::new();
    let mut kept = Vec::with_capacity(graph.nodes.len());
    let mut replaced = 0;
    for node in std::mem::take(&mut graph.nodes) {
        let shape = node.inputs.first().and_then(|p| shapes.get(p));
        let Some(shape) = shape.filter(|_| reads_shape(&node)) else {
            kept.push(node);
            continue;
        };
        const PASS: &str = "shape specialisation";
        let err = |source: samebits_ops::OpError| PassError::Op {
            pass: PASS,
            source: source.at(&node.describe()),
        };
        let op = build_op(&node, graph, &opsets, operation_set, PASS)?;
        let Some(outputs) = op.outputs_from_shapes(&[shape]) else {
            kept.push(node);
            continue;
        };
        for (name, value) in node.outputs.iter().zip(outputs.map_err(err)?) {
            if let (false, Value::Tensor(t)) = (name.is_empty(), value) {
                graph.value_types.remove(name);
                graph.initializers.insert(name.clone(), t);
            }
        }
        probes.insert(node.inputs[0].clone());
        replaced += 1;
    }
    graph.nodes = kept;
    if replaced == 0 {
        return Ok(Attempt::Done(None));
    }
    let folded = folding::run(&mut special, operation_set)?;
    dead_nodes::run(&mut special.graph);
    let graph = &special.graph;
    let inputs: BTreeSet<&str> = graph.inputs.iter().map(|v| v.name.as_str()).collect();
    let produced: BTreeSet<&str> = graph
        .nodes
        .iter()
        .flat_map(|n| n.outputs.iter().map(String::as_str))
        .collect();
    let guarded: Vec<String> = probes
        .into_iter()
        .filter(|p| !inputs.contains(p.as_str()) && !graph.initializers.contains_key(p))
        .collect();
    let unchecked: Vec<String> = guarded
        .iter()
        .filter(|p| !produced.contains(p.as_str()))
        .cloned()
        .collect();
    if !unchecked.is_empty() {
        return Ok(Attempt::Unchecked(unchecked));
    }
    let guards = guarded
        .into_iter()
        .map(|p| {
            let shape = shapes[&p].clone();
            (p, shape)
        })
        .collect();
    Ok(Attempt::Done(Some(Box::new(Specialization {
        model: special,
        guards,
        replaced,
        folded,
    }))))
}
