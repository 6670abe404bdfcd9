//! The differentiation pass: a Gradient node over Add, Sub, Mul, Div, Relu and a broadcast
//! operand, evaluated by constant folding, against derivatives worked out by hand and
//! evaluated in float64; held (`zs`) tensors, unreachable `xs` and ops without a rule.

mod common;

use common::node;
use samebits_ir::{Attribute, DType, Graph, Model, Node, Tensor, ValueInfo};
use samebits_ops::OperationSet;
use samebits_passes::Pipeline;

fn gradient(xs: &[&str], zs: &[&str], y: &str, outputs: &[&str]) -> Node {
    let strings = |v: &[&str]| Attribute::Strings(v.iter().map(|s| s.to_string()).collect());
    let mut attributes = std::collections::BTreeMap::new();
    attributes.insert("xs".to_string(), strings(xs));
    attributes.insert("y".to_string(), Attribute::String(y.into()));
    if !zs.is_empty() {
        attributes.insert("zs".to_string(), strings(zs));
    }
    Node {
        name: "grad".into(),
        op_type: "Gradient".into(),
        domain: "ai.onnx.preview.training".into(),
        inputs: xs.iter().chain(zs).map(|s| s.to_string()).collect(),
        outputs: outputs.iter().map(|s| s.to_string()).collect(),
        attributes,
    }
}

const A: [f32; 6] = [1.5, -2.0, 0.25, 3.0, -0.75, 2.5];
const B: [f32; 3] = [0.5, -4.0, 3.0];

/// y = ((a * b - a) / b) + relu(a) + a, with a of shape [2, 3] and b of shape [3] broadcast
/// along a's rows; `gradient` is the Gradient node, its outputs are the graph outputs.
fn model(gradient: Node) -> Model {
    let mut g = Graph::default();
    g.initializers.insert(
        "a".into(),
        Tensor::from_vec(vec![2, 3], A.to_vec()).unwrap(),
    );
    g.initializers
        .insert("b".into(), Tensor::from_vec(vec![3], B.to_vec()).unwrap());
    g.nodes.push(gradient.clone());
    g.nodes.push(node("Add", &["q", "r"], "s"));
    g.nodes.push(node("Add", &["s", "a"], "y"));
    g.nodes.push(node("Mul", &["a", "b"], "ab"));
    g.nodes.push(node("Sub", &["ab", "a"], "p"));
    g.nodes.push(node("Div", &["p", "b"], "q"));
    g.nodes.push(node("Relu", &["a"], "r"));
    for o in gradient.outputs {
        g.outputs.push(ValueInfo { name: o, ty: None });
    }
    Model {
        graph: g,
        ..Default::default()
    }
}

fn run(mut m: Model) -> Result<Model, String> {
    Pipeline {
        operation_set: OperationSet::Reproducible,
        dump_dir: None,
    }
    .run(&mut m)
    .map_err(|e| e.to_string())?;
    Ok(m)
}

fn folded(m: &Model, name: &str) -> (Vec<usize>, Vec<f32>) {
    let t = &m.graph.initializers[name];
    assert_eq!(t.dtype(), DType::F32);
    (t.shape().to_vec(), t.as_slice::<f32>().unwrap().to_vec())
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs() / w.abs().max(1.0);
        assert!(err < 1e-6, "{what}[{i}]: {g} vs {w}");
    }
}

#[test]
fn gradients_match_hand_derivatives_with_broadcasting() {
    let m = run(model(gradient(&["a", "b"], &[], "y", &["da", "db"]))).unwrap();
    // dy/da = (b - 1) / b + [a > 0] + 1; dy/db (each b[j], summed over a's two rows) =
    // a / b^2, since y = a - a / b + relu(a) + a.
    let da: Vec<f64> = (0..6)
        .map(|k| {
            let (a, b) = (A[k] as f64, B[k % 3] as f64);
            (b - 1.0) / b + if a > 0.0 { 1.0 } else { 0.0 } + 1.0
        })
        .collect();
    let db: Vec<f64> = (0..3)
        .map(|j| {
            let b = B[j] as f64;
            (A[j] as f64 + A[j + 3] as f64) / (b * b)
        })
        .collect();
    let (shape, values) = folded(&m, "da");
    assert_eq!(shape, [2, 3]);
    assert_close(&values, &da, "da");
    let (shape, values) = folded(&m, "db");
    assert_eq!(shape, [3]);
    assert_close(&values, &db, "db");
}

#[test]
fn held_tensors_get_no_gradient_and_unreachable_ones_get_zeros() {
    // b held constant: da as above. A second x that y does not depend on gets zeros.
    let mut m = model(gradient(&["a", "c"], &["b"], "y", &["da", "dc"]));
    m.graph.initializers.insert(
        "c".into(),
        Tensor::from_vec(vec![2], vec![7.0f32, 8.0]).unwrap(),
    );
    let m = run(m).unwrap();
    let (_, da) = folded(&m, "da");
    assert_eq!(da.len(), 6);
    assert_eq!(folded(&m, "dc"), (vec![2], vec![0.0, 0.0]));
}

#[test]
fn an_op_without_a_rule_is_an_error_naming_it() {
    let mut m = model(gradient(&["a"], &[], "y", &["da"]));
    // relu(a) becomes exp(a): no rule.
    let relu = m
        .graph
        .nodes
        .iter_mut()
        .find(|n| n.op_type == "Relu")
        .unwrap();
    relu.op_type = "Exp".into();
    let err = run(m).unwrap_err();
    assert!(
        err.contains("Gradient node \"grad\"") && err.contains("Exp node \"r\""),
        "{err}"
    );
}

#[test]
fn inputs_other_than_xs_and_zs_are_refused() {
    let mut g = gradient(&["a"], &[], "y", &["da"]);
    g.inputs = vec!["b".into()];
    let err = run(model(g)).unwrap_err();
    assert!(
        err.contains("must be the tensors named by xs and zs"),
        "{err}"
    );
}
