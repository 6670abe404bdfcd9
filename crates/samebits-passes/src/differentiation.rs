//! Reverse-mode differentiation: every `ai.onnx.preview.training` `Gradient` node of the main
//! graph is replaced by ordinary nodes that compute its outputs, the gradients of the tensor
//! named by its attribute `y` with respect to the tensors named by `xs` (ONNX's Gradient, opset
//! 1 of that domain). The tensors named by `zs` are held constant.
//!
//! The gradient of `y` is seeded with ones of `y`'s shape (`y`'s sum is what is differentiated)
//! and flows back through the nodes between the `xs` and `y` in reverse topological order, by
//! the rules of docs/contract.md (section `gradient`): Add, Sub, Mul, Div, Neg, Identity and
//! Relu. A gradient that reaches an operand through broadcasting is summed back to the
//! operand's shape by `samebits::SumToShape` (canonical sums); a value that reaches `y` along
//! several paths gets the sum of its contributions, added left to right in the order the
//! consumers are visited (reverse topological order, then input position). No other rounding
//! is introduced, so the result is one fixed sequence of float operations on every machine.
//! A node on the way with no rule is an error naming it.
//!
//! Runs on a topologically sorted graph and leaves it sorted.

use crate::{PassError, Result};
use samebits_ir::{Attribute, Graph, Node, Tensor};
use samebits_ops::OpError;
use std::collections::{BTreeMap, BTreeSet, HashMap};

const TRAINING_DOMAIN: &str = "ai.onnx.preview.training";

/// Expands every Gradient node; returns how many there were.
pub fn run(graph: &mut Graph) -> Result<usize> {
    let mut expanded = 0;
    while let Some(at) = graph
        .nodes
        .iter()
        .position(|n| n.domain == TRAINING_DOMAIN && n.op_type == "Gradient")
    {
        let node = graph.nodes.remove(at);
        let added = expand(graph, &node).map_err(|e| PassError::Op {
            pass: "differentiation",
            source: OpError::Invalid(format!("{}: {e}", node.describe())),
        })?;
        graph.nodes.extend(added);
        crate::topological::run(graph)?;
        expanded += 1;
    }
    Ok(expanded)
}

/// The attribute `name` as a list of strings (absent: empty).
fn strings(node: &Node, name: &str) -> Result<Vec<String>, String> {
    match node.attributes.get(name) {
        None => Ok(Vec::new()),
        Some(Attribute::Strings(v)) => Ok(v.clone()),
        Some(other) => Err(format!(
            "attribute \"{name}\" must be a list of strings, got {}",
            other.kind()
        )),
    }
}

/// The new nodes of one Gradient node and the names they use.
struct Builder {
    prefix: String,
    nodes: Vec<Node>,
    taken: BTreeSet<String>,
}

impl Builder {
    /// A value name unique in the graph, derived from `hint`.
    fn fresh(&mut self, hint: &str) -> String {
        let base = format!("{}/{hint}", self.prefix);
        let mut name = base.clone();
        let mut k = 1;
        while self.taken.contains(&name) {
            name = format!("{base}.{k}");
            k += 1;
        }
        self.taken.insert(name.clone());
        name
    }

    /// Adds a default-domain node and returns its one output.
    fn node(&mut self, op: &str, inputs: &[&str], hint: &str) -> String {
        self.node_with(op, "", inputs, hint, BTreeMap::new())
    }

    fn node_with(
        &mut self,
        op: &str,
        domain: &str,
        inputs: &[&str],
        hint: &str,
        attributes: BTreeMap<String, Attribute>,
    ) -> String {
        let out = self.fresh(hint);
        self.nodes.push(Node {
            name: out.clone(),
            op_type: op.to_string(),
            domain: domain.to_string(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: vec![out.clone()],
            attributes,
        });
        out
    }

    /// A tensor of `like`'s shape and dtype filled with `value`.
    fn filled_like(&mut self, like: &str, value: f32, hint: &str) -> String {
        let shape = self.node("Shape", &[like], &format!("{hint}.shape"));
        let fill = Attribute::Tensor(Tensor::from_vec(vec![1], vec![value]).expect("one value"));
        let f32s = self.node_with(
            "ConstantOfShape",
            "",
            &[&shape],
            &format!("{hint}.f32"),
            BTreeMap::from([("value".to_string(), fill)]),
        );
        self.node("CastLike", &[&f32s, like], hint)
    }

    /// `grad` summed back to `operand`'s shape.
    fn sum_to(&mut self, grad: &str, operand: &str) -> String {
        self.node_with(
            "SumToShape",
            "samebits",
            &[grad, operand],
            &format!("d{operand}"),
            BTreeMap::new(),
        )
    }
}

fn expand(graph: &Graph, node: &Node) -> Result<Vec<Node>, String> {
    let xs = strings(node, "xs")?;
    let zs = strings(node, "zs")?;
    let y = match node.attributes.get("y") {
        Some(Attribute::String(y)) => y.clone(),
        _ => return Err("the string attribute \"y\" is required".into()),
    };
    if xs.is_empty() {
        return Err("attribute \"xs\" names no tensor".into());
    }
    let fed: Vec<&String> = xs.iter().chain(&zs).collect();
    if node.inputs.len() != fed.len() || node.inputs.iter().zip(&fed).any(|(i, f)| i != *f) {
        return Err(format!(
            "its inputs {:?} must be the tensors named by xs and zs, in that order ({fed:?})",
            node.inputs
        ));
    }
    if node.outputs.len() != xs.len() {
        return Err(format!(
            "{} outputs for {} tensors in xs",
            node.outputs.len(),
            xs.len()
        ));
    }

    // Values that depend on some x (zs are constants), then the nodes between xs and y.
    let held: BTreeSet<&str> = zs.iter().map(String::as_str).collect();
    let mut varying: BTreeSet<&str> = xs.iter().map(String::as_str).collect();
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in graph.nodes.iter().enumerate() {
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            producer.insert(o, i);
        }
        let depends = n
            .inputs
            .iter()
            .any(|i| varying.contains(i.as_str()) && !held.contains(i.as_str()));
        if depends {
            for o in &n.outputs {
                if !held.contains(o.as_str()) && !varying.contains(o.as_str()) {
                    varying.insert(o);
                }
            }
        }
    }
    let mut on_path = BTreeSet::new();
    let mut stack = vec![y.as_str()];
    let mut seen = BTreeSet::new();
    while let Some(v) = stack.pop() {
        if !seen.insert(v) || !varying.contains(v) || xs.iter().any(|x| x == v) {
            continue;
        }
        if let Some(&p) = producer.get(v) {
            on_path.insert(p);
            stack.extend(graph.nodes[p].inputs.iter().map(String::as_str));
        }
    }

    let taken = graph
        .nodes
        .iter()
        .flat_map(|n| n.outputs.iter().chain(n.inputs.iter()))
        .chain(graph.initializers.keys())
        .chain(graph.inputs.iter().map(|v| &v.name))
        .cloned()
        .collect();
    let label = if node.name.is_empty() {
        "gradient"
    } else {
        &node.name
    };
    let mut b = Builder {
        prefix: label.to_string(),
        nodes: Vec::new(),
        taken,
    };

    // Contributions to each value's gradient, in the order they arrive.
    let mut contributions: HashMap<String, Vec<String>> = HashMap::new();
    let seed = b.filled_like(&y, 1.0, &format!("d{y}"));
    contributions.insert(y.clone(), vec![seed]);
    let needs = |v: &str| varying.contains(v) && !held.contains(v);
    for &p in on_path.iter().rev() {
        let n = &graph.nodes[p];
        let Some(grad) = total(&mut b, &mut contributions, &n.outputs[0]) else {
            continue;
        };
        if n.outputs.len() != 1 {
            return Err(format!(
                "no gradient rule for {} (several outputs)",
                n.describe()
            ));
        }
        for (input, g) in rule(&mut b, n, &grad, &needs)? {
            contributions.entry(input).or_default().push(g);
        }
    }

    for (x, out) in xs.iter().zip(&node.outputs) {
        let grad = match total(&mut b, &mut contributions, x) {
            Some(g) => g,
            None => b.filled_like(x, 0.0, &format!("d{x}.zero")),
        };
        if !out.is_empty() {
            b.nodes.push(Node {
                name: out.clone(),
                op_type: "Identity".into(),
                domain: String::new(),
                inputs: vec![grad],
                outputs: vec![out.clone()],
                attributes: BTreeMap::new(),
            });
        }
    }
    Ok(b.nodes)
}

/// The sum of `value`'s gradient contributions, left to right (`None` when it has none).
fn total(
    b: &mut Builder,
    contributions: &mut HashMap<String, Vec<String>>,
    value: &str,
) -> Option<String> {
    let parts = contributions.remove(value)?;
    let mut parts = parts.into_iter();
    let first = parts.next()?;
    Some(parts.fold(first, |sum, part| {
        b.node("Add", &[&sum, &part], &format!("d{value}.sum"))
    }))
}

/// The gradient rule of node `n` given its output's gradient `g`: (input, contribution) pairs
/// for the inputs that `needs` a gradient.
fn rule(
    b: &mut Builder,
    n: &Node,
    g: &str,
    needs: &dyn Fn(&str) -> bool,
) -> Result<Vec<(String, String)>, String> {
    let no_rule = || format!("no gradient rule for {} on the way to y", n.describe());
    if !n.domain.is_empty() {
        return Err(no_rule());
    }
    if n.attributes.contains_key("broadcast") || n.attributes.contains_key("axis") {
        return Err(format!(
            "{} uses the legacy broadcast attributes, which have no gradient rule",
            n.describe()
        ));
    }
    let input = |i: usize| -> Result<String, String> {
        match n.inputs.get(i) {
            Some(v) if !v.is_empty() => Ok(v.clone()),
            _ => Err(format!("{}: input {i} is missing", n.describe())),
        }
    };
    let c = &n.outputs[0];
    let a = input(0)?;
    let mut out = Vec::new();
    match n.op_type.as_str() {
        "Identity" => out.push((a, g.to_string())),
        "Neg" => {
            let d = b.node("Neg", &[g], &format!("d{c}.neg"));
            out.push((a, d));
        }
        "Relu" => {
            let zero = b.filled_like(&a, 0.0, &format!("{a}.zero"));
            let positive = b.node("Greater", &[&a, &zero], &format!("{a}.positive"));
            let d = b.node("Where", &[&positive, g, &zero], &format!("d{a}.relu"));
            out.push((a, d));
        }
        "Add" | "Sub" | "Mul" | "Div" => {
            let x = input(1)?;
            // c = a + x, a - x, a * x or a / x; the terms before summing to each operand.
            let quotient = || format!("d{c}.div");
            if needs(&a) {
                let da = match n.op_type.as_str() {
                    "Add" | "Sub" => g.to_string(),
                    "Mul" => b.node("Mul", &[g, &x], &format!("d{c}.mul")),
                    _ => b.node("Div", &[g, &x], &quotient()),
                };
                out.push((a.clone(), b.sum_to(&da, &a)));
            }
            if needs(&x) {
                let dx = match n.op_type.as_str() {
                    "Add" => g.to_string(),
                    "Sub" => b.node("Neg", &[g], &format!("d{c}.neg")),
                    "Mul" => b.node("Mul", &[g, &a], &format!("d{c}.mul")),
                    _ => {
                        // dx = -((g / x) * c)
                        let q = b.node("Div", &[g, &x], &quotient());
                        let qc = b.node("Mul", &[&q, c], &format!("d{c}.mul"));
                        b.node("Neg", &[&qc], &format!("d{c}.neg"))
                    }
                };
                out.push((x.clone(), b.sum_to(&dx, &x)));
            }
        }
        _ => return Err(no_rule()),
    }
    out.retain(|(input, _)| needs(input));
    Ok(out)
}
