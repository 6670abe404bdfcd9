//! Decoder fusion: every rule's golden test. A graph with the rule's pattern (in each operand
//! order), run by the CPU interpreter before and after the pass on random inputs of several
//! shapes (SmolLM2-135M's among them: 576 wide, a 1536-wide feed-forward block), gives the same
//! bits; the pass leaves a pattern alone where an intermediate is read elsewhere, where the
//! residual term is a constant (a bias, which broadcasts) or where known shapes differ.

mod common;

use common::node_in;
use samebits_ir::{
    Attribute, DType, Graph, Node, OpsetImports, Shape, Tensor, Value, ValueInfo, ValueType,
};
use samebits_ops::{OperationSet, Plan, RunOptions};
use samebits_passes::decoder_fusion::{self, RULES};

fn f32_input(name: &str, shape: Option<&[usize]>) -> ValueInfo {
    ValueInfo {
        name: name.into(),
        ty: Some(ValueType::tensor(DType::F32, shape.map(Shape::known))),
    }
}

fn output(name: &str) -> ValueInfo {
    ValueInfo {
        name: name.into(),
        ty: None,
    }
}

fn opsets() -> OpsetImports {
    [("".to_string(), 23), ("samebits".to_string(), 1)].into()
}

/// A xorshift stream of floats in about [-4, 4], with a few special values mixed in.
fn random_f32(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            match i % 97 {
                13 => -0.0,
                29 => 1e-40,
                41 => 88.0,
                53 => -104.0,
                _ => ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 8.0,
            }
        })
        .collect()
}

/// Q8_0 blocks of a `[rows, cols]` matrix: per 32 values an f16 scale (positive normals around
/// 0.01) and 32 signed codes.
fn q8_0_blocks(seed: u64, rows: usize, cols: usize) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0xD134_2543_DE82_EF95) | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut bytes = Vec::with_capacity(rows * cols / 32 * 34);
    for _ in 0..rows * cols / 32 {
        let scale: u16 = 0x2000 + (next() % 0x0800) as u16;
        bytes.extend_from_slice(&scale.to_le_bytes());
        bytes.extend((0..32).map(|_| next() as u8));
    }
    bytes
}

fn matmul_gguf(x: &str, w: &str, out: &str, rows: usize, cols: usize) -> Node {
    let mut n = node_in("samebits", "MatMulGguf", &[x, w], out);
    for (k, v) in [("ggml_type", 8), ("rows", rows), ("cols", cols)] {
        n.attributes.insert(k.into(), Attribute::Int(v as i64));
    }
    n
}

fn run(graph: &Graph, inputs: &[Tensor]) -> Vec<Vec<u32>> {
    let plan = Plan::build(graph, &opsets(), OperationSet::Reproducible, &[]).unwrap();
    let values = inputs.iter().cloned().map(Value::Tensor).collect();
    plan.run(values, RunOptions::default())
        .unwrap()
        .into_iter()
        .map(|v| {
            let t = v.into_tensor().unwrap();
            t.as_slice::<f32>()
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect()
        })
        .collect()
}

/// Runs `graph` before and after the pass on `inputs`: the same bits; returns the fused graph's
/// op types.
fn fused_equals_unfused(graph: &Graph, inputs: &[Tensor]) -> Vec<String> {
    let mut fused = graph.clone();
    decoder_fusion::run(&mut fused, RULES);
    assert_eq!(run(&fused, inputs), run(graph, inputs), "fused != unfused");
    fused.nodes.iter().map(|n| n.op_type.clone()).collect()
}

/// `Mul(Mul(g, Sigmoid(g)), u)` with operands in the given orders.
fn silu_graph(shape: &[usize], swap_first: bool, swap_second: bool) -> Graph {
    let mut g = Graph::default();
    g.inputs.push(f32_input("g", Some(shape)));
    g.inputs.push(f32_input("u", Some(shape)));
    g.outputs.push(output("h"));
    g.nodes.push(node_in("", "Sigmoid", &["g"], "s"));
    let first: &[&str] = if swap_first { &["s", "g"] } else { &["g", "s"] };
    g.nodes.push(node_in("", "Mul", first, "t"));
    let second: &[&str] = if swap_second {
        &["u", "t"]
    } else {
        &["t", "u"]
    };
    g.nodes.push(node_in("", "Mul", second, "h"));
    g
}

#[test]
fn silu_gate_equals_sigmoid_mul_mul() {
    for (n, shape) in [
        vec![1, 1, 1536],
        vec![1, 7, 1536],
        vec![1, 3, 2560],
        vec![5],
    ]
    .into_iter()
    .enumerate()
    {
        let len = shape.iter().product();
        let inputs = [
            Tensor::from_vec(shape.clone(), random_f32(n as u64 * 2 + 1, len)).unwrap(),
            Tensor::from_vec(shape.clone(), random_f32(n as u64 * 2 + 2, len)).unwrap(),
        ];
        for (a, b) in [(false, false), (true, false), (false, true), (true, true)] {
            let ops = fused_equals_unfused(&silu_graph(&shape, a, b), &inputs);
            assert_eq!(ops, ["SiluGate"], "{shape:?}, orders {a} {b}");
        }
    }
}

#[test]
fn silu_gate_needs_private_intermediates_and_one_shape() {
    let mut read_elsewhere = silu_graph(&[1, 4], false, false);
    read_elsewhere.outputs.push(output("t"));
    let inputs = [
        Tensor::from_vec(vec![1, 4], random_f32(3, 4)).unwrap(),
        Tensor::from_vec(vec![1, 4], random_f32(4, 4)).unwrap(),
    ];
    assert_eq!(
        fused_equals_unfused(&read_elsewhere, &inputs),
        ["Sigmoid", "Mul", "Mul"]
    );
    let mut broadcast = silu_graph(&[1, 4], false, false);
    broadcast.inputs[1] = f32_input("u", Some(&[4]));
    let inputs = [
        Tensor::from_vec(vec![1, 4], random_f32(5, 4)).unwrap(),
        Tensor::from_vec(vec![4], random_f32(6, 4)).unwrap(),
    ];
    assert_eq!(
        fused_equals_unfused(&broadcast, &inputs),
        ["Sigmoid", "Mul", "Mul"]
    );
}

/// `Add(MatMulGguf(x, w), r)` (or `Add(r, ..)`), `w` a `[rows, cols]` Q8_0 initializer.
fn product_add_graph(rows: usize, cols: usize, residual_first: bool) -> Graph {
    let mut g = Graph::default();
    g.inputs.push(f32_input("x", None));
    g.inputs.push(f32_input("r", None));
    g.outputs.push(output("y"));
    let w = q8_0_blocks(rows as u64 * 31 + cols as u64, rows, cols);
    g.initializers
        .insert("w".into(), Tensor::from_vec(vec![w.len()], w).unwrap());
    g.nodes.push(matmul_gguf("x", "w", "p", rows, cols));
    let operands: &[&str] = if residual_first {
        &["r", "p"]
    } else {
        &["p", "r"]
    };
    g.nodes.push(node_in("", "Add", operands, "y"));
    g
}

#[test]
fn product_add_equals_matmul_gguf_then_add() {
    // SmolLM2-135M's attention output (576 x 576) and down product (576 x 1536), one token
    // (decode) and several (prefill); a small odd one.
    for (rows, cols) in [(576, 576), (576, 1536), (96, 64)] {
        for tokens in [1, 6] {
            let inputs = [
                Tensor::from_vec(vec![1, tokens, cols], random_f32(7, tokens * cols)).unwrap(),
                Tensor::from_vec(vec![1, tokens, rows], random_f32(8, tokens * rows)).unwrap(),
            ];
            for residual_first in [false, true] {
                let graph = product_add_graph(rows, cols, residual_first);
                let ops = fused_equals_unfused(&graph, &inputs);
                assert_eq!(ops, ["MatMulGgufAdd"], "{rows} x {cols}, {tokens} tokens");
            }
        }
    }
}

#[test]
fn product_add_leaves_a_bias_alone() {
    let mut graph = product_add_graph(64, 64, false);
    graph.inputs.pop();
    graph.initializers.insert(
        "r".into(),
        Tensor::from_vec(vec![64], random_f32(9, 64)).unwrap(),
    );
    let inputs = [Tensor::from_vec(vec![1, 2, 64], random_f32(10, 128)).unwrap()];
    assert_eq!(fused_equals_unfused(&graph, &inputs), ["MatMulGguf", "Add"]);
}

/// A llama feed-forward block as samebits-llm builds it: gate and up products of one input,
/// the SiLU gate, the down product and the residual Add. Both rules apply, and the block's
/// output keeps its bits.
#[test]
fn feed_forward_block_fuses_with_both_rules() {
    let (dim, ffn) = (576, 1536);
    let mut g = Graph::default();
    g.inputs.push(f32_input("h", None));
    g.inputs.push(f32_input("x", None));
    g.outputs.push(output("y"));
    for (name, rows, cols) in [
        ("gate_w", ffn, dim),
        ("up_w", ffn, dim),
        ("down_w", dim, ffn),
    ] {
        let w = q8_0_blocks(name.len() as u64, rows, cols);
        g.initializers
            .insert(name.into(), Tensor::from_vec(vec![w.len()], w).unwrap());
    }
    g.nodes.push(matmul_gguf("h", "gate_w", "gate", ffn, dim));
    g.nodes.push(matmul_gguf("h", "up_w", "up", ffn, dim));
    g.nodes.push(node_in("", "Sigmoid", &["gate"], "sig"));
    g.nodes.push(node_in("", "Mul", &["gate", "sig"], "silu"));
    g.nodes.push(node_in("", "Mul", &["silu", "up"], "hidden"));
    g.nodes
        .push(matmul_gguf("hidden", "down_w", "down", dim, ffn));
    g.nodes.push(node_in("", "Add", &["x", "down"], "y"));
    for tokens in [1, 4] {
        let inputs = [
            Tensor::from_vec(vec![1, tokens, dim], random_f32(11, tokens * dim)).unwrap(),
            Tensor::from_vec(vec![1, tokens, dim], random_f32(12, tokens * dim)).unwrap(),
        ];
        assert_eq!(
            fused_equals_unfused(&g, &inputs),
            ["MatMulGguf", "MatMulGguf", "SiluGate", "MatMulGgufAdd"]
        );
    }
}

/// An initializer of Q8_0 blocks for a `[rows, cols]` matrix.
fn q8_0_initializer(g: &mut Graph, name: &str, rows: usize, cols: usize) {
    let w = q8_0_blocks(name.len() as u64 * 7 + rows as u64, rows, cols);
    g.initializers
        .insert(name.into(), Tensor::from_vec(vec![w.len()], w).unwrap());
}

fn with_attributes(mut n: Node, attributes: &[(&str, Attribute)]) -> Node {
    for (k, v) in attributes {
        n.attributes.insert(k.to_string(), v.clone());
    }
    n
}

/// `RMSNormalization(x, scale)` over the last axis.
fn rms_norm(x: &str, scale: &str, out: &str) -> Node {
    with_attributes(
        node_in("", "RMSNormalization", &[x, scale], out),
        &[
            ("axis", Attribute::Int(-1)),
            ("epsilon", Attribute::Float(1e-5)),
        ],
    )
}

fn rotary(x: &str, heads: i64, out: &str) -> Node {
    with_attributes(
        node_in("", "RotaryEmbedding", &[x, "cos", "sin"], out),
        &[
            ("interleaved", Attribute::Int(1)),
            ("num_heads", Attribute::Int(heads)),
            ("rotary_embedding_dim", Attribute::Int(32)),
        ],
    )
}

/// The device kernel of each step of `graph`'s plan after the pass.
fn fused_kernels(graph: &Graph) -> Vec<Option<samebits_ops::DeviceKernel>> {
    let mut fused = graph.clone();
    decoder_fusion::run(&mut fused, RULES);
    let plan = Plan::build(&fused, &opsets(), OperationSet::Reproducible, &[]).unwrap();
    plan.steps().map(|s| s.op.device_kernel()).collect()
}

const DIM: usize = 64;

/// The attention half of a llama layer's projections as samebits-llm builds it: RMSNorm,
/// Q (two heads of 32), K and V (one head) products, rotaries of Q and K over 32 features;
/// outputs the rotated Q and K and V.
fn qkv_graph() -> Graph {
    let mut g = Graph::default();
    for name in ["x", "cos", "sin"] {
        g.inputs.push(f32_input(name, None));
    }
    for name in ["q_rot", "k_rot", "v"] {
        g.outputs.push(output(name));
    }
    g.initializers.insert(
        "scale".into(),
        Tensor::from_vec(vec![DIM], random_f32(21, DIM)).unwrap(),
    );
    for (name, rows) in [("wq", 64), ("wk", 32), ("wv", 32)] {
        q8_0_initializer(&mut g, name, rows, DIM);
    }
    g.nodes = vec![
        rms_norm("x", "scale", "n"),
        matmul_gguf("n", "wq", "q", 64, DIM),
        matmul_gguf("n", "wk", "k", 32, DIM),
        matmul_gguf("n", "wv", "v", 32, DIM),
        rotary("q", 2, "q_rot"),
        rotary("k", 1, "k_rot"),
    ];
    g
}

fn qkv_inputs(tokens: usize, seed: u64) -> Vec<Tensor> {
    vec![
        Tensor::from_vec(vec![1, tokens, DIM], random_f32(seed, tokens * DIM)).unwrap(),
        Tensor::from_vec(vec![1, tokens, 16], random_f32(seed + 1, tokens * 16)).unwrap(),
        Tensor::from_vec(vec![1, tokens, 16], random_f32(seed + 2, tokens * 16)).unwrap(),
    ]
}

#[test]
fn norm_qkv_rotary_equals_its_nodes() {
    let graph = qkv_graph();
    for tokens in [1, 5] {
        let ops = fused_equals_unfused(&graph, &qkv_inputs(tokens, 30 + tokens as u64));
        assert_eq!(ops, ["GgufProducts"], "{tokens} tokens");
    }
    let kernels = fused_kernels(&graph);
    let [Some(samebits_ops::DeviceKernel::GgufProducts(k))] = kernels[..] else {
        panic!("{kernels:?}");
    };
    assert_eq!(
        (k.count, k.rows, k.cols, k.gate, k.rotary),
        (
            3,
            [64, 32, 32],
            DIM,
            false,
            [Some((2, 32)), Some((1, 32)), None]
        )
    );
}

/// Norm then gate and up products and the SiLU gate: `silu_gate` runs first, then
/// `norm_gate_up` takes the norm, the products and the SiluGate.
#[test]
fn norm_gate_up_equals_its_nodes() {
    let mut g = Graph::default();
    g.inputs.push(f32_input("x", None));
    g.outputs.push(output("h"));
    g.initializers.insert(
        "scale".into(),
        Tensor::from_vec(vec![DIM], random_f32(22, DIM)).unwrap(),
    );
    q8_0_initializer(&mut g, "wg", 96, DIM);
    q8_0_initializer(&mut g, "wu", 96, DIM);
    g.nodes = vec![
        rms_norm("x", "scale", "n"),
        matmul_gguf("n", "wg", "gate", 96, DIM),
        matmul_gguf("n", "wu", "up", 96, DIM),
        node_in("", "Sigmoid", &["gate"], "sig"),
        node_in("", "Mul", &["sig", "gate"], "silu"),
        node_in("", "Mul", &["up", "silu"], "h"),
    ];
    for tokens in [1, 4] {
        let x = Tensor::from_vec(vec![1, tokens, DIM], random_f32(40, tokens * DIM)).unwrap();
        assert_eq!(fused_equals_unfused(&g, &[x]), ["GgufProducts"]);
    }
    let kernels = fused_kernels(&g);
    let [Some(samebits_ops::DeviceKernel::GgufProducts(k))] = kernels[..] else {
        panic!("{kernels:?}");
    };
    assert_eq!((k.count, k.rows, k.gate), (2, [96, 96, 0], true));
}

/// Norm with three, two and one products of its output (Qwen's biased Q, K, V; Gemma's GELU
/// feed-forward; the logits): one `GgufProducts` each, one output per product.
#[test]
fn norm_products_equal_their_nodes() {
    for count in 1..=3 {
        let mut g = Graph::default();
        g.inputs.push(f32_input("x", None));
        g.initializers.insert(
            "scale".into(),
            Tensor::from_vec(vec![DIM], random_f32(23, DIM)).unwrap(),
        );
        g.nodes.push(rms_norm("x", "scale", "n"));
        for j in 0..count {
            let (w, y) = (format!("w{j}"), format!("y{j}"));
            q8_0_initializer(&mut g, &w, 40 + j, DIM);
            g.nodes.push(matmul_gguf("n", &w, &y, 40 + j, DIM));
            g.outputs.push(output(&y));
        }
        let x = Tensor::from_vec(vec![1, 3, DIM], random_f32(41, 3 * DIM)).unwrap();
        assert_eq!(fused_equals_unfused(&g, &[x]), ["GgufProducts"], "{count}");
        let kernels = fused_kernels(&g);
        let [Some(samebits_ops::DeviceKernel::GgufProducts(k))] = kernels[..] else {
            panic!("{kernels:?}");
        };
        assert_eq!((k.count, k.gate, k.rotary), (count, false, [None; 3]));
    }
}

/// A fused node's given output read by a node placed between the pattern's nodes leaves that
/// pattern alone (the rewritten node sits where the pattern's last node was), so a smaller
/// rule takes the norm and products; an intermediate read elsewhere leaves all alone.
#[test]
fn norm_products_need_a_consistent_order_and_private_intermediates() {
    let mut early_reader = qkv_graph();
    early_reader
        .nodes
        .insert(4, node_in("", "Neg", &["v"], "v_neg"));
    early_reader.outputs.push(output("v_neg"));
    let inputs = qkv_inputs(2, 50);
    assert_eq!(
        fused_equals_unfused(&early_reader, &inputs),
        ["GgufProducts", "Neg", "RotaryEmbedding", "RotaryEmbedding"]
    );

    let mut shared_norm = qkv_graph();
    shared_norm.outputs.push(output("n"));
    assert_eq!(
        fused_equals_unfused(&shared_norm, &inputs),
        [
            "RMSNormalization",
            "MatMulGguf",
            "MatMulGguf",
            "MatMulGguf",
            "RotaryEmbedding",
            "RotaryEmbedding"
        ]
    );
}

/// Attention (two query heads of 32, one KV head, a past) and the product of its output with
/// the residual Add: one `AttentionProduct` with the presents as outputs 1 and 2.
#[test]
fn attention_product_equals_its_nodes() {
    let mut g = Graph::default();
    for name in ["q", "k", "v", "past_key", "past_value", "r"] {
        g.inputs.push(f32_input(name, None));
    }
    for name in ["out", "present_key", "present_value"] {
        g.outputs.push(output(name));
    }
    q8_0_initializer(&mut g, "wo", DIM, DIM);
    let mut attention = with_attributes(
        node_in(
            "",
            "Attention",
            &["q", "k", "v", "", "past_key", "past_value"],
            "y",
        ),
        &[
            ("is_causal", Attribute::Int(1)),
            ("q_num_heads", Attribute::Int(2)),
            ("kv_num_heads", Attribute::Int(1)),
        ],
    );
    attention.outputs = vec!["y".into(), "present_key".into(), "present_value".into()];
    g.nodes = vec![
        attention,
        matmul_gguf("y", "wo", "o", DIM, DIM),
        node_in("", "Add", &["r", "o"], "out"),
    ];
    for (tokens, past) in [(1, 0), (1, 7), (4, 3)] {
        let t = |shape: Vec<usize>, seed: u64| {
            let n = shape.iter().product();
            Tensor::from_vec(shape, random_f32(seed, n)).unwrap()
        };
        let inputs = [
            t(vec![1, tokens, 64], 60),
            t(vec![1, tokens, 32], 61),
            t(vec![1, tokens, 32], 62),
            t(vec![1, 1, past, 32], 63),
            t(vec![1, 1, past, 32], 64),
            t(vec![1, tokens, DIM], 65),
        ];
        let ops = fused_equals_unfused(&g, &inputs);
        assert_eq!(ops, ["AttentionProduct"], "{tokens} tokens after {past}");
    }
    let kernels = fused_kernels(&g);
    assert!(
        matches!(
            kernels[..],
            [Some(samebits_ops::DeviceKernel::AttentionProduct {
                is_causal: true,
                q_num_heads: 2,
                kv_num_heads: 1,
                rows: DIM,
                cols: DIM,
                ..
            })]
        ),
        "{kernels:?}"
    );
}
