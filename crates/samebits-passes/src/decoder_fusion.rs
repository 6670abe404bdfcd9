//! Decoder fusion: rewrite rules that turn node patterns of an LLM decoder into the `samebits::`
//! ops of samebits-ops' `decoder_fused.rs`, which a device runs as one launch (an LLM decode
//! step is a few hundred tiny launches, so each one saved counts).
//!
//! A [`Rule`] is declared, not coded: a [`Pattern`] of nodes whose operands are captured
//! outside values or outputs of earlier pattern nodes (commutative nodes match either operand
//! order), [`Check`]s on the captured values, and the op type of the replacement node. A match
//! is legal when every pattern node has one output, every intermediate value (a pattern node's
//! output other than the last node's) is read by pattern nodes only (not by another node, a
//! subgraph or the graph outputs), no captured value is an intermediate, and every check
//! passes. The replacement node reads the captures in order, writes the last node's output and
//! carries the matched nodes as its `body` graph, which is what its CPU evaluation runs: the
//! rewritten graph computes the same bits as the original on the CPU by construction, and the
//! device's fused launch computes the same roundings in the same order (each rule's test
//! checks fused == unfused bit for bit).
//!
//! [`RULES`], in priority order:
//! - `silu_gate`: `Mul(Mul(g, Sigmoid(g)), u)` → `SiluGate(g, u)`; g and u float32 of one shape
//!   where known.
//! - `product_add`: `Add(MatMulGguf(x, w), r)` → `MatMulGgufAdd(x, w, r)`; r float32 of the
//!   product's shape where known and not a constant (a bias broadcasts: not fused).

use samebits_ir::{Attribute, DType, Graph, Node, ValueInfo};
use samebits_ops::decoder_fused::{DOMAIN, MATMUL_GGUF_ADD, SILU_GATE};
use std::collections::{BTreeMap, BTreeSet};

/// Where a pattern node's operand comes from.
#[derive(Clone, Copy, Debug)]
pub enum Operand {
    /// Captured value `k` (a value from outside the pattern, input `k` of the fused node).
    Capture(usize),
    /// Output 0 of pattern node `j` (an earlier one).
    Node(usize),
}

/// One node of a [`Pattern`]: `(domain, op_type)` and its operands, in order (or in either
/// order when `commutative`, two operands).
#[derive(Clone, Copy, Debug)]
pub struct PatternNode {
    pub op: (&'static str, &'static str),
    pub operands: &'static [Operand],
    pub commutative: bool,
}

/// Pattern nodes in dataflow order: each reads captures and earlier nodes; the last one's
/// output is the fused node's output.
pub type Pattern = &'static [PatternNode];

/// A legality check on captured values (beyond the structural ones of the module docs).
#[derive(Clone, Copy, Debug)]
pub enum Check {
    /// Capture `k` is float32 where its dtype is known.
    F32(usize),
    /// Captures `a` and `b` have one shape where both are known.
    SameShape(usize, usize),
    /// Capture `k` has the shape of the output of pattern node `j` where both are known.
    ShapeOfNode(usize, usize),
    /// Capture `k` is not a constant (an initializer).
    NotConstant(usize),
}

/// A rewrite rule: pattern + checks + replacement op type (domain `samebits`).
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    pub name: &'static str,
    pub pattern: Pattern,
    pub captures: usize,
    pub checks: &'static [Check],
    pub op_type: &'static str,
}

const fn node(
    op: (&'static str, &'static str),
    operands: &'static [Operand],
    commutative: bool,
) -> PatternNode {
    PatternNode {
        op,
        operands,
        commutative,
    }
}

use Operand::{Capture as C, Node as N};

/// The SiLU gate of a feed-forward block: captures g, u.
pub const SILU_GATE_RULE: Rule = Rule {
    name: "silu_gate",
    pattern: &[
        node(("", "Sigmoid"), &[C(0)], false),
        node(("", "Mul"), &[C(0), N(0)], true),
        node(("", "Mul"), &[N(1), C(1)], true),
    ],
    captures: 2,
    checks: &[Check::F32(0), Check::F32(1), Check::SameShape(0, 1)],
    op_type: SILU_GATE,
};

/// A GGUF product and its residual Add: captures x, w, r.
pub const PRODUCT_ADD_RULE: Rule = Rule {
    name: "product_add",
    pattern: &[
        node(("samebits", "MatMulGguf"), &[C(0), C(1)], false),
        node(("", "Add"), &[N(0), C(2)], true),
    ],
    captures: 3,
    checks: &[
        Check::F32(2),
        Check::ShapeOfNode(2, 0),
        Check::NotConstant(2),
    ],
    op_type: MATMUL_GGUF_ADD,
};

/// Every rule, in priority order.
pub const RULES: &[Rule] = &[SILU_GATE_RULE, PRODUCT_ADD_RULE];

/// What the pass did: matches per rule name.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct DecoderFusionReport {
    pub matches: BTreeMap<&'static str, usize>,
}

/// One match: the graph indices of the pattern nodes (in pattern order) and the captured
/// value names.
#[derive(Clone, Debug)]
struct Match {
    nodes: Vec<usize>,
    captures: Vec<String>,
}

/// Rewrites every legal match of `rules` in the main graph (subgraphs are left alone); a node
/// joins at most one match, rules earlier in `rules` first at each root.
pub fn run(graph: &mut Graph, rules: &[Rule]) -> DecoderFusionReport {
    let mut producer: BTreeMap<&str, usize> = BTreeMap::new();
    let mut readers: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        for out in &node.outputs {
            producer.insert(out.as_str(), i);
        }
    }
    let captures: Vec<BTreeSet<String>> = graph
        .nodes
        .iter()
        .map(samebits_ops::node_captures)
        .collect();
    for (i, node) in graph.nodes.iter().enumerate() {
        for name in node.inputs.iter().chain(&captures[i]) {
            readers.entry(name.as_str()).or_default().push(i);
        }
    }
    for out in &graph.outputs {
        readers
            .entry(out.name.as_str())
            .or_default()
            .push(usize::MAX);
    }
    let mut report = DecoderFusionReport::default();
    let mut taken = vec![false; graph.nodes.len()];
    // Root index → (rule, match).
    let mut rewrites: BTreeMap<usize, (Rule, Match)> = BTreeMap::new();
    for root in 0..graph.nodes.len() {
        for rule in rules {
            let found = match_at(graph, &producer, rule, rule.pattern.len() - 1, root)
                .into_iter()
                .find(|m| m.nodes.iter().all(|&i| !taken[i]) && legal(graph, &readers, rule, m));
            if let Some(m) = found {
                for &i in &m.nodes {
                    taken[i] = true;
                }
                *report.matches.entry(rule.name).or_default() += 1;
                rewrites.insert(root, (*rule, m));
                break;
            }
        }
    }
    let old = std::mem::take(&mut graph.nodes);
    let mut nodes = Vec::with_capacity(old.len());
    for (i, node) in old.iter().enumerate() {
        match rewrites.get(&i) {
            Some((rule, m)) => nodes.push(fused_node(graph, &old, rule, m)),
            None if taken[i] => {}
            None => nodes.push(node.clone()),
        }
    }
    graph.nodes = nodes;
    report
}

/// The matches of pattern node `j` (with the nodes before it) rooted at graph node `at`.
fn match_at(
    graph: &Graph,
    producer: &BTreeMap<&str, usize>,
    rule: &Rule,
    j: usize,
    at: usize,
) -> Vec<Match> {
    let want = &rule.pattern[j];
    let node = &graph.nodes[at];
    let domain = samebits_ops::registry::canonical_domain(&node.domain);
    if (domain, node.op_type.as_str()) != want.op
        || node.outputs.len() != 1
        || node.inputs.len() != want.operands.len()
    {
        return Vec::new();
    }
    let mut orders = vec![node.inputs.clone()];
    if want.commutative && node.inputs.len() == 2 && node.inputs[0] != node.inputs[1] {
        orders.push(vec![node.inputs[1].clone(), node.inputs[0].clone()]);
    }
    let mut found = Vec::new();
    for inputs in orders {
        let mut partial = vec![Match {
            nodes: vec![usize::MAX; j + 1],
            captures: vec![String::new(); rule.captures],
        }];
        partial[0].nodes[j] = at;
        for (operand, name) in want.operands.iter().zip(&inputs) {
            let mut next = Vec::new();
            for m in partial {
                match *operand {
                    Operand::Capture(k) => {
                        if name.is_empty() || !(m.captures[k].is_empty() || m.captures[k] == *name)
                        {
                            continue;
                        }
                        let mut m = m;
                        m.captures[k] = name.clone();
                        next.push(m);
                    }
                    Operand::Node(p) => {
                        let Some(&from) = producer.get(name.as_str()) else {
                            continue;
                        };
                        for sub in match_at(graph, producer, rule, p, from) {
                            if let Some(merged) = merge(&m, &sub) {
                                next.push(merged);
                            }
                        }
                    }
                }
            }
            partial = next;
        }
        found.extend(partial);
    }
    found
}

/// `a` and `b` together, or `None` where they bind something differently.
fn merge(a: &Match, b: &Match) -> Option<Match> {
    let mut m = a.clone();
    for (i, &n) in b.nodes.iter().enumerate() {
        match m.nodes[i] {
            usize::MAX => m.nodes[i] = n,
            own if n != usize::MAX && own != n => return None,
            _ => {}
        }
    }
    for (k, name) in b.captures.iter().enumerate() {
        if name.is_empty() {
            continue;
        }
        if m.captures[k].is_empty() {
            m.captures[k] = name.clone();
        } else if m.captures[k] != *name {
            return None;
        }
    }
    Some(m)
}

/// The structural conditions of the module docs and the rule's checks.
fn legal(graph: &Graph, readers: &BTreeMap<&str, Vec<usize>>, rule: &Rule, m: &Match) -> bool {
    if m.nodes.contains(&usize::MAX) || m.captures.iter().any(String::is_empty) {
        return false;
    }
    let distinct: BTreeSet<usize> = m.nodes.iter().copied().collect();
    if distinct.len() != m.nodes.len() {
        return false;
    }
    let output = |j: usize| graph.nodes[m.nodes[j]].outputs[0].as_str();
    let intermediates: Vec<&str> = (0..m.nodes.len() - 1).map(output).collect();
    let private = intermediates.iter().all(|name| {
        readers
            .get(name)
            .is_none_or(|r| r.iter().all(|i| distinct.contains(i)))
    });
    if !private
        || m.captures
            .iter()
            .any(|c| intermediates.contains(&c.as_str()))
    {
        return false;
    }
    let shape = |name: &str| graph.value_type(name).and_then(|t| t.shape().cloned());
    rule.checks.iter().all(|check| match *check {
        Check::F32(k) => graph
            .value_type(&m.captures[k])
            .and_then(|t| t.dtype())
            .is_none_or(|d| d == DType::F32),
        Check::SameShape(a, b) => match (shape(&m.captures[a]), shape(&m.captures[b])) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        },
        Check::ShapeOfNode(k, j) => match (shape(&m.captures[k]), shape(output(j))) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        },
        Check::NotConstant(k) => !graph.initializers.contains_key(&m.captures[k]),
    })
}

/// The node replacing match `m` of `rule`, its nodes (from `nodes`) as its `body`.
fn fused_node(graph: &Graph, nodes: &[Node], rule: &Rule, m: &Match) -> Node {
    let members: Vec<Node> = m.nodes.iter().map(|&i| nodes[i].clone()).collect();
    let root = members.last().expect("a pattern has nodes");
    let result = root.outputs[0].clone();
    let name = format!(
        "fused {}",
        if root.name.is_empty() {
            &result
        } else {
            &root.name
        }
    );
    let info = |name: &String| ValueInfo {
        name: name.clone(),
        ty: graph.value_type(name),
    };
    let value_types = members[..members.len() - 1]
        .iter()
        .filter_map(|n| Some((n.outputs[0].clone(), graph.value_type(&n.outputs[0])?)))
        .collect();
    let body = Graph {
        name: format!("{} {name}", rule.name),
        inputs: m.captures.iter().map(info).collect(),
        outputs: vec![info(&result)],
        nodes: members,
        initializers: BTreeMap::new(),
        value_types,
    };
    Node {
        name,
        op_type: rule.op_type.to_string(),
        domain: DOMAIN.to_string(),
        inputs: m.captures.clone(),
        outputs: vec![result],
        attributes: BTreeMap::from([("body".to_string(), Attribute::Graph(Box::new(body)))]),
    }
}
