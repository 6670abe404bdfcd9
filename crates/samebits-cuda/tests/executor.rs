//! The CUDA executor against the CPU interpreter: a plan mixing device kernels and CPU
//! fallbacks gives the CPU's bits, and the GGUF products give `samebits_kernels::dot_q_f32`'s bits
//! for every block type the device dequantizes. The oracle is the CPU (samebits-ops and
//! samebits-kernels); on a machine without a GPU these tests skip loudly.

use std::io::Write;
use std::sync::Arc;

use samebits_cuda::testing::Rng;
use samebits_cuda::{CudaBackend, CudaExecutor, GgufMatrix, GgufProducts};
use samebits_ggml::GgmlType;
use samebits_ir::{Attribute, DType, Graph, Node, Shape, Tensor, Value, ValueInfo, ValueType};
use samebits_kernels::dot_q_f32;
use samebits_ops::{OperationSet, Plan, RunOptions};
use samebits_passes::decoder_fusion;

/// The plan of `graph` after samebits-passes' decoder fusion (what samebits-llm compiles).
fn fused_plan(mut graph: Graph) -> Arc<Plan> {
    decoder_fusion::run(&mut graph, decoder_fusion::RULES);
    let opsets = [("".to_string(), 23), ("samebits".to_string(), 1)].into();
    Arc::new(Plan::build(&graph, &opsets, OperationSet::Reproducible, &[]).unwrap())
}

fn cuda(test: &str) -> Option<Arc<CudaBackend>> {
    match CudaBackend::new(0) {
        Ok(b) => Some(Arc::new(b)),
        Err(why) => {
            let _ = std::io::stderr().write_all(format!("SKIPPED: {test} ({why})\n").as_bytes());
            None
        }
    }
}

/// `rows` rows of `cols` weights of `ggml_type` with random scales and codes (the scales are
/// f16 in [0.01, 0.05), Q4_1's minimum in [-0.5, 0.5)).
fn random_blocks(ggml_type: GgmlType, rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let f16 = |v: f32| half::f16::from_f32(v).to_le_bytes();
    let mut bytes = Vec::new();
    let blocks = rows * cols / ggml_type.block_elems();
    for _ in 0..blocks {
        let d = 0.01 + 0.04 * rng.unit().abs();
        match ggml_type {
            GgmlType::F32 => bytes.extend((rng.unit() - 0.5).to_le_bytes()),
            GgmlType::F16 => bytes.extend(f16(rng.unit() - 0.5)),
            GgmlType::Q4_0 => {
                bytes.extend(f16(d));
                bytes.extend((0..16).map(|_| rng.next_u64() as u8));
            }
            GgmlType::Q4_1 => {
                bytes.extend(f16(d));
                bytes.extend(f16(rng.unit() - 0.5));
                bytes.extend((0..16).map(|_| rng.next_u64() as u8));
            }
            GgmlType::Q8_0 => {
                bytes.extend(f16(d));
                bytes.extend((0..32).map(|_| rng.next_u64() as u8));
            }
            other => panic!("no generator for {other}"),
        }
    }
    assert_eq!(bytes.len(), rows * ggml_type.row_bytes(cols).unwrap());
    bytes
}

#[test]
fn gguf_matmul_matches_dot_q_f32() {
    let Some(backend) = cuda("executor::gguf_matmul_matches_dot_q_f32") else {
        return;
    };
    let mut rng = Rng::new(5);
    for ggml_type in [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q8_0,
    ] {
        // K from one block to several 32-tile chunks (2,112 = 33 tiles), N not a multiple of 8.
        for (rows, cols, m) in [
            (5, 32, 1),
            (77, 576, 1),
            (130, 1536, 3),
            (9, 2112, 2),
            (67, 192, 21),
        ] {
            let blocks = random_blocks(ggml_type, rows, cols, &mut rng);
            let x = rng.values(m * cols, 2.0);
            let w = backend.upload_bytes(&blocks).unwrap();
            let dx = backend.upload(&x).unwrap();
            let y = backend
                .download(
                    &backend
                        .gguf_matmul(ggml_type, rows, cols, &w, &dx, None)
                        .unwrap(),
                )
                .unwrap();
            // The prefill path: a GEMM over the dequantized weights gives the same bits.
            let wt = backend
                .gguf_dequantize_t(ggml_type, rows, cols, &w)
                .unwrap();
            let y_gemm = backend
                .download(
                    &backend
                        .gguf_matmul_dequantized(rows, cols, &wt, &dx, None)
                        .unwrap(),
                )
                .unwrap();
            samebits_cuda::testing::assert_same_bits(
                &y_gemm,
                &y,
                &format!("{ggml_type} GEMM path"),
            );
            let row_bytes = ggml_type.row_bytes(cols).unwrap();
            for i in 0..m {
                for n in 0..rows {
                    let want = dot_q_f32(
                        ggml_type,
                        &blocks[n * row_bytes..(n + 1) * row_bytes],
                        &x[i * cols..(i + 1) * cols],
                    )
                    .unwrap();
                    assert_eq!(
                        y[i * rows + n].to_bits(),
                        want.to_bits(),
                        "{ggml_type} [{rows}, {cols}] row {i} output {n}"
                    );
                }
            }
        }
    }
}

/// The exact-integer products (contract: int8-products; `kernels/gguf_int8.cu`) give
/// samebits-kernels' `int8_dot` bits for every type of `INT8_TYPES`, from one activation row to
/// many, over one tile of blocks and several (2,112 and 4,096 columns), on random rows and on
/// adversarial ones: all-zero and subnormal blocks, values near f32's largest, blocks whose
/// codes land on rounding ties, and a row holding a NaN (NaN in every output of that row).
#[test]
fn gguf_int8_products_match_int8_dot() {
    let Some(backend) = cuda("executor::gguf_int8_products_match_int8_dot") else {
        return;
    };
    let mut rng = Rng::new(23);
    for ggml_type in samebits_kernels::INT8_TYPES {
        for (rows, cols, m) in [
            (5, 32, 1),
            (77, 576, 1),
            (130, 1536, 3),
            (9, 2112, 2),
            (6, 4096, 1),
            (67, 192, 21),
        ] {
            let blocks = random_blocks(ggml_type, rows, cols, &mut rng);
            let mut x = rng.values(m * cols, 2.0);
            if m > 1 {
                // Row 1: a zero block, a subnormal block, a block near f32's largest, and a
                // block of codes on rint's ties; the last row a NaN.
                let row = &mut x[cols..2 * cols];
                for (b, block) in row.chunks_mut(32).enumerate() {
                    for (k, v) in block.iter_mut().enumerate() {
                        *v = match b % 4 {
                            0 => 0.0,
                            1 => f32::from_bits(1 + 37 * k as u32),
                            2 => 3.0e38 * (k as f32 - 15.5) / 16.0,
                            // d_x = 127 / 127 = 1, so x / d_x = k - 15.5: every code a tie.
                            _ if k == 31 => 127.0,
                            _ => k as f32 - 15.5,
                        };
                    }
                }
                x[(m - 1) * cols + cols / 2] = f32::NAN;
            }
            let w = backend.upload_bytes(&blocks).unwrap();
            let dx = backend.upload(&x).unwrap();
            let matrix = GgufMatrix {
                w: &w,
                rows,
                add: None,
                rotary: None,
            };
            let products = GgufProducts {
                ggml_type,
                cols,
                x: &dx,
                norm: None,
                matrices: &[matrix],
                gate: false,
                int8: true,
            };
            let y = backend
                .download(&backend.gguf_products(&products).unwrap()[0])
                .unwrap();
            let xq = samebits_kernels::Int8Activations::quantize(&x, cols).unwrap();
            let row_bytes = ggml_type.row_bytes(cols).unwrap();
            for i in 0..m {
                for n in 0..rows {
                    let row = &blocks[n * row_bytes..(n + 1) * row_bytes];
                    let want = samebits_kernels::int8_dot(ggml_type, row, &xq, i).unwrap();
                    let got = y[i * rows + n];
                    assert!(
                        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                        "{ggml_type} [{rows}, {cols}] row {i} output {n}: device {got:e} \
                         ({:#010x}), int8_dot {want:e} ({:#010x})",
                        got.to_bits(),
                        want.to_bits()
                    );
                }
            }
        }
    }
}

/// A residual block with the nodes decoder fusion rewrites (MatMulGguf then Add into
/// MatMulGgufAdd; Sigmoid, Mul, Mul into SiluGate) gives the CPU's bits, for decode-sized
/// (matrix-vector) and prefill-sized (GEMM over dequantized weights) activations.
#[test]
fn fused_steps_match_the_cpu() {
    let Some(backend) = cuda("executor::fused_steps_match_the_cpu") else {
        return;
    };
    let mut rng = Rng::new(17);
    let mut graph = Graph {
        name: "block".into(),
        ..Graph::default()
    };
    graph.inputs.push(ValueInfo {
        name: "x".into(),
        ty: Some(ValueType::tensor(DType::F32, None)),
    });
    graph.outputs.push(ValueInfo {
        name: "y".into(),
        ty: None,
    });
    let gguf = gguf_node;
    for (name, rows, cols, ty) in [
        ("wo", 64, 64, GgmlType::Q4_1),
        ("wg", 96, 64, GgmlType::Q8_0),
        ("wu", 96, 64, GgmlType::Q4_0),
        ("wd", 64, 96, GgmlType::Q4_1),
    ] {
        let blocks = random_blocks(ty, rows, cols, &mut rng);
        graph.initializers.insert(
            name.into(),
            Tensor::from_vec(vec![blocks.len()], blocks).unwrap(),
        );
    }
    graph.nodes = vec![
        gguf("wo", "x", "o", 64, 64, GgmlType::Q4_1),
        node("Add", &["x", "o"], "r", &[]),
        gguf("wg", "r", "g", 96, 64, GgmlType::Q8_0),
        gguf("wu", "r", "u", 96, 64, GgmlType::Q4_0),
        node("Sigmoid", &["g"], "s", &[]),
        node("Mul", &["g", "s"], "t", &[]),
        node("Mul", &["t", "u"], "h", &[]),
        gguf("wd", "h", "d", 64, 96, GgmlType::Q4_1),
        node("Add", &["d", "r"], "y", &[]),
    ];
    let plan = fused_plan(graph);
    let executor = CudaExecutor::new(backend, Arc::clone(&plan));
    for m in [1, 3, 20] {
        let x: Value = Tensor::from_vec(vec![1, m, 64], rng.values(m * 64, 2.0))
            .unwrap()
            .into();
        let want = plan.run(vec![x.clone()], RunOptions::default()).unwrap();
        let (got, stats) = executor.run_with(vec![x], RunOptions::default()).unwrap();
        assert_eq!(
            (stats.device_steps, stats.device_launches),
            (5, 5),
            "{stats:?}"
        );
        let (g, w) = (got[0].as_tensor().unwrap(), want[0].as_tensor().unwrap());
        samebits_cuda::testing::assert_same_bits(
            g.as_slice::<f32>().unwrap(),
            w.as_slice::<f32>().unwrap(),
            &format!("{m} rows"),
        );
    }
}

/// A MatMulGguf node of `w` ([rows, cols] of `ty`) on `x`.
fn gguf_node(w: &str, x: &str, out: &str, rows: usize, cols: usize, ty: GgmlType) -> Node {
    let int = Attribute::Int;
    Node {
        domain: "samebits".into(),
        attributes: [
            ("ggml_type", int(i64::from(ty.id()))),
            ("rows", int(rows as i64)),
            ("cols", int(cols as i64)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        ..node("MatMulGguf", &[x, w], out, &[])
    }
}

/// The fused products of a llama layer (three `GgufProducts` nodes after decoder fusion,
/// executor/fused.rs), for every weight type the device takes, give the CPU's bits: RMSNorm
/// then Q, K, V products then interleaved rotaries of Q and K (partial rotary width, rows over
/// two and a half 64-term tiles); RMSNorm then gate and up products then the SiLU gate;
/// RMSNorm then one wide product. Decode-sized activations run them as three launches; 20 rows
/// (the GEMM path) run their bodies step by step on the device (12 steps, 12 launches).
#[test]
fn fused_products_match_the_cpu() {
    let Some(backend) = cuda("executor::fused_products_match_the_cpu") else {
        return;
    };
    let mut rng = Rng::new(19);
    let (cols, head, rot, width) = (160, 32, 16, 11);
    for ty in [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q8_0,
    ] {
        let mut graph = Graph {
            name: "layer".into(),
            ..Graph::default()
        };
        for name in ["x", "cos", "sin"] {
            graph.inputs.push(ValueInfo {
                name: name.into(),
                ty: Some(ValueType::tensor(DType::F32, None)),
            });
        }
        for name in ["q_rot", "k_rot", "v", "h", "logits"] {
            graph.outputs.push(ValueInfo {
                name: name.into(),
                ty: None,
            });
        }
        let mats = [
            ("wq", 5 * head),
            ("wk", 2 * head),
            ("wv", 2 * head),
            ("wg", 96),
            ("wu", 96),
            ("wl", 202),
        ];
        for (name, rows) in mats {
            let blocks = random_blocks(ty, rows, cols, &mut rng);
            graph.initializers.insert(
                name.into(),
                Tensor::from_vec(vec![blocks.len()], blocks).unwrap(),
            );
        }
        for name in ["s1", "s2", "s3"] {
            graph.initializers.insert(
                name.into(),
                Tensor::from_vec(vec![cols], rng.values(cols, 2.0)).unwrap(),
            );
        }
        let eps = [
            ("axis", Attribute::Int(-1)),
            ("epsilon", Attribute::Float(1e-5)),
        ];
        let rotary = |heads: i64| {
            [
                ("interleaved", Attribute::Int(1)),
                ("num_heads", Attribute::Int(heads)),
                ("rotary_embedding_dim", Attribute::Int(rot as i64)),
            ]
        };
        graph.nodes = vec![
            node("RMSNormalization", &["x", "s1"], "n1", &eps),
            gguf_node("wq", "n1", "q", 5 * head, cols, ty),
            gguf_node("wk", "n1", "k", 2 * head, cols, ty),
            gguf_node("wv", "n1", "v", 2 * head, cols, ty),
            node("RotaryEmbedding", &["q", "cos", "sin"], "q_rot", &rotary(5)),
            node("RotaryEmbedding", &["k", "cos", "sin"], "k_rot", &rotary(2)),
            node("RMSNormalization", &["x", "s2"], "n2", &eps),
            gguf_node("wg", "n2", "g", 96, cols, ty),
            gguf_node("wu", "n2", "u", 96, cols, ty),
            node("Sigmoid", &["g"], "gs", &[]),
            node("Mul", &["g", "gs"], "t", &[]),
            node("Mul", &["u", "t"], "h", &[]),
            node("RMSNormalization", &["x", "s3"], "n3", &eps),
            gguf_node("wl", "n3", "logits", 202, cols, ty),
        ];
        let plan = fused_plan(graph);
        let executor = CudaExecutor::new(Arc::clone(&backend), Arc::clone(&plan));
        for (m, steps) in [(1, 3), (3, 3), (20, 12)] {
            let mut x = |shape: Vec<usize>, scale: f32| -> Value {
                let n = shape.iter().product();
                Tensor::from_vec(shape, rng.values(n, scale))
                    .unwrap()
                    .into()
            };
            let inputs = vec![
                x(vec![1, m, cols], 2.0),
                x(vec![1, m, width], 1.0),
                x(vec![1, m, width], 1.0),
            ];
            let want = plan.run(inputs.clone(), RunOptions::default()).unwrap();
            let (got, stats) = executor.run_with(inputs, RunOptions::default()).unwrap();
            assert_eq!(
                (stats.device_steps, stats.device_launches),
                (steps, steps),
                "{ty}, {m} rows: {stats:?}"
            );
            assert!(stats.host_steps.is_empty(), "{ty}, {m} rows: {stats:?}");
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let (g, w) = (g.as_tensor().unwrap(), w.as_tensor().unwrap());
                assert_eq!(g.shape(), w.shape());
                samebits_cuda::testing::assert_same_bits(
                    g.as_slice::<f32>().unwrap(),
                    w.as_slice::<f32>().unwrap(),
                    &format!("{ty}, {m} rows, output {i}"),
                );
            }
        }
    }
}

/// Attention of few queries, the GGUF product of its output and a residual Add (one
/// AttentionProduct after decoder fusion) run as one attention launch (executor/fused.rs) and
/// give the CPU's bits, for every weight type, one and three queries, pasts from none to one
/// that splits the keys over blocks; 20 queries run the body (attention, then the product with
/// its Add) as two launches.
#[test]
fn fused_attention_product_matches_the_cpu() {
    let Some(backend) = cuda("executor::fused_attention_product_matches_the_cpu") else {
        return;
    };
    let mut rng = Rng::new(23);
    let (heads, kv_heads, d, rows) = (4, 2, 64, 90);
    let cols = heads * d;
    for ty in [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q8_0,
    ] {
        let mut graph = Graph {
            name: "attention_product".into(),
            ..Graph::default()
        };
        for name in ["q", "k", "v", "past_key", "past_value", "x"] {
            graph.inputs.push(ValueInfo {
                name: name.into(),
                ty: Some(ValueType::tensor(DType::F32, None)),
            });
        }
        for name in ["out", "present_key", "present_value"] {
            graph.outputs.push(ValueInfo {
                name: name.into(),
                ty: None,
            });
        }
        let blocks = random_blocks(ty, rows, cols, &mut rng);
        graph.initializers.insert(
            "wo".into(),
            Tensor::from_vec(vec![blocks.len()], blocks).unwrap(),
        );
        graph.nodes = vec![
            Node {
                outputs: vec!["y".into(), "present_key".into(), "present_value".into()],
                ..node(
                    "Attention",
                    &["q", "k", "v", "", "past_key", "past_value"],
                    "y",
                    &[
                        ("is_causal", Attribute::Int(1)),
                        ("q_num_heads", Attribute::Int(heads as i64)),
                        ("kv_num_heads", Attribute::Int(kv_heads as i64)),
                    ],
                )
            },
            gguf_node("wo", "y", "o", rows, cols, ty),
            node("Add", &["x", "o"], "out", &[]),
        ];
        let plan = fused_plan(graph);
        let executor = CudaExecutor::new(Arc::clone(&backend), Arc::clone(&plan));
        for (s, past, launches) in [(1, 0, 1), (3, 70, 1), (1, 300, 1), (20, 5, 2)] {
            let mut x = |shape: Vec<usize>, scale: f32| -> Value {
                let n = shape.iter().product();
                Tensor::from_vec(shape, rng.values(n, scale))
                    .unwrap()
                    .into()
            };
            let inputs = vec![
                x(vec![1, s, cols], 2.0),
                x(vec![1, s, kv_heads * d], 2.0),
                x(vec![1, s, kv_heads * d], 1.0),
                x(vec![1, kv_heads, past, d], 2.0),
                x(vec![1, kv_heads, past, d], 1.0),
                x(vec![1, s, rows], 1.0),
            ];
            let want = plan.run(inputs.clone(), RunOptions::default()).unwrap();
            let (got, stats) = executor.run_with(inputs, RunOptions::default()).unwrap();
            assert_eq!(
                (stats.device_steps, stats.device_launches),
                (launches, launches),
                "{ty}, {s} queries after {past}: {stats:?}"
            );
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let (g, w) = (g.as_tensor().unwrap(), w.as_tensor().unwrap());
                assert_eq!(g.shape(), w.shape());
                samebits_cuda::testing::assert_same_bits(
                    g.as_slice::<f32>().unwrap(),
                    w.as_slice::<f32>().unwrap(),
                    &format!("{ty}, {s} queries after {past}, output {i}"),
                );
            }
        }
    }
}

/// RaggedAttention (several sequences' rows, each over its own past; executor/ragged.rs) runs
/// on the device and gives the CPU op's bits: sequences of 1, 3 and 70 rows over pasts of 300,
/// none and 5 positions in one launch; with a past of 12,100 positions (score rows beyond a
/// block's shared memory) the step runs on the CPU; the present caches come back as
/// sequences; a past that is a tensor, not a sequence, falls back to the CPU, which names the
/// input.
#[test]
fn ragged_attention_matches_the_cpu() {
    let Some(backend) = cuda("executor::ragged_attention_matches_the_cpu") else {
        return;
    };
    let mut rng = Rng::new(29);
    let (heads, kv_heads, d) = (4, 2, 64);
    let mut graph = Graph {
        name: "ragged".into(),
        ..Graph::default()
    };
    for (name, dtype) in [
        ("q", DType::F32),
        ("k", DType::F32),
        ("v", DType::F32),
        ("rows", DType::I64),
    ] {
        graph.inputs.push(ValueInfo {
            name: name.into(),
            ty: Some(ValueType::tensor(dtype, None)),
        });
    }
    for name in ["past_key", "past_value"] {
        graph.inputs.push(ValueInfo {
            name: name.into(),
            ty: Some(ValueType::Sequence(Box::new(ValueType::tensor(
                DType::F32,
                None,
            )))),
        });
    }
    for name in ["y", "present_key", "present_value"] {
        graph.outputs.push(ValueInfo {
            name: name.into(),
            ty: None,
        });
    }
    graph.nodes = vec![Node {
        domain: "samebits".into(),
        outputs: vec!["y".into(), "present_key".into(), "present_value".into()],
        ..node(
            "RaggedAttention",
            &["q", "k", "v", "rows", "past_key", "past_value"],
            "y",
            &[
                ("is_causal", Attribute::Int(1)),
                ("q_num_heads", Attribute::Int(heads as i64)),
                ("kv_num_heads", Attribute::Int(kv_heads as i64)),
            ],
        )
    }];
    let plan = fused_plan(graph);
    let executor = CudaExecutor::new(Arc::clone(&backend), Arc::clone(&plan));
    let rows = [1usize, 3, 70];
    let total: usize = rows.iter().sum();
    let mut x = |shape: Vec<usize>, scale: f32| {
        let n = shape.iter().product();
        Tensor::from_vec(shape, rng.values(n, scale)).unwrap()
    };
    // One launch for all three; then a past too long for one block's score rows: the CPU op.
    let mut inputs = Vec::new();
    for (pasts, on_device) in [([300usize, 0, 5], true), ([12_100, 0, 5], false)] {
        let past_keys: Vec<Tensor> = pasts
            .iter()
            .map(|&p| x(vec![1, kv_heads, p, d], 2.0))
            .collect();
        let past_values: Vec<Tensor> = pasts
            .iter()
            .map(|&p| x(vec![1, kv_heads, p, d], 1.0))
            .collect();
        inputs = vec![
            x(vec![1, total, heads * d], 2.0).into(),
            x(vec![1, total, kv_heads * d], 2.0).into(),
            x(vec![1, total, kv_heads * d], 1.0).into(),
            Tensor::from_vec(vec![rows.len()], rows.map(|r| r as i64).to_vec())
                .unwrap()
                .into(),
            Value::Sequence(past_keys),
            Value::Sequence(past_values),
        ];
        let want = plan.run(inputs.clone(), RunOptions::default()).unwrap();
        let (got, stats) = executor
            .run_with(inputs.clone(), RunOptions::default())
            .unwrap();
        assert_eq!(
            stats.host_steps.is_empty(),
            on_device,
            "{pasts:?}: {stats:?}"
        );
        assert_eq!(
            stats.device_launches,
            usize::from(on_device),
            "{pasts:?}: {stats:?}"
        );
        let flat = |v: &Value| -> Vec<Tensor> {
            match v {
                Value::Sequence(ts) => ts.clone(),
                v => vec![v.as_tensor().unwrap().clone()],
            }
        };
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let (g, w) = (flat(g), flat(w));
            assert_eq!(g.len(), w.len(), "output {i}");
            for (j, (g, w)) in g.iter().zip(&w).enumerate() {
                assert_eq!(g.shape(), w.shape(), "{pasts:?}: output {i} item {j}");
                samebits_cuda::testing::assert_same_bits(
                    g.as_slice::<f32>().unwrap(),
                    w.as_slice::<f32>().unwrap(),
                    &format!("{pasts:?}: output {i} item {j}"),
                );
            }
        }
    }
    // A past that is not a sequence: the CPU op runs it and names the input.
    let mut wrong = inputs;
    wrong[4] = x(vec![1, kv_heads, 2, d], 1.0).into();
    let err = executor
        .run_with(wrong, RunOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("input 4"), "{err}");
}

/// GatherGguf on the device picks and dequantizes the CPU's rows (negative indices count from
/// the end), for every weight type; an index out of range falls back to the CPU, which names
/// it.
#[test]
fn gather_gguf_matches_the_cpu() {
    let Some(backend) = cuda("executor::gather_gguf_matches_the_cpu") else {
        return;
    };
    let mut rng = Rng::new(13);
    for ggml_type in [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q8_0,
    ] {
        let (rows, cols) = (37, 96);
        let blocks = random_blocks(ggml_type, rows, cols, &mut rng);
        let mut graph = Graph {
            name: "gather".into(),
            ..Graph::default()
        };
        graph.inputs.push(ValueInfo {
            name: "ids".into(),
            ty: Some(ValueType::tensor(DType::I64, None)),
        });
        graph.outputs.push(ValueInfo {
            name: "y".into(),
            ty: None,
        });
        graph.initializers.insert(
            "w".into(),
            Tensor::from_vec(vec![blocks.len()], blocks).unwrap(),
        );
        let int = Attribute::Int;
        graph.nodes.push(Node {
            domain: "samebits".into(),
            attributes: [
                ("ggml_type", int(i64::from(ggml_type.id()))),
                ("rows", int(rows as i64)),
                ("cols", int(cols as i64)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            ..node("GatherGguf", &["w", "ids"], "y", &[])
        });
        let opsets = [("".to_string(), 23), ("samebits".to_string(), 1)].into();
        let plan = Arc::new(Plan::build(&graph, &opsets, OperationSet::Reproducible, &[]).unwrap());
        let executor = CudaExecutor::new(Arc::clone(&backend), Arc::clone(&plan));
        let ids: Value = Tensor::from_vec(vec![2, 3], vec![0i64, 36, -1, 5, -37, 17])
            .unwrap()
            .into();
        let want = plan.run(vec![ids.clone()], RunOptions::default()).unwrap();
        let (got, stats) = executor.run_with(vec![ids], RunOptions::default()).unwrap();
        assert_eq!(stats.device_steps, 1, "{ggml_type}: {stats:?}");
        let (g, w) = (got[0].as_tensor().unwrap(), want[0].as_tensor().unwrap());
        assert_eq!(g.shape(), &[2, 3, cols]);
        for (i, (a, b)) in g
            .as_slice::<f32>()
            .unwrap()
            .iter()
            .zip(w.as_slice::<f32>().unwrap())
            .enumerate()
        {
            assert_eq!(a.to_bits(), b.to_bits(), "{ggml_type} element {i}");
        }
        let bad: Value = Tensor::from_vec(vec![1], vec![37i64]).unwrap().into();
        let err = executor.run(vec![bad]).unwrap_err().to_string();
        assert!(err.contains("outside"), "{err}");
    }
}

fn node(op_type: &str, inputs: &[&str], output: &str, attrs: &[(&str, Attribute)]) -> Node {
    Node {
        name: output.into(),
        op_type: op_type.into(),
        domain: String::new(),
        inputs: inputs.iter().map(|s| s.to_string()).collect(),
        outputs: vec![output.into()],
        attributes: attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    }
}

/// x [4, 64] -> MatMul W [64, 96] -> Add b -> Tile (CPU) -> Tile again (CPU) -> Relu
/// -> RMSNormalization -> MatMulGguf (Q8_0 [40, 96]) -> Sigmoid * itself -> Softmax ->
/// LayerNormalization -> Gemm (transB, alpha, beta, C row) -> y.
fn mixed_plan(rng: &mut Rng) -> Plan {
    let tensor = |shape: Vec<usize>, v: Vec<f32>| Tensor::from_vec(shape, v).unwrap();
    let mut graph = Graph {
        name: "mixed".into(),
        ..Graph::default()
    };
    graph.inputs.push(ValueInfo {
        name: "x".into(),
        ty: Some(ValueType::tensor(DType::F32, Some(Shape::known(&[4, 64])))),
    });
    graph.outputs.push(ValueInfo {
        name: "y".into(),
        ty: None,
    });
    let q8 = random_blocks(GgmlType::Q8_0, 40, 96, rng);
    let inits = [
        ("w", tensor(vec![64, 96], rng.values(64 * 96, 1.0))),
        ("b", tensor(vec![96], rng.values(96, 1.0))),
        ("rms_scale", tensor(vec![96], rng.values(96, 1.0))),
        ("ln_scale", tensor(vec![40], rng.values(40, 1.0))),
        ("ln_bias", tensor(vec![40], rng.values(40, 1.0))),
        ("g", tensor(vec![24, 40], rng.values(24 * 40, 1.0))),
        ("c", tensor(vec![24], rng.values(24, 1.0))),
    ];
    for (name, t) in inits {
        graph.initializers.insert(name.into(), t);
    }
    graph
        .initializers
        .insert("q".into(), Tensor::from_vec(vec![q8.len()], q8).unwrap());
    graph.initializers.insert(
        "repeats".into(),
        Tensor::from_vec(vec![2], vec![1i64, 1]).unwrap(),
    );
    let int = Attribute::Int;
    graph.nodes = vec![
        node("MatMul", &["x", "w"], "xw", &[]),
        node("Add", &["xw", "b"], "xwb", &[]),
        // No device kernel: the CPU op on a downloaded value.
        node("Tile", &["xwb", "repeats"], "t", &[]),
        node("Tile", &["t", "repeats"], "tt", &[]),
        node("Relu", &["tt"], "r", &[]),
        node(
            "RMSNormalization",
            &["r", "rms_scale"],
            "n",
            &[("epsilon", Attribute::Float(1e-6))],
        ),
        Node {
            domain: "samebits".into(),
            attributes: [
                ("ggml_type", int(i64::from(GgmlType::Q8_0.id()))),
                ("rows", int(40)),
                ("cols", int(96)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            ..node("MatMulGguf", &["n", "q"], "gq", &[])
        },
        node("Sigmoid", &["gq"], "s", &[]),
        node("Mul", &["gq", "s"], "silu", &[]),
        // View ops on a device value: the same buffer under a new shape, no transfer.
        node("Flatten", &["silu"], "flat", &[("axis", int(1))]),
        node("Identity", &["flat"], "same", &[]),
        node("Softmax", &["same"], "p", &[("axis", int(-1))]),
        node(
            "LayerNormalization",
            &["p", "ln_scale", "ln_bias"],
            "ln",
            &[("epsilon", Attribute::Float(1e-5))],
        ),
        node(
            "Gemm",
            &["ln", "g", "c"],
            "y",
            &[
                ("transB", int(1)),
                ("alpha", Attribute::Float(0.5)),
                ("beta", Attribute::Float(2.0)),
            ],
        ),
    ];
    let opsets = [("".to_string(), 23), ("samebits".to_string(), 1)].into();
    Plan::build(&graph, &opsets, OperationSet::Reproducible, &[]).unwrap()
}

#[test]
fn executor_matches_the_cpu_interpreter() {
    let Some(backend) = cuda("executor::executor_matches_the_cpu_interpreter") else {
        return;
    };
    let mut rng = Rng::new(11);
    let plan = Arc::new(mixed_plan(&mut rng));
    let x: Value = Tensor::from_vec(vec![4, 64], rng.values(4 * 64, 3.0))
        .unwrap()
        .into();
    let want = plan.run(vec![x.clone()], RunOptions::default()).unwrap();
    let executor = CudaExecutor::new(backend, Arc::clone(&plan));
    for run in 0..2 {
        let (got, stats) = executor
            .run_with(vec![x.clone()], RunOptions::default())
            .unwrap();
        let (g, w) = (got[0].as_tensor().unwrap(), want[0].as_tensor().unwrap());
        assert_eq!(g.shape(), w.shape());
        let (g, w) = (g.as_slice::<f32>().unwrap(), w.as_slice::<f32>().unwrap());
        for (i, (a, b)) in g.iter().zip(w).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "run {run}, element {i}");
        }
        assert_eq!(stats.device_steps, 12, "{stats:?}");
        assert_eq!(stats.host_steps.get("Tile"), Some(&2), "{stats:?}");
        // x up; xwb down for Tile; tt up; y down. Constants go up once per executor.
        assert_eq!(stats.downloads, 2, "{stats:?}");
        let constant_uploads = if run == 0 { 8 } else { 0 };
        assert_eq!(stats.uploads, 2 + constant_uploads, "{stats:?}");
    }
}

/// Shape and Size of a device value are read from the shape the device holds (no download),
/// views of host-only values stay on the host, and an integer mask cast to float32 runs on
/// the device: none of them is a CPU step. `y = Reshape(Relu(x), Shape(Relu(x)))` and
/// `n = Size(Relu(x))`, `c = Cast(Unsqueeze(m))`, `i = Identity(m)` for an int64 input `m`.
#[test]
fn shape_reads_host_views_and_casts_are_no_cpu_steps() {
    let Some(backend) = cuda("executor::shape_reads_host_views_and_casts_are_no_cpu_steps") else {
        return;
    };
    let mut graph = Graph {
        name: "shape_only".into(),
        ..Graph::default()
    };
    for (name, dtype) in [("x", DType::F32), ("m", DType::I64)] {
        graph.inputs.push(ValueInfo {
            name: name.into(),
            ty: Some(ValueType::tensor(dtype, None)),
        });
    }
    for name in ["y", "n", "c", "i"] {
        graph.outputs.push(ValueInfo {
            name: name.into(),
            ty: None,
        });
    }
    graph.initializers.insert(
        "axes".into(),
        Tensor::from_vec(vec![1], vec![0i64]).unwrap(),
    );
    graph.nodes = vec![
        node("Relu", &["x"], "r", &[]),
        node("Shape", &["r"], "s", &[]),
        node("Reshape", &["r", "s"], "y", &[]),
        node("Size", &["r"], "n", &[]),
        node("Unsqueeze", &["m", "axes"], "u", &[]),
        node("Cast", &["u"], "c", &[("to", Attribute::Int(1))]),
        node("Identity", &["m"], "i", &[]),
    ];
    let opsets = [("".to_string(), 21)].into();
    let plan = Arc::new(Plan::build(&graph, &opsets, OperationSet::Reproducible, &[]).unwrap());
    let mut rng = Rng::new(41);
    let x: Value = Tensor::from_vec(vec![3, 5], rng.values(15, 2.0))
        .unwrap()
        .into();
    let m: Value = Tensor::from_vec(vec![4], vec![1i64, 0, -7, (1 << 30) + 1])
        .unwrap()
        .into();
    let inputs = vec![x, m];
    let want = plan.run(inputs.clone(), RunOptions::default()).unwrap();
    let executor = CudaExecutor::new(backend, Arc::clone(&plan));
    let (got, stats) = executor.run_with(inputs, RunOptions::default()).unwrap();
    assert_eq!(got, want);
    assert!(stats.host_steps.is_empty(), "{stats:?}");
    // Shape, Size, Unsqueeze of the host input; Identity of it (uploaded as bytes for the
    // cast, still held on the host).
    assert_eq!(stats.shape_only_steps, 4, "{stats:?}");
    // Only the outputs y and c come down.
    assert_eq!(stats.downloads, 2, "{stats:?}");
}

/// A shaped kernel's host-read input that exists only on the device (Pad's constant value, a
/// the device Relu of an input here) leaves the step to the CPU op, which reads the real
/// value: the
/// device resolution would have taken the missing input for an omitted one (a zero fill).
#[test]
fn pad_with_a_device_value_runs_the_cpu_op() {
    let Some(backend) = cuda("executor::pad_with_a_device_value_runs_the_cpu_op") else {
        return;
    };
    let mut graph = Graph {
        name: "pad_device_value".into(),
        ..Graph::default()
    };
    for name in ["x", "s"] {
        graph.inputs.push(ValueInfo {
            name: name.into(),
            ty: Some(ValueType::tensor(DType::F32, None)),
        });
    }
    graph.outputs.push(ValueInfo {
        name: "y".into(),
        ty: None,
    });
    graph.initializers.insert(
        "pads".into(),
        Tensor::from_vec(vec![4], vec![1i64, 0, 0, 2]).unwrap(),
    );
    graph.nodes = vec![
        node("Relu", &["s"], "v", &[]),
        node("Pad", &["x", "pads", "v"], "y", &[]),
    ];
    let opsets = [("".to_string(), 21)].into();
    let plan = Arc::new(Plan::build(&graph, &opsets, OperationSet::Reproducible, &[]).unwrap());
    let mut rng = Rng::new(43);
    let x: Value = Tensor::from_vec(vec![2, 3], rng.values(6, 2.0))
        .unwrap()
        .into();
    let inputs = vec![x, Tensor::scalar(2.5f32).into()];
    let want = plan.run(inputs.clone(), RunOptions::default()).unwrap();
    let executor = CudaExecutor::new(backend, Arc::clone(&plan));
    let (got, stats) = executor.run_with(inputs, RunOptions::default()).unwrap();
    assert_eq!(got, want);
    assert_eq!(stats.host_steps.get("Pad"), Some(&1), "{stats:?}");
}

/// A model without caches (a convolution, a Resize and a Pad through their kernel tables, a
/// pooling) is recorded as a CUDA graph on its second run and replayed from the third: every
/// run, on new input values each time, gives the CPU interpreter's bits.
#[test]
fn plain_runs_replay_a_graph_with_the_cpu_bits() {
    let Some(backend) = cuda("executor::plain_runs_replay_a_graph_with_the_cpu_bits") else {
        return;
    };
    let mut rng = Rng::new(47);
    let mut graph = Graph {
        name: "plain_graph".into(),
        ..Graph::default()
    };
    graph.inputs.push(ValueInfo {
        name: "x".into(),
        ty: Some(ValueType::tensor(DType::F32, None)),
    });
    graph.outputs.push(ValueInfo {
        name: "y".into(),
        ty: None,
    });
    let inits = [
        ("w", Tensor::from_vec(vec![4, 2, 3, 3], rng.values(72, 1.0))),
        ("b", Tensor::from_vec(vec![4], rng.values(4, 1.0))),
        (
            "scales",
            Tensor::from_vec(vec![4], vec![1.0f32, 1.0, 2.0, 1.5]),
        ),
        (
            "pads",
            Tensor::from_vec(vec![8], vec![0i64, 0, 1, 2, 0, 0, 3, 0]),
        ),
    ];
    for (name, t) in inits {
        graph.initializers.insert(name.into(), t.unwrap());
    }
    let ints = |v: &[i64]| Attribute::Ints(v.to_vec());
    graph.nodes = vec![
        node(
            "Conv",
            &["x", "w", "b"],
            "c",
            &[("pads", ints(&[1, 1, 1, 1]))],
        ),
        node("Relu", &["c"], "r", &[]),
        node(
            "Resize",
            &["r", "", "scales"],
            "z",
            &[("mode", Attribute::String("linear".into()))],
        ),
        node("Pad", &["z", "pads"], "p", &[]),
        node(
            "MaxPool",
            &["p"],
            "y",
            &[("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))],
        ),
    ];
    let opsets = [("".to_string(), 21)].into();
    let plan = Arc::new(Plan::build(&graph, &opsets, OperationSet::Reproducible, &[]).unwrap());
    let executor = CudaExecutor::new(backend, Arc::clone(&plan));
    for run in 0..5 {
        let x: Value = Tensor::from_vec(vec![1, 2, 9, 7], rng.values(126, 2.0))
            .unwrap()
            .into();
        let want = plan.run(vec![x.clone()], RunOptions::default()).unwrap();
        let (got, stats) = executor.run_with(vec![x], RunOptions::default()).unwrap();
        assert_eq!(got, want, "run {run}");
        assert!(stats.host_steps.is_empty(), "run {run}: {stats:?}");
        assert_eq!(
            stats.graph_replays,
            usize::from(run >= 2),
            "run {run}: {stats:?}"
        );
    }
}

/// A step that reads a model input's values on the host (Pad's pads here) keeps the run out
/// of a graph, which could only replay the pads it was recorded with: each run pads by its
/// own pads input.
#[test]
fn runs_reading_input_values_on_the_host_are_not_replayed() {
    let Some(backend) = cuda("executor::runs_reading_input_values_on_the_host_are_not_replayed")
    else {
        return;
    };
    let mut graph = Graph {
        name: "host_read_input".into(),
        ..Graph::default()
    };
    for (name, dtype) in [("x", DType::F32), ("pads", DType::I64)] {
        graph.inputs.push(ValueInfo {
            name: name.into(),
            ty: Some(ValueType::tensor(dtype, None)),
        });
    }
    graph.outputs.push(ValueInfo {
        name: "y".into(),
        ty: None,
    });
    graph.nodes = vec![
        node("Relu", &["x"], "r", &[]),
        node("Pad", &["r", "pads"], "y", &[]),
    ];
    let opsets = [("".to_string(), 21)].into();
    let plan = Arc::new(Plan::build(&graph, &opsets, OperationSet::Reproducible, &[]).unwrap());
    let executor = CudaExecutor::new(backend, Arc::clone(&plan));
    let mut rng = Rng::new(53);
    for (run, pads) in [
        [1i64, 0, 0, 2],
        [1, 0, 0, 2],
        [0, 3, 1, 0],
        [2, 2, 0, 0],
        [0, 1, 0, 1],
    ]
    .into_iter()
    .enumerate()
    {
        let x: Value = Tensor::from_vec(vec![2, 3], rng.values(6, 2.0))
            .unwrap()
            .into();
        let inputs = vec![x, Tensor::from_vec(vec![4], pads.to_vec()).unwrap().into()];
        let want = plan.run(inputs.clone(), RunOptions::default()).unwrap();
        let (got, stats) = executor.run_with(inputs, RunOptions::default()).unwrap();
        assert_eq!(got, want, "run {run}, pads {pads:?}");
        assert_eq!(stats.graph_replays, 0, "run {run}: {stats:?}");
    }
}
