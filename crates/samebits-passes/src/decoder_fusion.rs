//! Decoder fusion: rewrite rules that turn node patterns of an LLM decoder into the `samebits::`
//! ops of samebits-ops' `decoder_fused.rs`, which a device runs as one launch (an LLM decode
//! step is a few hundred tiny launches, so each one saved counts). This pass is the only place
//! where decoder nodes fuse: executors run the ops they are given.
//!
//! A [`Rule`] is declared, not coded: a [`Pattern`] of nodes whose operands are captured
//! outside values, outputs of earlier pattern nodes or absent optional inputs (commutative
//! nodes match either operand order), [`Check`]s on the captured values, the pattern-node
//! outputs the fused node gives, and the op type of the replacement node. A match is legal
//! when every pattern node has the pattern's number of outputs, every intermediate value (a
//! pattern-node output the fused node does not give) is read by pattern nodes only (not by
//! another node, a subgraph or the graph outputs), every value the fused node gives is read
//! outside only by nodes after the pattern's last, no captured value is a pattern-node
//! output, and every check passes. The replacement node reads the captures in order, writes
//! the rule's outputs in order, sits where the pattern's last node was and carries the matched
//! nodes as its `body` graph, which is what its CPU evaluation runs: the rewritten graph
//! computes the same bits as the original on the CPU by construction, and the device's fused
//! launch computes the same roundings in the same order (each rule's test checks fused ==
//! unfused bit for bit).
//!
//! [`RULES`] run in order, each over the graph the earlier ones left (so later patterns may
//! contain the ops earlier rules emit):
//! - `silu_gate`: `Mul(Mul(g, Sigmoid(g)), u)` → `SiluGate(g, u)`; g and u float32 of one shape
//!   where known.
//! - `product_add`: `Add(MatMulGguf(x, w), r)` → `MatMulGgufAdd(x, w, r)`; r float32 of the
//!   product's shape where known and not a constant (a bias broadcasts: not fused).
//! - `attention_product`: `MatMulGgufAdd(Attention(q, k, v, -, pk, pv)[0], w, r)` →
//!   `AttentionProduct(q, k, v, pk, pv, w, r)`, outputs the sum and the presents.
//! - `norm_qkv_rotary`: `RMSNormalization(x, s)` = n, `MatMulGguf(n, wq | wk | wv)`, then
//!   `RotaryEmbedding` of the first two products with one cos / sin pair →
//!   `GgufProducts(x, s, wq, wk, wv, cos, sin)`, outputs the rotated Q and K and V.
//! - `norm_gate_up`: n, `MatMulGguf(n, wg | wu)`, `SiluGate` of the two →
//!   `GgufProducts(x, s, wg, wu)`.
//! - `norm_products3`, `norm_products2`, `norm_product`: n and three, two or one products of
//!   it → `GgufProducts(x, s, w..)`, one output per product.

use samebits_ir::{Attribute, DType, Graph, Node, ValueInfo};
use samebits_ops::decoder_fused::{
    ATTENTION_PRODUCT, DOMAIN, GGUF_PRODUCTS, MATMUL_GGUF_ADD, SILU_GATE,
};
use std::collections::{BTreeMap, BTreeSet};

/// Where a pattern node's operand comes from.
#[derive(Clone, Copy, Debug)]
pub enum Operand {
    /// Captured value `k` (a value from outside the pattern, input `k` of the fused node).
    Capture(usize),
    /// Output 0 of pattern node `j` (an earlier one).
    Node(usize),
    /// An omitted optional input (an empty name).
    Absent,
}

/// One node of a [`Pattern`]: `(domain, op_type)`, its operands, in order (or in either order
/// when `commutative`, two operands), and its number of outputs.
#[derive(Clone, Copy, Debug)]
pub struct PatternNode {
    pub op: (&'static str, &'static str),
    pub operands: &'static [Operand],
    pub commutative: bool,
    pub outputs: usize,
}

/// Pattern nodes in dataflow order: each node after the first reads output 0 of an earlier
/// one (the matcher finds it among that value's readers).
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

/// A rewrite rule: pattern + checks + the fused node's outputs (output `o` of pattern node
/// `j`, as `(j, o)`) + replacement op type (domain `samebits`).
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    pub name: &'static str,
    pub pattern: Pattern,
    pub captures: usize,
    pub checks: &'static [Check],
    pub outputs: &'static [(usize, usize)],
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
        outputs: 1,
    }
}

use Operand::{Absent, Capture as C, Node as N};

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
    outputs: &[(2, 0)],
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
    outputs: &[(1, 0)],
    op_type: MATMUL_GGUF_ADD,
};

/// Attention and the product of its output with its residual Add: captures q, k, v,
/// past_key, past_value, w, r.
pub const ATTENTION_PRODUCT_RULE: Rule = Rule {
    name: "attention_product",
    pattern: &[
        PatternNode {
            outputs: 3,
            ..node(
                ("", "Attention"),
                &[C(0), C(1), C(2), Absent, C(3), C(4)],
                false,
            )
        },
        node(("samebits", MATMUL_GGUF_ADD), &[N(0), C(5), C(6)], false),
    ],
    captures: 7,
    checks: &[Check::F32(6)],
    outputs: &[(1, 0), (0, 1), (0, 2)],
    op_type: ATTENTION_PRODUCT,
};

/// The row norm all the product rules start with: captures x, scale.
const NORM: PatternNode = node(("", "RMSNormalization"), &[C(0), C(1)], false);
/// Products of the normalized rows with captures 2, 3 and 4.
const PRODUCT_0: PatternNode = node(("samebits", "MatMulGguf"), &[N(0), C(2)], false);
const PRODUCT_1: PatternNode = node(("samebits", "MatMulGguf"), &[N(0), C(3)], false);
const PRODUCT_2: PatternNode = node(("samebits", "MatMulGguf"), &[N(0), C(4)], false);

/// Norm, Q, K, V products and the rotaries of Q and K: captures x, scale, wq, wk, wv, cos, sin.
pub const NORM_QKV_ROTARY_RULE: Rule = Rule {
    name: "norm_qkv_rotary",
    pattern: &[
        NORM,
        PRODUCT_0,
        PRODUCT_1,
        PRODUCT_2,
        node(("", "RotaryEmbedding"), &[N(1), C(5), C(6)], false),
        node(("", "RotaryEmbedding"), &[N(2), C(5), C(6)], false),
    ],
    captures: 7,
    checks: &[Check::F32(0)],
    outputs: &[(4, 0), (5, 0), (3, 0)],
    op_type: GGUF_PRODUCTS,
};

/// Norm, gate and up products and their SiLU gate: captures x, scale, wg, wu.
pub const NORM_GATE_UP_RULE: Rule = Rule {
    name: "norm_gate_up",
    pattern: &[
        NORM,
        PRODUCT_0,
        PRODUCT_1,
        node(("samebits", SILU_GATE), &[N(1), N(2)], false),
    ],
    captures: 4,
    checks: &[Check::F32(0)],
    outputs: &[(3, 0)],
    op_type: GGUF_PRODUCTS,
};

/// Norm and three products: captures x, scale, w0, w1, w2.
pub const NORM_PRODUCTS3_RULE: Rule = Rule {
    name: "norm_products3",
    pattern: &[NORM, PRODUCT_0, PRODUCT_1, PRODUCT_2],
    captures: 5,
    checks: &[Check::F32(0)],
    outputs: &[(1, 0), (2, 0), (3, 0)],
    op_type: GGUF_PRODUCTS,
};

/// Norm and two products: captures x, scale, w0, w1.
pub const NORM_PRODUCTS2_RULE: Rule = Rule {
    name: "norm_products2",
    pattern: &[NORM, PRODUCT_0, PRODUCT_1],
    captures: 4,
    checks: &[Check::F32(0)],
    outputs: &[(1, 0), (2, 0)],
    op_type: GGUF_PRODUCTS,
};

/// Norm and one product: captures x, scale, w.
pub const NORM_PRODUCT_RULE: Rule = Rule {
    name: "norm_product",
    pattern: &[NORM, PRODUCT_0],
    captures: 3,
    checks: &[Check::F32(0)],
    outputs: &[(1, 0)],
    op_type: GGUF_PRODUCTS,
};

/// Every rule, in the order they run.
pub const RULES: &[Rule] = &[
    SILU_GATE_RULE,
    PRODUCT_ADD_RULE,
    ATTENTION_PRODUCT_RULE,
    NORM_QKV_ROTARY_RULE,
    NORM_GATE_UP_RULE,
    NORM_PRODUCTS3_RULE,
    NORM_PRODUCTS2_RULE,
    NORM_PRODUCT_RULE,
];

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

/// Rewrites every legal match of `rules` in the main graph (subgraphs are left alone), one
/// rule after the other; a node joins at most one match of a rule, the first found in node
/// order.
pub fn run(graph: &mut Graph, rules: &[Rule]) -> DecoderFusionReport {
    let mut report = DecoderFusionReport::default();
    for rule in rules {
        let count = sweep(graph, rule);
        if count > 0 {
            *report.matches.entry(rule.name).or_default() += count;
        }
    }
    report
}

/// One rule over the graph: its matches rewritten; returns how many.
fn sweep(graph: &mut Graph, rule: &Rule) -> usize {
    let readers = readers(graph);
    let mut taken = vec![false; graph.nodes.len()];
    // Last pattern node's index → match.
    let mut rewrites: BTreeMap<usize, Match> = BTreeMap::new();
    for anchor in 0..graph.nodes.len() {
        if taken[anchor] {
            continue;
        }
        let mut found = Vec::new();
        let start = Match {
            nodes: Vec::new(),
            captures: vec![String::new(); rule.captures],
        };
        extend(graph, &readers, rule, start, anchor, &mut found);
        if let Some(m) = found
            .into_iter()
            .find(|m| m.nodes.iter().all(|&i| !taken[i]) && legal(graph, &readers, rule, m))
        {
            for &i in &m.nodes {
                taken[i] = true;
            }
            let last = *m.nodes.iter().max().expect("a pattern has nodes");
            rewrites.insert(last, m);
        }
    }
    let count = rewrites.len();
    let old = std::mem::take(&mut graph.nodes);
    let mut nodes = Vec::with_capacity(old.len());
    for (i, node) in old.iter().enumerate() {
        match rewrites.get(&i) {
            Some(m) => nodes.push(fused_node(graph, &old, rule, m)),
            None if taken[i] => {}
            None => nodes.push(node.clone()),
        }
    }
    graph.nodes = nodes;
    count
}

/// Readers of each value (node indices; `usize::MAX` for the graph outputs), subgraph
/// captures included.
fn readers(graph: &Graph) -> BTreeMap<String, Vec<usize>> {
    let mut readers: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        let captures = samebits_ops::node_captures(node);
        for name in node.inputs.iter().chain(&captures) {
            let list = readers.entry(name.clone()).or_default();
            if list.last() != Some(&i) {
                list.push(i);
            }
        }
    }
    for out in &graph.outputs {
        readers
            .entry(out.name.clone())
            .or_default()
            .push(usize::MAX);
    }
    readers
}

/// Extends the partial match `m` (pattern nodes `0..m.nodes.len()` bound) by binding the
/// next pattern node, to graph node `anchor` for the first and otherwise to a reader of the
/// earlier pattern node it reads; complete matches go to `found`.
fn extend(
    graph: &Graph,
    readers: &BTreeMap<String, Vec<usize>>,
    rule: &Rule,
    m: Match,
    anchor: usize,
    found: &mut Vec<Match>,
) {
    let j = m.nodes.len();
    let Some(want) = rule.pattern.get(j) else {
        found.push(m);
        return;
    };
    let candidates: Vec<usize> = match want.operands.iter().find_map(|o| match o {
        Operand::Node(p) => Some(*p),
        _ => None,
    }) {
        Some(p) => {
            let value = &graph.nodes[m.nodes[p]].outputs[0];
            readers
                .get(value)
                .map(|r| r.iter().copied().filter(|&i| i != usize::MAX).collect())
                .unwrap_or_default()
        }
        None if j == 0 => vec![anchor],
        None => Vec::new(),
    };
    for at in candidates {
        if m.nodes.contains(&at) {
            continue;
        }
        let node = &graph.nodes[at];
        let domain = samebits_ops::registry::canonical_domain(&node.domain);
        if (domain, node.op_type.as_str()) != want.op
            || node.outputs.len() != want.outputs
            || node.inputs.len() != want.operands.len()
        {
            continue;
        }
        let mut orders = vec![node.inputs.clone()];
        if want.commutative && node.inputs.len() == 2 && node.inputs[0] != node.inputs[1] {
            orders.push(vec![node.inputs[1].clone(), node.inputs[0].clone()]);
        }
        for inputs in orders {
            if let Some(mut bound) = bind(graph, &m, want, &inputs) {
                bound.nodes.push(at);
                extend(graph, readers, rule, bound, anchor, found);
            }
        }
    }
}

/// `m` with the operands of a pattern node bound to `inputs`, or `None` where one disagrees.
fn bind(graph: &Graph, m: &Match, want: &PatternNode, inputs: &[String]) -> Option<Match> {
    let mut m = m.clone();
    for (operand, name) in want.operands.iter().zip(inputs) {
        match *operand {
            Operand::Capture(k) => {
                if name.is_empty() || !(m.captures[k].is_empty() || m.captures[k] == *name) {
                    return None;
                }
                m.captures[k] = name.clone();
            }
            Operand::Node(p) => {
                if graph.nodes[m.nodes[p]].outputs[0] != *name {
                    return None;
                }
            }
            Operand::Absent => {
                if !name.is_empty() {
                    return None;
                }
            }
        }
    }
    Some(m)
}

/// The structural conditions of the module docs and the rule's checks.
fn legal(graph: &Graph, readers: &BTreeMap<String, Vec<usize>>, rule: &Rule, m: &Match) -> bool {
    if m.captures.iter().any(String::is_empty) {
        return false;
    }
    let members: BTreeSet<usize> = m.nodes.iter().copied().collect();
    let last = *m.nodes.iter().max().expect("a pattern has nodes");
    let given: Vec<&str> = rule
        .outputs
        .iter()
        .map(|&(j, o)| graph.nodes[m.nodes[j]].outputs[o].as_str())
        .collect();
    for &i in &m.nodes {
        for out in graph.nodes[i].outputs.iter().filter(|o| !o.is_empty()) {
            if m.captures.contains(out) {
                return false;
            }
            let outside = readers
                .get(out)
                .into_iter()
                .flatten()
                .filter(|r| !members.contains(r));
            let fine = match given.contains(&out.as_str()) {
                true => outside.into_iter().all(|&r| r > last),
                false => outside.count() == 0,
            };
            if !fine {
                return false;
            }
        }
    }
    let output = |j: usize| graph.nodes[m.nodes[j]].outputs[0].as_str();
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

/// The node replacing match `m` of `rule`, its nodes (from `nodes`, in pattern order: a
/// dataflow order) as its `body`.
fn fused_node(graph: &Graph, nodes: &[Node], rule: &Rule, m: &Match) -> Node {
    let members: Vec<Node> = m.nodes.iter().map(|&i| nodes[i].clone()).collect();
    let outputs: Vec<String> = rule
        .outputs
        .iter()
        .map(|&(j, o)| nodes[m.nodes[j]].outputs[o].clone())
        .collect();
    let root = members.last().expect("a pattern has nodes");
    let name = format!(
        "fused {}",
        if root.name.is_empty() {
            &root.outputs[0]
        } else {
            &root.name
        }
    );
    let info = |name: &String| ValueInfo {
        name: name.clone(),
        ty: graph.value_type(name),
    };
    let value_types = members
        .iter()
        .flat_map(|n| &n.outputs)
        .filter(|o| !o.is_empty() && !outputs.contains(o))
        .filter_map(|o| Some((o.clone(), graph.value_type(o)?)))
        .collect();
    let body = Graph {
        name: format!("{} {name}", rule.name),
        inputs: m.captures.iter().map(info).collect(),
        outputs: outputs.iter().map(info).collect(),
        nodes: members,
        initializers: BTreeMap::new(),
        value_types,
    };
    Node {
        name,
        op_type: rule.op_type.to_string(),
        domain: DOMAIN.to_string(),
        inputs: m.captures.clone(),
        outputs,
        attributes: BTreeMap::from([("body".to_string(), Attribute::Graph(Box::new(body)))]),
    }
}
