//! The pass pipeline on a small graph: folding evaluates the constant branch, dead nodes go,
//! inference fills types, and each pass leaves a JSON and a DOT dump.

mod common;

use common::node;
use samebits_ir::{DType, Graph, Model, Shape, Tensor, ValueInfo, ValueType};
use samebits_ops::OperationSet;
use samebits_passes::Pipeline;

fn model() -> Model {
    let mut g = Graph::default();
    g.inputs.push(ValueInfo {
        name: "x".into(),
        ty: Some(ValueType::tensor(DType::F32, Some(Shape::known(&[2])))),
    });
    g.outputs.push(ValueInfo {
        name: "y".into(),
        ty: None,
    });
    let c = |v: Vec<f32>| Tensor::from_vec(vec![2], v).unwrap();
    g.initializers.insert("a".into(), c(vec![1., 2.]));
    g.initializers.insert("b".into(), c(vec![3., 4.]));
    g.initializers.insert("unused".into(), c(vec![0., 0.]));
    g.nodes.push(node("Add", &["x", "ab"], "y"));
    g.nodes.push(node("Mul", &["a", "b"], "ab"));
    g.nodes.push(node("Neg", &["x"], "dead"));
    Model {
        graph: g,
        ..Default::default()
    }
}

#[test]
fn folds_constants_removes_dead_nodes_and_dumps_each_pass() {
    let dir = std::env::temp_dir().join(format!("samebits-passes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut m = model();
    let reports = Pipeline {
        operation_set: OperationSet::Reproducible,
        dump_dir: Some(dir.clone()),
    }
    .run(&mut m)
    .unwrap();
    let g = &m.graph;
    assert_eq!(g.nodes.len(), 1);
    assert_eq!(g.nodes[0].op_type, "Add");
    assert_eq!(g.initializers["ab"].as_slice::<f32>().unwrap(), &[3., 8.]);
    assert!(!g.initializers.contains_key("unused") && !g.initializers.contains_key("a"));
    assert_eq!(
        g.value_type("y"),
        Some(ValueType::tensor(DType::F32, Some(Shape::known(&[2]))))
    );
    let names: Vec<_> = reports.iter().map(|r| r.pass).collect();
    assert_eq!(
        names,
        [
            "topological-order",
            "differentiation",
            "shape-inference",
            "constant-folding",
            "cast-hoisting",
            "dead-node-removal",
            "elementwise-fusion"
        ]
    );
    for f in [
        "00-imported.json",
        "04-constant-folding.dot",
        "06-dead-node-removal.json",
    ] {
        assert!(dir.join(f).exists(), "{f} missing");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
