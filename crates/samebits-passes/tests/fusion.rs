//! Elementwise fusion: a BatchNormalization → affine → HardSwish → channel scale → Relu chain
//! becomes one `samebits::ElementwiseChain` node whose outputs have the same bits as the
//! unfused graph's (the reference is the unfused graph run by the same interpreter), on the
//! fast path and on the node-by-node fallback, for special values (NaN, ±0, ±inf, subnormals)
//! and ordinary ones. An intermediate read outside the chain ends the chain before it. NaN
//! results compare as NaN: their sign and payload are hardware-defined and not part of the
//! contract (docs/contract.md, "Arithmetic"; vector code may pick either operand's NaN).

mod common;

use common::node;
use samebits_ir::{Attribute, DType, Graph, Model, Shape, Tensor, Value, ValueInfo, ValueType};
use samebits_ops::{OperationSet, Plan, RunOptions};
use samebits_passes::Pipeline;

fn f32_input(name: &str, shape: Option<&[usize]>) -> ValueInfo {
    ValueInfo {
        name: name.into(),
        ty: Some(ValueType::tensor(DType::F32, shape.map(Shape::known))),
    }
}

const CHANNELS: usize = 4;
const X_SHAPE: [usize; 4] = [1, CHANNELS, 7, 9];

/// `y = relu(hardswish(a * bn(x) + b) * se)`, written as PP-OCR's exporter writes it, plus
/// `side = bn(x) + 1` when `side_output` (so `bn(x)` is read outside the chain).
fn model(side_output: bool) -> Model {
    let mut g = Graph::default();
    g.inputs.push(f32_input("x", Some(&X_SHAPE)));
    g.inputs.push(f32_input("se", None));
    g.outputs.push(ValueInfo {
        name: "y".into(),
        ty: None,
    });
    let per_channel = |v: [f32; CHANNELS]| Tensor::from_vec(vec![CHANNELS], v.to_vec()).unwrap();
    let scalar = |v: f32| Tensor::from_vec(vec![1], vec![v]).unwrap();
    let inits = [
        ("scale", per_channel([1.5, -0.75, 1e-3, 3.0])),
        ("bias", per_channel([0.1, -0.2, 0.0, 7.5])),
        ("mean", per_channel([0.3, -1.0, 0.0, 2.0])),
        ("var", per_channel([0.9, 2.5, 1e-6, 0.0])),
        ("a", scalar(1.1)),
        ("b", scalar(-0.3)),
        ("three", scalar(3.0)),
        ("zero", scalar(0.0)),
        ("six", scalar(6.0)),
        ("one", scalar(1.0)),
    ];
    for (name, t) in inits {
        g.initializers.insert(name.into(), t);
    }
    let mut bn = node(
        "BatchNormalization",
        &["x", "scale", "bias", "mean", "var"],
        "bn",
    );
    bn.attributes
        .insert("epsilon".into(), Attribute::Float(1e-5));
    g.nodes.push(bn);
    g.nodes.push(node("Mul", &["a", "bn"], "scaled"));
    g.nodes.push(node("Add", &["scaled", "b"], "affine"));
    g.nodes.push(node("Add", &["affine", "three"], "shifted"));
    g.nodes
        .push(node("Clip", &["shifted", "zero", "six"], "clipped"));
    g.nodes.push(node("Mul", &["affine", "clipped"], "gated"));
    g.nodes.push(node("Div", &["gated", "six"], "hswish"));
    g.nodes.push(node("Mul", &["hswish", "se"], "excited"));
    g.nodes.push(node("Relu", &["excited"], "y"));
    if side_output {
        g.nodes.push(node("Add", &["bn", "one"], "side"));
        g.outputs.push(ValueInfo {
            name: "side".into(),
            ty: None,
        });
    }
    Model {
        graph: g,
        ..Default::default()
    }
}

/// Special values first, then a spread of ordinary ones.
fn x_values() -> Vec<f32> {
    let special = [
        f32::NAN,
        -f32::NAN,
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE / 8.0,
        -f32::MIN_POSITIVE / 3.0,
        f32::MAX,
        -3.0,
        3.0,
        -2.9999998,
        6.0,
    ];
    let n: usize = X_SHAPE.iter().product();
    (0..n)
        .map(|i| {
            special
                .get(i)
                .copied()
                .unwrap_or(((i * 7919) % 2003) as f32 / 150.0 - 6.5)
        })
        .collect()
}

fn run(graph: &Graph, x: &Tensor, se: &Tensor) -> Vec<Vec<u32>> {
    let plan = Plan::build(graph, &Default::default(), OperationSet::Reproducible, &[]).unwrap();
    let outputs = plan
        .run(
            vec![Value::Tensor(x.clone()), Value::Tensor(se.clone())],
            RunOptions::default(),
        )
        .unwrap();
    outputs
        .into_iter()
        .map(|v| {
            let t = v.into_tensor().unwrap();
            t.as_slice::<f32>()
                .unwrap()
                .iter()
                .map(|f| if f.is_nan() { f32::NAN } else { *f }.to_bits())
                .collect()
        })
        .collect()
}

/// `model` after the pass pipeline (fusion included).
fn compiled(model: &Model) -> Model {
    let mut m = model.clone();
    Pipeline {
        operation_set: OperationSet::Reproducible,
        dump_dir: None,
    }
    .run(&mut m)
    .unwrap();
    m
}

fn fused(side_output: bool) -> Model {
    compiled(&model(side_output))
}

fn chain_lengths(graph: &Graph) -> Vec<usize> {
    graph
        .nodes
        .iter()
        .filter(|n| n.op_type == "ElementwiseChain")
        .map(|n| match &n.attributes["body"] {
            Attribute::Graph(body) => body.nodes.len(),
            other => panic!("body is {}", other.kind()),
        })
        .collect()
}

#[test]
fn a_fused_chain_gives_the_bits_of_the_unfused_nodes() {
    let fused = fused(false);
    assert_eq!(fused.graph.nodes.len(), 1, "one node left");
    assert_eq!(chain_lengths(&fused.graph), [9]);
    let x = Tensor::from_vec(X_SHAPE.to_vec(), x_values()).unwrap();
    let se_channel =
        Tensor::from_vec(vec![1, CHANNELS, 1, 1], vec![0.5, -2.0, f32::NAN, 1e30]).unwrap();
    // A `[1, 1, 7, 9]` scale is neither per channel nor full size: the fallback path.
    let se_plane = Tensor::from_vec(
        vec![1, 1, 7, 9],
        (0..63).map(|i| i as f32 / 10.0 - 3.0).collect(),
    )
    .unwrap();
    for se in [&se_channel, &se_plane] {
        let reference = run(&model(false).graph, &x, se);
        assert_eq!(run(&fused.graph, &x, se), reference, "se {:?}", se.shape());
    }
}

#[test]
fn an_intermediate_read_elsewhere_ends_the_chain() {
    let fused = fused(true);
    // `bn` is read by `side`, so BatchNormalization stays alone and the rest fuses.
    assert_eq!(chain_lengths(&fused.graph), [8]);
    assert!(
        fused
            .graph
            .nodes
            .iter()
            .any(|n| n.op_type == "BatchNormalization")
    );
    let x = Tensor::from_vec(X_SHAPE.to_vec(), x_values()).unwrap();
    let se = Tensor::from_vec(vec![1, CHANNELS, 1, 1], vec![0.5f32, -2.0, 3.0, 1.0]).unwrap();
    assert_eq!(run(&fused.graph, &x, &se), run(&model(true).graph, &x, &se));
}

/// A `[C]` operand broadcasts along the last axis, not the channel axis: with as many channels
/// as columns the fused chain must still add `b[w]`, not `b[c]` (a 1-D operand is one value
/// per channel only for BatchNormalization's parameters).
#[test]
fn a_one_dimensional_operand_broadcasts_along_the_last_axis() {
    let shape = [1usize, 4, 5, 4];
    let mut g = Graph::default();
    g.inputs.push(f32_input("x", Some(&shape)));
    g.inputs.push(f32_input("b", Some(&[4])));
    g.outputs.push(ValueInfo {
        name: "y".into(),
        ty: None,
    });
    g.nodes.push(node("Add", &["x", "b"], "sum"));
    g.nodes.push(node("Relu", &["sum"], "y"));
    let model = Model {
        graph: g,
        ..Default::default()
    };
    let fused = compiled(&model);
    assert_eq!(chain_lengths(&fused.graph), [2]);
    let x = Tensor::from_vec(shape.to_vec(), (0..80).map(|i| i as f32 - 40.0).collect()).unwrap();
    let b = Tensor::from_vec(vec![4], vec![100.0f32, -100.0, 0.5, -0.25]).unwrap();
    assert_eq!(run(&fused.graph, &x, &b), run(&model.graph, &x, &b));
}

/// Branches an exporter interleaves (YOLOv8's `Conv, Conv, Sigmoid, Mul, Sigmoid, Mul`) still
/// fuse: each chain takes the nodes that read its values, skipping the other branch's, and the
/// fused node sits where its last node was. The outputs keep the unfused graph's bits.
#[test]
fn interleaved_branches_fuse_each_into_its_own_chain() {
    let shape = [1usize, CHANNELS, 7, 9];
    let mut g = Graph::default();
    g.inputs.push(f32_input("x", Some(&shape)));
    g.inputs.push(f32_input("se", Some(&shape)));
    for y in ["y1", "y2"] {
        g.outputs.push(ValueInfo {
            name: y.into(),
            ty: None,
        });
    }
    g.nodes.push(node("Relu", &["x"], "a"));
    g.nodes.push(node("Add", &["x", "se"], "b"));
    g.nodes.push(node("Sigmoid", &["a"], "sa"));
    g.nodes.push(node("Sigmoid", &["b"], "sb"));
    g.nodes.push(node("Mul", &["a", "sa"], "y1"));
    g.nodes.push(node("Mul", &["b", "sb"], "y2"));
    let model = Model {
        graph: g,
        ..Default::default()
    };
    let fused = compiled(&model);
    assert_eq!(chain_lengths(&fused.graph), [3, 3]);
    assert_eq!(fused.graph.nodes.len(), 2, "two fused nodes left");
    let x = Tensor::from_vec(shape.to_vec(), x_values()).unwrap();
    let se = Tensor::from_vec(
        shape.to_vec(),
        (0..252).map(|i| i as f32 / 40.0 - 3.0).collect(),
    )
    .unwrap();
    assert_eq!(run(&fused.graph, &x, &se), run(&model.graph, &x, &se));
}

/// A transformer's decomposed layer norm tail, `(x - mean) / std * gamma + beta`, with the mean
/// and std one value per row of the last axis (`[B, T, 1]`) and gamma, beta one per feature
/// (`[D]`): the fused chain takes these layouts on its fast path and keeps the unfused bits,
/// special values included.
#[test]
fn per_row_and_per_feature_operands_keep_the_unfused_bits() {
    // Rows longer than a block of lanes, so that a block starts inside a row.
    let (b, t, d) = (2usize, 3, 300);
    let mut g = Graph::default();
    g.inputs.push(f32_input("x", Some(&[b, t, d])));
    g.inputs.push(f32_input("mean", Some(&[b, t, 1])));
    g.outputs.push(ValueInfo {
        name: "y".into(),
        ty: None,
    });
    let std: Vec<f32> = (0..b * t).map(|i| 0.25 + i as f32 * 0.375).collect();
    g.initializers
        .insert("std".into(), Tensor::from_vec(vec![b, t, 1], std).unwrap());
    let feature = |special: &[f32], k: f32| -> Vec<f32> {
        let ordinary = (special.len()..d).map(|i| (i as f32 * k).sin() * 3.0);
        special.iter().copied().chain(ordinary).collect()
    };
    let gamma = feature(&[1.5, -0.75, 1e-3, 3.0, f32::NAN, 0.0, -2.0], 0.7);
    let beta = feature(&[0.1, -0.2, 0.0, 7.5, 1.0, f32::INFINITY, -0.0], 1.3);
    g.initializers
        .insert("gamma".into(), Tensor::from_vec(vec![d], gamma).unwrap());
    g.initializers
        .insert("beta".into(), Tensor::from_vec(vec![d], beta).unwrap());
    g.nodes.push(node("Sub", &["x", "mean"], "centred"));
    g.nodes.push(node("Div", &["centred", "std"], "normed"));
    g.nodes.push(node("Mul", &["normed", "gamma"], "scaled"));
    g.nodes.push(node("Add", &["scaled", "beta"], "y"));
    let model = Model {
        graph: g,
        ..Default::default()
    };
    let fused = compiled(&model);
    assert_eq!(chain_lengths(&fused.graph), [4]);
    let values: Vec<f32> = x_values().into_iter().cycle().take(b * t * d).collect();
    let x = Tensor::from_vec(vec![b, t, d], values).unwrap();
    let mean = Tensor::from_vec(
        vec![b, t, 1],
        (0..b * t).map(|i| i as f32 * 0.5 - 2.0).collect(),
    )
    .unwrap();
    assert_eq!(run(&fused.graph, &x, &mean), run(&model.graph, &x, &mean));
}
