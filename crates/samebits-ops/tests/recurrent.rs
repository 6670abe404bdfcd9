//! RNN, GRU and LSTM bits do not depend on the thread count or on the batch: a bidirectional
//! run of three sequences of different lengths with 1 and 4 threads, and each sequence run alone
//! against its row of the batch. (Values against ONNX's own test data: the conformance
//! allowlist.)

mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};

const SEQ: usize = 4;
const BATCH: usize = 3;
const INPUT: usize = 5;
const HIDDEN: usize = 6;

fn run(op: &str, gates: usize, x: &Tensor, lens: &[i64], seed: u64) -> Vec<Tensor> {
    let batch = lens.len();
    let w = f32s(
        &[2, gates * HIDDEN, INPUT],
        &pseudo_random(2 * gates * HIDDEN * INPUT, seed),
    );
    let r = f32s(
        &[2, gates * HIDDEN, HIDDEN],
        &pseudo_random(2 * gates * HIDDEN * HIDDEN, seed + 1),
    );
    let b = f32s(
        &[2, 2 * gates * HIDDEN],
        &pseudo_random(4 * gates * HIDDEN, seed + 2),
    );
    let inputs: Vec<Option<Value>> = vec![
        Some(x.clone().into()),
        Some(w.into()),
        Some(r.into()),
        Some(b.into()),
        Some(i64s(&[batch], lens).into()),
    ];
    let attributes = [
        ("direction", Attribute::String("bidirectional".into())),
        ("hidden_size", Attribute::Int(HIDDEN as i64)),
    ];
    let outputs = if op == "LSTM" { 3 } else { 2 };
    run_node_opset(op, 22, &inputs, &attributes, outputs)
        .unwrap()
        .into_iter()
        .map(|v| v.into_tensor().unwrap())
        .collect()
}

#[test]
fn threads_and_batch_leave_the_bits_alone() {
    let lens = [4i64, 2, 3];
    let x_data = pseudo_random(SEQ * BATCH * INPUT, 7);
    let x = f32s(&[SEQ, BATCH, INPUT], &x_data);
    for (op, gates) in [("RNN", 1), ("GRU", 3), ("LSTM", 4)] {
        let one = with_threads(1, || run(op, gates, &x, &lens, 11));
        let four = with_threads(4, || run(op, gates, &x, &lens, 11));
        for (a, b) in one.iter().zip(&four) {
            assert_eq!(bits(a), bits(b), "{op}");
        }
        // Y [seq, 2, batch, hidden]; Y_h (and Y_c) [2, batch, hidden].
        for (n, &len) in lens.iter().enumerate() {
            let row: Vec<f32> = (0..SEQ)
                .flat_map(|t| x_data[(t * BATCH + n) * INPUT..][..INPUT].to_vec())
                .collect();
            let alone = run(op, gates, &f32s(&[SEQ, 1, INPUT], &row), &[len], 11);
            for t in 0..SEQ {
                for d in 0..2 {
                    let batched = &bits(&one[0])[((t * 2 + d) * BATCH + n) * HIDDEN..][..HIDDEN];
                    let single = &bits(&alone[0])[(t * 2 + d) * HIDDEN..][..HIDDEN];
                    assert_eq!(batched, single, "{op} Y t {t} direction {d} sequence {n}");
                }
            }
            for (state, single) in one[1..].iter().zip(&alone[1..]) {
                for d in 0..2 {
                    let batched = &bits(state)[(d * BATCH + n) * HIDDEN..][..HIDDEN];
                    let single = &bits(single)[d * HIDDEN..][..HIDDEN];
                    assert_eq!(
                        batched, single,
                        "{op} final state direction {d} sequence {n}"
                    );
                }
            }
        }
    }
}
