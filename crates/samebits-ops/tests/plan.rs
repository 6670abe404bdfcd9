//! The interpreter: topological ordering, input checks, error locations, slot release.

use samebits_ir::{Attribute, DType, Graph, Node, Shape, Tensor, Value, ValueInfo, ValueType};
use samebits_ops::{OperationSet, Plan, RunOptions};

fn node(op: &str, inputs: &[&str], outputs: &[&str]) -> Node {
    Node {
        name: format!("{op}_{}", outputs[0]),
        op_type: op.into(),
        domain: String::new(),
        inputs: inputs.iter().map(|s| s.to_string()).collect(),
        outputs: outputs.iter().map(|s| s.to_string()).collect(),
        attributes: Default::default(),
    }
}

fn f32_input(name: &str, dims: &[usize]) -> ValueInfo {
    ValueInfo {
        name: name.into(),
        ty: Some(ValueType::tensor(DType::F32, Some(Shape::known(dims)))),
    }
}

fn graph() -> Graph {
    let mut g = Graph::default();
    g.inputs.push(f32_input("x", &[2]));
    g.outputs.push(ValueInfo {
        name: "z".into(),
        ty: None,
    });
    g.initializers.insert(
        "w".into(),
        Tensor::from_vec(vec![2], vec![10f32, 20.]).unwrap(),
    );
    // Deliberately out of order: the plan must sort them.
    g.nodes.push(node("Mul", &["y", "w"], &["z"]));
    g.nodes.push(node("Add", &["x", "x"], &["y"]));
    g
}

fn run(g: &Graph, x: Tensor) -> Result<Vec<Value>, samebits_ops::OpError> {
    let plan = Plan::build(g, &Default::default(), OperationSet::Reproducible, &[])?;
    plan.run(vec![x.into()], RunOptions::default())
}

#[test]
fn runs_nodes_in_dependency_order() {
    let out = run(&graph(), Tensor::from_vec(vec![2], vec![1f32, 2.]).unwrap()).unwrap();
    assert_eq!(
        out[0].as_tensor().unwrap().as_slice::<f32>().unwrap(),
        &[20., 80.]
    );
}

#[test]
fn rejects_inputs_of_the_wrong_shape_or_dtype() {
    let e = run(
        &graph(),
        Tensor::from_vec(vec![3], vec![1f32, 2., 3.]).unwrap(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("input \"x\" has shape [3]"), "{e}");
    let e = run(&graph(), Tensor::from_vec(vec![2], vec![1i32, 2]).unwrap()).unwrap_err();
    assert!(e.to_string().contains("dtype i32"), "{e}");
}

#[test]
fn errors_name_the_node() {
    let mut g = graph();
    g.initializers.insert(
        "w".into(),
        Tensor::from_vec(vec![3], vec![1f32, 2., 3.]).unwrap(),
    );
    let e = run(&g, Tensor::from_vec(vec![2], vec![1f32, 2.]).unwrap()).unwrap_err();
    assert!(e.to_string().starts_with("Mul node \"Mul_z\": "), "{e}");
    assert!(e.to_string().contains("cannot be broadcast"), "{e}");
}

#[test]
fn reports_unknown_ops_missing_values_and_cycles() {
    let mut g = graph();
    g.nodes[0].op_type = "NoSuchOp".into();
    let e = Plan::build(&g, &Default::default(), OperationSet::Reproducible, &[]).unwrap_err();
    assert!(
        e.is_unsupported() && e.to_string().contains("NoSuchOp"),
        "{e}"
    );

    let mut g = graph();
    g.nodes[1].inputs[1] = "nowhere".into();
    let e = Plan::build(&g, &Default::default(), OperationSet::Reproducible, &[]).unwrap_err();
    assert!(e.to_string().contains("\"nowhere\""), "{e}");

    let mut g = graph();
    g.nodes[1].inputs[1] = "z".into();
    let e = Plan::build(&g, &Default::default(), OperationSet::Reproducible, &[]).unwrap_err();
    assert!(e.to_string().contains("cycle"), "{e}");
}

#[test]
fn wrong_attribute_kinds_are_errors() {
    let mut g = graph();
    g.nodes[0].op_type = "Mod".into();
    g.nodes[0]
        .attributes
        .insert("fmod".into(), Attribute::String("yes".into()));
    let e = Plan::build(&g, &Default::default(), OperationSet::Reproducible, &[]).unwrap_err();
    assert!(
        e.to_string()
            .contains("attribute \"fmod\" should be int, got string"),
        "{e}"
    );
}
