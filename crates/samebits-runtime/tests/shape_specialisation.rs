//! Runs through plans specialised to input shapes (`specialised.rs`): the first run with new
//! input shapes makes the specialisation, later runs use it and give the compiled plan's bits,
//! and a value whose shape depends on data (NonZero's) makes a later run with the same input
//! shapes fail its guard and rerun with the compiled plan, so the answer stays right.

use samebits_ir::{DType, Graph, Model, Node, Tensor, Value, ValueInfo, ValueType};
use samebits_runtime::{CompileOptions, CompiledModel, compile};
use std::collections::BTreeMap;

fn node(op: &str, inputs: &[&str], output: &str) -> Node {
    Node {
        name: output.into(),
        op_type: op.into(),
        domain: String::new(),
        inputs: inputs.iter().map(|s| s.to_string()).collect(),
        outputs: vec![output.into()],
        attributes: Default::default(),
    }
}

fn output(name: &str) -> ValueInfo {
    ValueInfo {
        name: name.into(),
        ty: None,
    }
}

/// `flat = Reshape(x, [Shape(x)[0], -1])` (shape arithmetic on an input's shape) and
/// `ones = Expand(1, Shape(NonZero(x)))`, `nz = NonZero(x)`: the second reads the shape of a
/// value that depends on x's data.
fn model() -> Model {
    let mut g = Graph::default();
    g.inputs.push(ValueInfo {
        name: "x".into(),
        ty: Some(ValueType::tensor(DType::F32, None)),
    });
    for name in ["flat", "ones", "nz"] {
        g.outputs.push(output(name));
    }
    let i64s = |v: Vec<i64>| Tensor::from_vec(vec![v.len()], v).unwrap();
    g.initializers.insert("first".into(), i64s(vec![0]));
    g.initializers.insert("minus_one".into(), i64s(vec![-1]));
    g.initializers
        .insert("one".into(), Tensor::from_vec(vec![1], vec![1f32]).unwrap());
    g.nodes.push(node("Shape", &["x"], "xs"));
    g.nodes.push(node("Gather", &["xs", "first"], "batch"));
    let mut concat = node("Concat", &["batch", "minus_one"], "target");
    concat
        .attributes
        .insert("axis".into(), samebits_ir::Attribute::Int(0));
    g.nodes.push(concat);
    g.nodes.push(node("Reshape", &["x", "target"], "flat"));
    g.nodes.push(node("NonZero", &["x"], "nz"));
    g.nodes.push(node("Shape", &["nz"], "nzs"));
    g.nodes.push(node("Expand", &["one", "nzs"], "ones"));
    Model {
        graph: g,
        opset_imports: [(String::new(), 17)].into_iter().collect(),
        ..Default::default()
    }
}

fn run(compiled: &CompiledModel, x: &[f32]) -> BTreeMap<String, (Vec<usize>, Vec<u8>)> {
    let x = Tensor::from_vec(vec![2, x.len() / 2], x.to_vec()).unwrap();
    let inputs = BTreeMap::from([("x".to_string(), Value::Tensor(x))]);
    compiled
        .run(&inputs)
        .unwrap()
        .into_iter()
        .map(|(name, v)| {
            let t = v.into_tensor().unwrap();
            (name, (t.shape().to_vec(), t.bytes().unwrap().to_vec()))
        })
        .collect()
}

#[test]
fn specialised_runs_match_the_compiled_plan_and_data_dependent_shapes_fall_back() {
    let compiled = compile(model(), &CompileOptions::default()).unwrap();
    let inputs = |x: &[f32]| {
        let t = Tensor::from_vec(vec![2, x.len() / 2], x.to_vec()).unwrap();
        BTreeMap::from([("x".to_string(), Value::Tensor(t))])
    };
    let two_nonzero = [0.0, 1.5, 0.0, 0.0, -2.0, 0.0];
    let three_nonzero = [0.0, 1.5, 3.0, 0.0, -2.0, 0.0];
    assert_eq!(
        compiled.step_counts(&inputs(&two_nonzero)).unwrap(),
        (7, None)
    );

    // The first run records the shapes and makes the specialisation: Shape(x), Gather and
    // Concat fold; NonZero's shape is guarded, so its Shape, and the Expand of constants
    // after it, fold too.
    let first = run(&compiled, &two_nonzero);
    let (steps, special) = compiled.step_counts(&inputs(&two_nonzero)).unwrap();
    assert_eq!((steps, special), (7, Some(2)), "Reshape and NonZero remain");
    assert_eq!(first["flat"].0, [2, 3]);
    assert_eq!(first["ones"].0, [2, 2]);
    assert_eq!(run(&compiled, &two_nonzero), first);

    // Same input shape, another count of non-zeros: the guard on NonZero's output fails and
    // the compiled plan answers; that shape is not specialised any more.
    let other = run(&compiled, &three_nonzero);
    assert_eq!(other["ones"].0, [2, 3]);
    assert_eq!(other["nz"].0, [2, 3]);
    assert_eq!(
        compiled.step_counts(&inputs(&two_nonzero)).unwrap(),
        (7, None)
    );
    assert_eq!(run(&compiled, &three_nonzero), other);
    assert_eq!(run(&compiled, &two_nonzero), first);

    // Another input shape makes its own specialisation.
    let wider = [1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 4.0];
    let out = run(&compiled, &wider);
    assert_eq!(out["flat"].0, [2, 4]);
    assert_eq!(compiled.step_counts(&inputs(&wider)).unwrap(), (7, Some(2)));
    assert_eq!(run(&compiled, &wider), out);
}
