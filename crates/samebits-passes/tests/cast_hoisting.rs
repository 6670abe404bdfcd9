//! Cast hoisting: `Cast(to float)` of a movement moves before it, through chains of
//! movements, only where the movement's output has no other reader; the hoisted graph gives
//! the original graph's bits (the reference: the unhoisted graph run by the same
//! interpreter, compared with integer masks holding values that round in float32).

mod common;

use common::{node, op_types};
use samebits_ir::{Attribute, DType, Graph, Model, Tensor, Value, ValueInfo, ValueType};
use samebits_ops::{OperationSet, Plan, RunOptions};
use samebits_passes::{cast_hoisting, inference};

/// An exporter's pooling mask: `y = Cast(Expand(Unsqueeze(m, [-1]), [1, T, 4]))` of an int64
/// `m [1, T]`; with `shared`, the Expand's output is also a graph output `e`.
fn mask_model(shared: bool, to: i64) -> Model {
    let mut g = Graph::default();
    g.inputs.push(ValueInfo {
        name: "m".into(),
        ty: Some(ValueType::tensor(DType::I64, None)),
    });
    for out in ["y"].into_iter().chain(shared.then_some("e")) {
        g.outputs.push(ValueInfo {
            name: out.into(),
            ty: None,
        });
    }
    g.initializers.insert(
        "axes".into(),
        Tensor::from_vec(vec![1], vec![-1i64]).unwrap(),
    );
    g.initializers.insert(
        "shape".into(),
        Tensor::from_vec(vec![3], vec![1i64, 1, 4]).unwrap(),
    );
    g.nodes.push(node("Unsqueeze", &["m", "axes"], "u"));
    g.nodes.push(node("Expand", &["u", "shape"], "e"));
    let mut cast = node("Cast", &["e"], "y");
    cast.attributes.insert("to".into(), Attribute::Int(to));
    g.nodes.push(cast);
    Model {
        graph: g,
        opset_imports: [(String::new(), 17)].into_iter().collect(),
        ..Default::default()
    }
}

fn run(model: &Model, m: &Tensor) -> Vec<Value> {
    let plan = Plan::build(
        &model.graph,
        &model.opset_imports,
        OperationSet::Reproducible,
        &[],
    )
    .unwrap();
    plan.run(vec![m.clone().into()], RunOptions::default())
        .unwrap()
}

/// int64 values some of which float32 rounds (above 2^24, odd), and negatives.
fn mask() -> Tensor {
    Tensor::from_vec(
        vec![1, 5],
        vec![1i64, 0, (1 << 24) + 1, -((1 << 40) + 3), 7],
    )
    .unwrap()
}

#[test]
fn float_casts_move_before_movements_with_the_same_bits() {
    let original = mask_model(false, 1);
    let mut hoisted = original.clone();
    inference::run(&mut hoisted, OperationSet::Reproducible).unwrap();
    assert_eq!(cast_hoisting::run(&mut hoisted.graph), 2);
    assert_eq!(op_types(&hoisted), ["Cast", "Unsqueeze", "Expand"]);
    // The cast reads the mask itself and the last movement writes the graph output.
    assert_eq!(hoisted.graph.nodes[0].inputs, ["m"]);
    assert_eq!(hoisted.graph.nodes[2].outputs, ["y"]);
    let (want, got) = (run(&original, &mask()), run(&hoisted, &mask()));
    let (w, g) = (want[0].as_tensor().unwrap(), got[0].as_tensor().unwrap());
    assert_eq!(g.shape(), [1, 5, 4]);
    assert_eq!(g.shape(), w.shape());
    let bits = |t: &Tensor| -> Vec<u32> {
        t.as_slice::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    };
    assert_eq!(bits(g), bits(w));
    assert_eq!(g.as_slice::<f32>().unwrap()[8], 16777216.0);
}

#[test]
fn casts_stay_where_a_movement_has_other_readers_or_the_target_is_not_float() {
    let mut shared = mask_model(true, 1);
    assert_eq!(cast_hoisting::run(&mut shared.graph), 0);
    assert_eq!(op_types(&shared), ["Unsqueeze", "Expand", "Cast"]);
    // A cast to int32 stays too.
    let mut to_int = mask_model(false, 6);
    assert_eq!(cast_hoisting::run(&mut to_int.graph), 0);
}
