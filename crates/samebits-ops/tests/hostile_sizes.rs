//! Sizes a hostile model computes from data (a shape tensor, a pad, a depth, a trip count) are
//! refused with an error naming the op and the limit, before anything is allocated or a loop
//! spins (docs/security.md, "Sizes"; issue #21). Each case is a model that aborted the process
//! on an allocation failure, or ran for hours, before the check; the values (2^40 elements,
//! M = 2^60) are far past the default limits, which these tests do not change.

mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};

/// Runs one node and returns its error message (the node must fail).
fn refusal(op: &str, opset: i64, inputs: Vec<Value>, attributes: &[(&str, Attribute)]) -> String {
    let inputs: Vec<Option<Value>> = inputs.into_iter().map(Some).collect();
    match run_node_opset(op, opset, &inputs, attributes, 1) {
        Ok(_) => panic!("{op} with a hostile size ran"),
        Err(e) => e.to_string(),
    }
}

fn assert_size_refused(message: &str, op: &str) {
    assert!(
        message.contains(op) && message.contains("SAMEBITS_MAX_TENSOR_BYTES"),
        "{op}: {message}"
    );
}

const HUGE: i64 = 1 << 40;

fn scalar(v: i64) -> Value {
    i64s(&[], &[v]).into()
}

#[test]
fn outputs_sized_by_data_are_bounded_before_allocation() {
    let one = || -> Value { f32s(&[1], &[1.0]).into() };
    let cases: Vec<(&str, i64, Vec<Value>, &str)> = vec![
        (
            "ConstantOfShape",
            21,
            vec![i64s(&[1], &[HUGE]).into()],
            "ConstantOfShape output",
        ),
        (
            "Range",
            21,
            vec![scalar(0), scalar(HUGE), scalar(1)],
            "Range output",
        ),
        (
            "Expand",
            21,
            vec![one(), i64s(&[2], &[1 << 20, 1 << 20]).into()],
            "output of shape",
        ),
        (
            "Tile",
            21,
            vec![one(), i64s(&[1], &[HUGE]).into()],
            "output of shape",
        ),
        (
            "Pad",
            21,
            vec![one(), i64s(&[2], &[0, HUGE]).into()],
            "Pad output",
        ),
        (
            "CenterCropPad",
            21,
            vec![one(), i64s(&[1], &[HUGE]).into()],
            "CenterCropPad output",
        ),
        (
            "OneHot",
            21,
            vec![
                i64s(&[1], &[1]).into(),
                scalar(HUGE),
                f32s(&[2], &[0.0, 1.0]).into(),
            ],
            "OneHot output",
        ),
        ("HannWindow", 21, vec![scalar(HUGE)], "window"),
    ];
    for (op, opset, inputs, what) in cases {
        let message = refusal(op, opset, inputs, &[]);
        assert_size_refused(&message, what);
    }
    let unpool = refusal(
        "MaxUnpool",
        21,
        vec![
            f32s(&[1, 1, 1, 1], &[1.0]).into(),
            i64s(&[1, 1, 1, 1], &[0]).into(),
            i64s(&[4], &[1, 1, 1 << 20, 1 << 20]).into(),
        ],
        &[("kernel_shape", Attribute::Ints(vec![2, 2]))],
    );
    assert_size_refused(&unpool, "output of shape");
}

#[test]
fn pads_whose_sum_overflows_are_refused() {
    let message = refusal(
        "Pad",
        21,
        vec![
            f32s(&[1], &[1.0]).into(),
            i64s(&[2], &[i64::MAX, i64::MAX]).into(),
        ],
        &[],
    );
    assert!(message.contains("do not leave a valid size"), "{message}");
}

#[test]
fn convolution_geometry_that_overflows_is_refused() {
    // DeformConv: a dilation of i64::MAX makes the kernel's extent overflow.
    let message = refusal(
        "DeformConv",
        22,
        vec![
            f32s(&[1, 1, 3, 3], &[0.0; 9]).into(),
            f32s(&[1, 1, 2, 2], &[1.0; 4]).into(),
            f32s(&[1, 8, 2, 2], &[0.0; 32]).into(),
        ],
        &[("dilations", Attribute::Ints(vec![i64::MAX, 1]))],
    );
    assert!(message.contains("does not fit"), "{message}");
    // CausalConvWithState: a weight of no channels may claim any k; k - 1 + length overflows.
    let message = refusal(
        "CausalConvWithState",
        27,
        vec![
            f32s(&[1, 0, 4], &[]).into(),
            f32s(&[0, 1, usize::MAX], &[]).into(),
        ],
        &[],
    );
    assert!(message.contains("overflows"), "{message}");
}

fn run_loop(m: i64, carried: Tensor) -> String {
    let result = run_node_in_scope(
        "Loop",
        21,
        &[
            Some(scalar(m)),
            Some(Tensor::from_bools(vec![], vec![true]).unwrap().into()),
            Some(carried.into()),
        ],
        &[("one", f32s(&[1], &[1.0]).into())],
        &[("body", endless_loop_body())],
        2,
    );
    match result {
        Ok(_) => panic!("the Loop ran to its end"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn loops_with_huge_trip_counts_stop_at_the_iteration_limit() {
    // A condition that stays true and M = 2^60: stopped after 2^20 iterations (about a second).
    let message = run_loop(1 << 60, f32s(&[1], &[0.0]));
    assert!(
        message.contains("more than 1048576 iterations")
            && message.contains("SAMEBITS_MAX_LOOP_ITERATIONS"),
        "{message}"
    );
}

/// A DFT's direct sum costs lines × length × bins multiply-adds: a `dft_length` of 2^30 on a
/// four-sample signal would take about 2^60, hours, though its output fits the size limit. It
/// is refused by `SAMEBITS_MAX_DFT_WORK` before any twiddle is computed.
#[test]
fn dft_lengths_whose_work_is_unbounded_are_refused() {
    let message = refusal(
        "DFT",
        17,
        vec![
            f32s(&[1, 4, 1], &[1.0, 2.0, 3.0, 4.0]).into(),
            scalar(1 << 30),
        ],
        &[],
    );
    assert!(
        message.contains("DFT: 1 transforms of length 1073741824")
            && message.contains("SAMEBITS_MAX_DFT_WORK"),
        "{message}"
    );
}

/// Empty tensors where a kernel splits its output into blocks: LogSoftmax over axis 0 of a
/// `[61, 4, 0]` input and Attention with a query sequence of length 0 (with the QK output
/// requested) split into chunks of size 0 and panicked (both found by the `onnx_model` fuzz
/// target; fuzz/regressions/onnx_model replays the inputs). Both give empty outputs.
#[test]
fn empty_blocks_give_empty_outputs() {
    let x: Value = Tensor::from_vec(vec![61, 4, 0], Vec::<f32>::new())
        .unwrap()
        .into();
    let out = run_node_opset(
        "LogSoftmax",
        13,
        &[Some(x)],
        &[("axis", Attribute::Int(0))],
        1,
    )
    .unwrap();
    assert_eq!(tensor(&out[0]).shape(), &[61, 4, 0]);

    let q: Value = Tensor::from_vec(vec![2, 3, 0, 8], Vec::<f32>::new())
        .unwrap()
        .into();
    let kv = || -> Option<Value> { Some(f32s(&[2, 3, 6, 8], &[0.5; 2 * 3 * 6 * 8]).into()) };
    let inputs = vec![Some(q), kv(), kv()];
    let out = run_node_opset("Attention", 23, &inputs, &[], 1).unwrap();
    assert_eq!(tensor(&out[0]).shape(), &[2, 3, 0, 8]);
}

/// MaxPool over an input whose width is 0 but whose pads leave output windows (each covering
/// only padding), and SoftmaxCrossEntropyLoss with 0 classes, split by blocks of size 0 and
/// panicked (found by the `onnx_model` fuzz target; fuzz/regressions/onnx_model replays the
/// inputs). A window over padding alone is the empty max, `-inf` (contract: pool); the loss
/// refuses its targets, which cannot lie in 0 classes.
#[test]
fn padding_only_windows_and_zero_classes_do_not_panic() {
    let x: Value = Tensor::from_vec(vec![1, 1, 5, 0], Vec::<f32>::new())
        .unwrap()
        .into();
    let out = run_node_opset(
        "MaxPool",
        22,
        &[Some(x)],
        &[
            ("kernel_shape", Attribute::Ints(vec![5, 5])),
            ("pads", Attribute::Ints(vec![2, 96, 2, 49])),
        ],
        1,
    )
    .unwrap();
    let y = tensor(&out[0]);
    assert_eq!(y.shape(), &[1, 1, 5, 141]);
    assert!(
        y.as_slice::<f32>()
            .unwrap()
            .iter()
            .all(|&v| v == f32::NEG_INFINITY)
    );

    let scores: Value = Tensor::from_vec(vec![3, 0, 2], Vec::<f32>::new())
        .unwrap()
        .into();
    let target = i64s(&[3, 2], &[0; 6]).into();
    let result = run_node_opset(
        "SoftmaxCrossEntropyLoss",
        13,
        &[Some(scores), Some(target)],
        &[("reduction", Attribute::String("none".into()))],
        1,
    );
    assert!(
        result.is_err(),
        "a target class among 0 classes was accepted"
    );
}
