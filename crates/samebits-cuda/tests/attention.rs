//! RotaryEmbedding and Attention on the GPU against the CPU ops of samebits-ops (the oracle),
//! bit for bit: random shapes with odd sizes, head sizes over several 64-feature tiles, GQA
//! ratios, causal and not, 3-D and 4-D inputs, past lengths around the 64-key tiles; every
//! launch shape of the attention kernel (query heads per block); and the device-resident KV
//! cache over decode steps (in place, after a branch from an older prefix, past the
//! storage's capacity), each step's outputs equal to the CPU's; a new sequence's cache taking
//! the storage a finished sequence let go, and its recorded decode step. Without a GPU the
//! CUDA tests print SKIPPED and return.

use std::sync::Arc;

use samebits_cuda::testing::{
    Device, Rng, assert_same_bits, cuda_or_skip, serial, shared_cuda_arc,
};
use samebits_cuda::{
    AttentionShape, CudaExecutor, HeadsLayout, IoValue, attention_rows, attention_split_fits,
    test_device,
};
use samebits_ir::{Attribute, DType, Graph, Node, Tensor, Value, ValueInfo, ValueType};
use samebits_ops::{OperationSet, Plan};

fn f32s(v: &Value) -> &[f32] {
    v.as_tensor().unwrap().as_slice::<f32>().unwrap()
}

/// A one-node graph of `op_type` over inputs named `inputs` ("" for omitted ones).
fn one_node_plan(
    op_type: &str,
    inputs: &[&str],
    outputs: &[&str],
    attrs: Vec<(&str, Attribute)>,
) -> Arc<Plan> {
    let mut graph = Graph {
        name: op_type.into(),
        ..Graph::default()
    };
    for name in inputs.iter().filter(|n| !n.is_empty()) {
        graph.inputs.push(ValueInfo {
            name: name.to_string(),
            ty: Some(ValueType::tensor(DType::F32, None)),
        });
    }
    for name in outputs {
        graph.outputs.push(ValueInfo {
            name: name.to_string(),
            ty: None,
        });
    }
    graph.nodes.push(Node {
        name: op_type.into(),
        op_type: op_type.into(),
        domain: String::new(),
        inputs: inputs.iter().map(|s| s.to_string()).collect(),
        outputs: outputs.iter().map(|s| s.to_string()).collect(),
        attributes: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    });
    let opsets = [("".to_string(), 23)].into();
    Arc::new(Plan::build(&graph, &opsets, OperationSet::Reproducible, &[]).unwrap())
}

fn tensor(rng: &mut Rng, shape: &[usize], scale: f32) -> Value {
    let n = shape.iter().product();
    Tensor::from_vec(shape.to_vec(), rng.values(n, scale))
        .unwrap()
        .into()
}

/// One attention case: heads, sizes, lengths, causal, 3-D or 4-D inputs.
#[derive(Clone, Copy, Debug)]
struct Case {
    batch: usize,
    q_heads: usize,
    kv_heads: usize,
    q_seq: usize,
    kv_seq: usize,
    past: usize,
    d: usize,
    dv: usize,
    causal: bool,
    three_d: bool,
}

fn cases() -> Vec<Case> {
    let base = Case {
        batch: 1,
        q_heads: 9,
        kv_heads: 3,
        q_seq: 1,
        kv_seq: 1,
        past: 0,
        d: 64,
        dv: 64,
        causal: true,
        three_d: true,
    };
    let mut cases = Vec::new();
    // Decode (one query) after pasts around the 64-key tiles, SmolLM2's heads.
    for past in [0, 1, 63, 64, 65, 200] {
        cases.push(Case { past, ..base });
    }
    // Prefills, causal and not, 3-D and 4-D, odd head sizes, GQA ratios 1, 2, 3, 6.
    let shapes = [
        (1, 1, 17, 5),
        (4, 2, 130, 96),
        (6, 1, 64, 1),
        (8, 8, 33, 70),
        (9, 3, 64, 64),
    ];
    for (n, &(q_heads, kv_heads, d, dv)) in shapes.iter().enumerate() {
        for (q_seq, past) in [(7, 0), (70, 3), (5, 64)] {
            cases.push(Case {
                batch: 1 + n % 2,
                q_heads,
                kv_heads,
                q_seq,
                kv_seq: q_seq,
                past,
                d,
                dv,
                causal: (n + q_seq) % 3 != 0,
                three_d: n % 2 == 0,
            });
        }
    }
    // Cross attention (more keys than queries), and a long cache where fewer query heads fit
    // one block.
    cases.push(Case {
        q_seq: 3,
        kv_seq: 11,
        causal: false,
        ..base
    });
    cases.push(Case {
        q_heads: 3,
        kv_heads: 1,
        past: 4000,
        ..base
    });
    cases
}

/// Random inputs of a case: q, k, v and (with a past) past_key, past_value.
fn inputs(case: &Case, rng: &mut Rng) -> Vec<Value> {
    let Case {
        batch: b,
        q_heads,
        kv_heads,
        q_seq,
        kv_seq,
        past,
        d,
        dv,
        three_d,
        ..
    } = *case;
    let heads = |h: usize, s: usize, size: usize| -> Vec<usize> {
        if three_d {
            vec![b, s, h * size]
        } else {
            vec![b, h, s, size]
        }
    };
    let mut values = vec![
        tensor(rng, &heads(q_heads, q_seq, d), 2.0),
        tensor(rng, &heads(kv_heads, kv_seq, d), 2.0),
        tensor(rng, &heads(kv_heads, kv_seq, dv), 1.0),
    ];
    if past > 0 {
        values.push(tensor(rng, &[b, kv_heads, past, d], 2.0));
        values.push(tensor(rng, &[b, kv_heads, past, dv], 1.0));
    }
    values
}

fn attention_plan(case: &Case) -> Arc<Plan> {
    let inputs: &[&str] = if case.past > 0 {
        &["q", "k", "v", "", "past_key", "past_value"]
    } else {
        &["q", "k", "v"]
    };
    one_node_plan(
        "Attention",
        inputs,
        &["y", "present_key", "present_value"],
        vec![
            ("is_causal", Attribute::Int(i64::from(case.causal))),
            ("q_num_heads", Attribute::Int(case.q_heads as i64)),
            ("kv_num_heads", Attribute::Int(case.kv_heads as i64)),
        ],
    )
}

fn attention_matches_the_cpu(device: &Device) {
    let mut rng = Rng::new(23);
    for case in cases() {
        let plan = attention_plan(&case);
        let x = inputs(&case, &mut rng);
        let want = Device::Cpu.run_plan(&plan, x.clone());
        let got = device.run_plan(&plan, x);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.as_tensor().unwrap().shape(),
                w.as_tensor().unwrap().shape()
            );
            assert_same_bits(f32s(g), f32s(w), &format!("{case:?} output {i}"));
        }
    }
}
test_device!(attention_matches_the_cpu, attention_cpu, attention_cuda);

/// Every query-heads-per-block launch, in one launch or split over key chunks, gives the same
/// bits (keys and values as one dense tensor: past and new together).
#[test]
fn attention_launch_shapes_agree() {
    let Some(Device::Cuda(backend)) = cuda_or_skip("attention_launch_shapes_agree") else {
        return;
    };
    let _serial = serial();
    let mut rng = Rng::new(29);
    for case in cases()
        .into_iter()
        .filter(|c| !c.three_d && c.q_heads > c.kv_heads)
    {
        let plan = attention_plan(&case);
        let x = inputs(&case, &mut rng);
        let want = Device::Cpu.run_plan(&plan, x.clone());
        let (present_k, present_v) = (want[1].as_tensor().unwrap(), want[2].as_tensor().unwrap());
        let total = case.past + case.kv_seq;
        let layout = |h, s, size| HeadsLayout::dense(case.batch, h, s, size);
        let q = backend.upload(f32s(&x[0])).unwrap();
        let k = backend
            .upload(present_k.as_slice::<f32>().unwrap())
            .unwrap();
        let v = backend
            .upload(present_v.as_slice::<f32>().unwrap())
            .unwrap();
        let group = case.q_heads / case.kv_heads;
        let most = attention_rows(group, total, case.d, case.dv).unwrap();
        // Every rows per block, in one launch or split over chunks of 1, 2 or 5 key tiles.
        let shapes = (1..=most)
            .filter(|r| group % r == 0)
            .flat_map(|rows| [0, 1, 2, 5].map(|split| (rows, split)))
            .filter(|&(rows, split)| {
                split == 0 || attention_split_fits(rows, total, case.d, split)
            });
        for (rows, split) in shapes {
            let shape = AttentionShape {
                causal: case.causal,
                scale: 1.0 / (case.d as f32).sqrt(),
                new_len: case.kv_seq,
                rows,
                split,
            };
            let y = backend
                .attention(
                    (&q, layout(case.q_heads, case.q_seq, case.d)),
                    (&k, layout(case.kv_heads, total, case.d)),
                    (&v, layout(case.kv_heads, total, case.dv)),
                    None,
                    layout(case.q_heads, case.q_seq, case.dv),
                    case.past,
                    None,
                    shape,
                    None,
                )
                .unwrap();
            let got = backend.download(&y).unwrap();
            assert_same_bits(
                &got,
                f32s(&want[0]),
                &format!("{case:?}, {rows} rows per block, split {split}"),
            );
        }
    }
}

/// Decode steps through the device-resident cache give each step's CPU outputs: in place,
/// from an older prefix (a branch, which must not see the newer positions), and past the
/// first storage's capacity (130 prefill positions make a 260-position storage).
#[test]
fn kv_cache_steps_match_the_cpu() {
    if cuda_or_skip("kv_cache_steps_match_the_cpu").is_none() {
        return;
    }
    let _serial = serial();
    let backend = Arc::clone(shared_cuda_arc().unwrap());
    let plan = attention_plan(&sequence_case(130, 130));
    let executor = CudaExecutor::new(backend, Arc::clone(&plan));
    let mut rng = Rng::new(31);
    // A prefill of 130 positions from an empty host past, then 139 decode steps; the state
    // after step 4 is kept for a branch.
    let mut sequence = Sequence::new();
    let mut branch = None;
    for t in 0..140 {
        if t == 5 {
            branch = Some(sequence.clone());
        }
        let s = if t == 0 { 130 } else { 1 };
        sequence.step(&executor, &plan, &mut rng, s, true);
    }
    // The final present stays on the device and has every position.
    let Some((IoValue::Device(k), _)) = &sequence.gpu else {
        panic!("the cache stays on the device")
    };
    assert_eq!(k.shape(), &[1, 3, 269, 64]);
    // A step from the prefix of step 5 (its storage has moved on since), every output
    // downloaded and compared.
    branch.unwrap().step(&executor, &plan, &mut rng, 1, false);
}

/// The attention case of one step of [`Sequence`]: `s` new positions after `past` cached ones.
fn sequence_case(s: usize, past: usize) -> Case {
    Case {
        batch: 1,
        q_heads: 9,
        kv_heads: 3,
        q_seq: s,
        kv_seq: s,
        past,
        d: 64,
        dv: 64,
        causal: true,
        three_d: true,
    }
}

/// One sequence's caches: the CPU's (host tensors) and the GPU's (device values, `None` before
/// its prefill). A clone is a branch from the same prefix.
#[derive(Clone)]
struct Sequence {
    cpu: (Value, Value),
    gpu: Option<(IoValue, IoValue)>,
}

impl Sequence {
    fn new() -> Self {
        let empty = || Value::from(Tensor::from_vec(vec![1, 3, 0, 64], Vec::<f32>::new()).unwrap());
        Sequence {
            cpu: (empty(), empty()),
            gpu: None,
        }
    }

    /// Runs `s` new random positions on both devices, checks the GPU's outputs against the
    /// CPU's (the output only, with the cache kept on the device when `keep_cache`; else all
    /// three, downloaded) and returns the GPU run's graph replays.
    fn step(
        &mut self,
        executor: &CudaExecutor,
        plan: &Arc<Plan>,
        rng: &mut Rng,
        s: usize,
        keep_cache: bool,
    ) -> usize {
        let x = inputs(&sequence_case(s, 0), rng);
        let mut cpu_in = x.clone();
        cpu_in.extend([self.cpu.0.clone(), self.cpu.1.clone()]);
        let want = Device::Cpu.run_plan(plan, cpu_in);
        let past = match &self.gpu {
            Some((k, v)) => [IoValue::clone(k), IoValue::clone(v)],
            None => [
                IoValue::Host(self.cpu.0.clone()),
                IoValue::Host(self.cpu.1.clone()),
            ],
        };
        let gpu_in = x.into_iter().map(IoValue::Host).chain(past).collect();
        let (got, stats) = executor
            .run_io(gpu_in, &[false, keep_cache, keep_cache], Default::default())
            .unwrap();
        let IoValue::Host(y) = &got[0] else {
            panic!("y stays on the host")
        };
        assert_same_bits(f32s(y), f32s(&want[0]), &format!("a step of {s}"));
        if !keep_cache {
            for (i, (g, w)) in got.iter().zip(&want).enumerate().skip(1) {
                let IoValue::Host(g) = g else {
                    panic!("output {i} downloaded")
                };
                assert_same_bits(f32s(g), f32s(w), &format!("a step of {s}, output {i}"));
            }
        }
        self.cpu = (want[1].clone(), want[2].clone());
        self.gpu = Some((got[1].clone(), got[2].clone()));
        stats.graph_replays
    }
}

/// A new sequence's cache takes the storage a finished sequence let go (never one a live cache
/// holds), and with it the decode step recorded for that storage: it replays from its first
/// decode step. Every step of every sequence gives the CPU's bits.
#[test]
fn storage_reuse_keeps_bits_and_replays_recorded_steps() {
    if cuda_or_skip("storage_reuse_keeps_bits_and_replays_recorded_steps").is_none() {
        return;
    }
    let _serial = serial();
    let backend = Arc::clone(shared_cuda_arc().unwrap());
    let plan = attention_plan(&sequence_case(1, 1));
    let executor = CudaExecutor::new(backend, Arc::clone(&plan));
    let mut rng = Rng::new(41);
    let rng = &mut rng;
    // A: prefill, then a rehearsal, a recording and replays.
    let mut a = Sequence::new();
    let replays: Vec<usize> = [10, 1, 1, 1, 1]
        .iter()
        .map(|&s| a.step(&executor, &plan, rng, s, true))
        .collect();
    assert_eq!(replays, [0, 0, 0, 1, 1], "A's steps");
    // B starts while A still holds its storage: B gets another one, and A goes on replaying
    // with its own bits.
    let mut b = Sequence::new();
    assert_eq!(b.step(&executor, &plan, rng, 7, true), 0, "B's prefill");
    assert_eq!(
        a.step(&executor, &plan, rng, 1, true),
        1,
        "A after B's prefill"
    );
    assert_eq!(
        b.step(&executor, &plan, rng, 1, true),
        0,
        "B's first decode step"
    );
    // A finishes; C's cache takes A's storage and replays A's recorded step at once.
    drop(a);
    let mut c = Sequence::new();
    assert_eq!(c.step(&executor, &plan, rng, 5, true), 0, "C's prefill");
    for t in 0..4 {
        assert_eq!(
            c.step(&executor, &plan, rng, 1, true),
            1,
            "C's decode step {t}"
        );
    }
    assert_eq!(
        b.step(&executor, &plan, rng, 1, true),
        0,
        "B's second decode step"
    );
}

/// A rotary case: (batch, heads, seq, size, rotary dim, interleaved, 3-D, cache rank).
type RotaryCase = (usize, usize, usize, usize, usize, bool, bool, usize);

const ROTARY: [RotaryCase; 6] = [
    (1, 9, 1, 64, 64, true, true, 3),
    (1, 3, 7, 64, 64, true, true, 3),
    (2, 4, 5, 18, 0, false, false, 2),
    (1, 2, 9, 30, 16, false, true, 2),
    (3, 1, 2, 6, 4, true, false, 3),
    (1, 9, 70, 64, 32, true, true, 3),
];

fn rotary_matches_the_cpu(device: &Device) {
    let mut rng = Rng::new(37);
    for (b, h, s, d, rot, interleaved, three_d, cache_rank) in ROTARY {
        let half = if rot == 0 { d / 2 } else { rot / 2 };
        // Caches wider than needed and with more rows than positions.
        let width = half + 3;
        let cache_shape = if cache_rank == 3 {
            vec![b, s, width]
        } else {
            vec![b * s + 2, width]
        };
        let x_shape = if three_d {
            vec![b, s, h * d]
        } else {
            vec![b, h, s, d]
        };
        let mut attrs = vec![("interleaved", Attribute::Int(i64::from(interleaved)))];
        if three_d {
            attrs.push(("num_heads", Attribute::Int(h as i64)));
        }
        if rot > 0 {
            attrs.push(("rotary_embedding_dim", Attribute::Int(rot as i64)));
        }
        let plan = one_node_plan("RotaryEmbedding", &["x", "cos", "sin"], &["y"], attrs);
        let x = vec![
            tensor(&mut rng, &x_shape, 3.0),
            tensor(&mut rng, &cache_shape, 1.0),
            tensor(&mut rng, &cache_shape, 1.0),
        ];
        let want = Device::Cpu.run_plan(&plan, x.clone());
        let got = device.run_plan(&plan, x);
        assert_same_bits(
            f32s(&got[0]),
            f32s(&want[0]),
            &format!("rotary {x_shape:?} rot {rot}"),
        );
    }
}
test_device!(rotary_matches_the_cpu, rotary_cpu, rotary_cuda);
