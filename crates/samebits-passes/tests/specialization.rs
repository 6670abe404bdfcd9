//! Shape specialisation: Shape / Size nodes become constants for one run's shapes, the shape
//! arithmetic after them folds, and each intermediate value whose shape was read becomes a
//! guard. The specialised plan gives the unspecialised plan's bits (the reference is the
//! unspecialised graph run by the same interpreter) and stops with a shape-guard error when a
//! guarded value's shape differs from the recorded one.

mod common;

use common::{node, op_types};
use samebits_ir::{Attribute, DType, Graph, Model, Tensor, Value, ValueInfo, ValueType};
use samebits_ops::{OperationSet, Plan, RunOptions};
use samebits_passes::specialization::{shape_probes, specialize};
use std::collections::HashMap;

/// `y = Reshape(r, Concat(Unsqueeze(Shape(r)[0]), [-1]))` with `r = Relu(x)`: exporters'
/// flatten-but-keep-the-batch, reading the shape of an intermediate value (a probe); plus
/// `z = Reshape(x, Shape(Relu(x)))` when `unchecked_probe` (there the probe has no other
/// reader, so a specialised graph would no longer compute it).
fn flattening_model(unchecked_probe: bool) -> Model {
    let mut g = Graph::default();
    g.inputs.push(ValueInfo {
        name: "x".into(),
        ty: Some(ValueType::tensor(DType::F32, None)),
    });
    g.outputs.push(ValueInfo {
        name: "y".into(),
        ty: None,
    });
    g.initializers.insert("zero".into(), Tensor::scalar(0i64));
    g.initializers.insert(
        "axes".into(),
        Tensor::from_vec(vec![1], vec![0i64]).unwrap(),
    );
    g.initializers.insert(
        "minus_one".into(),
        Tensor::from_vec(vec![1], vec![-1i64]).unwrap(),
    );
    g.nodes.push(node("Relu", &["x"], "r"));
    g.nodes.push(node("Shape", &["r"], "s"));
    g.nodes.push(node("Gather", &["s", "zero"], "d0"));
    g.nodes.push(node("Unsqueeze", &["d0", "axes"], "d0v"));
    let mut concat = node("Concat", &["d0v", "minus_one"], "target");
    concat.attributes.insert("axis".into(), Attribute::Int(0));
    g.nodes.push(concat);
    g.nodes.push(node("Reshape", &["r", "target"], "y"));
    if unchecked_probe {
        g.nodes.push(node("Neg", &["x"], "n"));
        g.nodes.push(node("Shape", &["n"], "ns"));
        g.nodes.push(node("Reshape", &["x", "ns"], "z"));
        g.outputs.push(ValueInfo {
            name: "z".into(),
            ty: None,
        });
    }
    Model {
        graph: g,
        opset_imports: [(String::new(), 17)].into_iter().collect(),
        ..Default::default()
    }
}

fn run(model: &Model, x: &Tensor) -> Result<Vec<Value>, samebits_ops::OpError> {
    let plan = Plan::build(
        &model.graph,
        &model.opset_imports,
        OperationSet::Reproducible,
        &[],
    )?;
    plan.run(vec![x.clone().into()], RunOptions::default())
}

fn x(shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    let values = (0..n).map(|i| i as f32 * 0.37 - 2.0).collect();
    Tensor::from_vec(shape.to_vec(), values).unwrap()
}

fn bits(values: &[Value]) -> Vec<(Vec<usize>, Vec<u32>)> {
    values
        .iter()
        .map(|v| {
            let t = v.as_tensor().unwrap();
            let data = t.as_slice::<f32>().unwrap().iter().map(|f| f.to_bits());
            (t.shape().to_vec(), data.collect())
        })
        .collect()
}

#[test]
fn shape_arithmetic_folds_and_the_specialised_plan_gives_the_same_bits() {
    let model = flattening_model(false);
    assert_eq!(shape_probes(&model), ["r"]);
    let shapes = HashMap::from([
        ("x".to_string(), vec![2, 3, 4]),
        ("r".to_string(), vec![2, 3, 4]),
    ]);
    let special = specialize(&model, OperationSet::Reproducible, &shapes)
        .unwrap()
        .expect("specialised");
    let ops = op_types(&special.model);
    assert_eq!(ops, ["Relu", "Reshape"]);
    assert_eq!((special.replaced, special.folded), (1, 3));
    assert_eq!(special.guards, [("r".to_string(), vec![2, 3, 4])]);
    let target = &special.model.graph.initializers["target"];
    assert_eq!(target.as_slice::<i64>().unwrap(), [2, -1]);

    let input = x(&[2, 3, 4]);
    let expected = run(&model, &input).unwrap();
    let got = run(&special.model, &input).unwrap();
    assert_eq!(bits(&got), bits(&expected));
    assert_eq!(bits(&got)[0].0, [2, 12]);
}

#[test]
fn a_guarded_value_of_another_shape_stops_the_run() {
    let model = flattening_model(false);
    let shapes = HashMap::from([("r".to_string(), vec![2, 3, 4])]);
    let special = specialize(&model, OperationSet::Reproducible, &shapes)
        .unwrap()
        .expect("specialised");
    let mut plan = Plan::build(
        &special.model.graph,
        &special.model.opset_imports,
        OperationSet::Reproducible,
        &[],
    )
    .unwrap();
    plan.guard_shapes(&special.guards).unwrap();
    let fits = plan.run(vec![x(&[2, 3, 4]).into()], RunOptions::default());
    assert_eq!(bits(&fits.unwrap())[0].0, [2, 12]);
    // Without the guard this input would be reshaped to [2, 15] by the recorded target.
    let err = plan
        .run(vec![x(&[2, 3, 5]).into()], RunOptions::default())
        .unwrap_err();
    assert!(err.is_shape_guard(), "{err}");
    assert!(err.to_string().contains("\"r\""), "{err}");
}

#[test]
fn nothing_to_replace_gives_no_specialisation() {
    let model = flattening_model(false);
    let shapes = HashMap::from([("x".to_string(), vec![2, 3, 4])]);
    let special = specialize(&model, OperationSet::Reproducible, &shapes).unwrap();
    assert!(special.is_none());
}

#[test]
fn a_probe_the_specialised_graph_would_no_longer_compute_keeps_its_shape_node() {
    let model = flattening_model(true);
    assert_eq!(shape_probes(&model), ["r", "n"]);
    let shapes = HashMap::from([
        ("r".to_string(), vec![2, 3, 4]),
        ("n".to_string(), vec![2, 3, 4]),
    ]);
    let special = specialize(&model, OperationSet::Reproducible, &shapes)
        .unwrap()
        .expect("specialised");
    let ops = op_types(&special.model);
    assert_eq!(ops, ["Relu", "Reshape", "Neg", "Shape", "Reshape"]);
    assert_eq!(special.guards, [("r".to_string(), vec![2, 3, 4])]);
    let input = x(&[2, 3, 4]);
    let expected = run(&model, &input).unwrap();
    assert_eq!(bits(&run(&special.model, &input).unwrap()), bits(&expected));
}

/// A plan of the specialised graph built from the compiled plan takes over the op of each node
/// built for the same inputs (Relu), and builds the others anew (Reshape, whose target is now
/// a constant).
#[test]
fn a_specialised_plan_shares_the_ops_of_nodes_built_for_the_same_inputs() {
    let model = flattening_model(false);
    let build = |m: &Model, donor: Option<&Plan>| {
        let set = OperationSet::Reproducible;
        Plan::build_sharing(&m.graph, &m.opset_imports, set, &[], donor).unwrap()
    };
    let compiled = build(&model, None);
    let shapes = HashMap::from([("r".to_string(), vec![2, 3, 4])]);
    let special = specialize(&model, OperationSet::Reproducible, &shapes)
        .unwrap()
        .expect("specialised");
    let plan = build(&special.model, Some(&compiled));
    let op_of = |plan: &Plan, op_type: &str| {
        let step = plan.steps().find(|s| s.op_type == op_type).unwrap();
        step.op as *const dyn samebits_ops::Op as *const ()
    };
    assert_eq!(op_of(&plan, "Relu"), op_of(&compiled, "Relu"));
    assert_ne!(op_of(&plan, "Reshape"), op_of(&compiled, "Reshape"));
    let input = x(&[2, 3, 4]);
    let got = plan.run(vec![input.clone().into()], RunOptions::default());
    assert_eq!(bits(&got.unwrap()), bits(&run(&model, &input).unwrap()));
}
