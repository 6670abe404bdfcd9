//! Sequence family: construction, positions (negative and out of range), splitting,
//! concatenation and SequenceMap with a captured outer value. Expected values are worked out by
//! hand from the ONNX operator definitions.
mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};
use samebits_ops::OpError;

fn seq(tensors: &[Tensor]) -> Option<Value> {
    Some(Value::Sequence(tensors.to_vec()))
}

fn pos(p: i64) -> Option<Value> {
    Some(Tensor::scalar(p).into())
}

fn run(op: &str, inputs: &[Option<Value>], attrs: &[(&str, Attribute)]) -> Result<Value, OpError> {
    Ok(run_node_opset(op, 21, inputs, attrs, 1)?.remove(0))
}

fn elements(v: &Value) -> Vec<Vec<f32>> {
    let Value::Sequence(s) = v else {
        panic!("expected a sequence, got {v:?}")
    };
    s.iter()
        .map(|t| t.as_slice::<f32>().unwrap().to_vec())
        .collect()
}

fn abc() -> Vec<Tensor> {
    vec![f32s(&[1], &[1.]), f32s(&[2], &[2., 2.]), f32s(&[], &[3.])]
}

#[test]
fn construct_at_insert_erase_length() {
    let s = run(
        "SequenceConstruct",
        &abc()
            .into_iter()
            .map(|t| Some(t.into()))
            .collect::<Vec<_>>(),
        &[],
    )
    .unwrap();
    assert_eq!(elements(&s), vec![vec![1.], vec![2., 2.], vec![3.]]);
    let last = run("SequenceAt", &[Some(s.clone()), pos(-1)], &[]).unwrap();
    assert_eq!(tensor(&last).shape(), &[] as &[usize]);
    let inserted = run(
        "SequenceInsert",
        &[Some(s.clone()), Some(f32s(&[1], &[9.]).into()), pos(1)],
        &[],
    )
    .unwrap();
    assert_eq!(
        elements(&inserted),
        vec![vec![1.], vec![9.], vec![2., 2.], vec![3.]]
    );
    let appended = run(
        "SequenceInsert",
        &[Some(s.clone()), Some(f32s(&[1], &[9.]).into())],
        &[],
    )
    .unwrap();
    assert_eq!(elements(&appended)[3], vec![9.]);
    let at_end = run(
        "SequenceInsert",
        &[Some(s.clone()), Some(f32s(&[1], &[9.]).into()), pos(3)],
        &[],
    )
    .unwrap();
    assert_eq!(elements(&at_end)[3], vec![9.]);
    let erased = run("SequenceErase", &[Some(s.clone())], &[]).unwrap();
    assert_eq!(elements(&erased), vec![vec![1.], vec![2., 2.]]);
    let erased = run("SequenceErase", &[Some(s.clone()), pos(-3)], &[]).unwrap();
    assert_eq!(elements(&erased), vec![vec![2., 2.], vec![3.]]);
    let n = run("SequenceLength", &[Some(s)], &[]).unwrap();
    assert_eq!(tensor(&n).as_slice::<i64>().unwrap(), &[3]);
    let empty = run("SequenceEmpty", &[], &[("dtype", Attribute::Int(7))]).unwrap();
    assert_eq!(empty, Value::Sequence(vec![]));
}

#[test]
fn positions_out_of_range_and_mixed_dtypes_are_errors() {
    let s = seq(&abc());
    let e = run("SequenceAt", &[s.clone(), pos(3)], &[]).unwrap_err();
    assert!(
        e.to_string().contains("position 3 is out of range [-3, 2]"),
        "{e}"
    );
    let e = run("SequenceAt", &[s.clone(), pos(-4)], &[]).unwrap_err();
    assert!(e.to_string().contains("position -4 is out of range"), "{e}");
    let e = run(
        "SequenceInsert",
        &[s.clone(), Some(f32s(&[1], &[0.]).into()), pos(4)],
        &[],
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("position 4 is out of range [-3, 3]"),
        "{e}"
    );
    let e = run(
        "SequenceInsert",
        &[s.clone(), Some(i64s(&[1], &[0]).into())],
        &[],
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("dtype i64 does not fit a sequence of f32"),
        "{e}"
    );
    let e = run("SequenceErase", &[seq(&[])], &[]).unwrap_err();
    assert!(e.to_string().contains("empty sequence"), "{e}");
    let e = run("SequenceAt", &[Some(f32s(&[1], &[0.]).into()), pos(0)], &[]).unwrap_err();
    assert!(
        e.to_string()
            .contains("input 0 must be a sequence, got a tensor"),
        "{e}"
    );
    let e = run("SequenceEmpty", &[], &[("dtype", Attribute::Int(99))]).unwrap_err();
    assert!(
        e.to_string()
            .contains("\"dtype\" = 99 is not an ONNX dtype code"),
        "{e}"
    );
    // 14 is ONNX's COMPLEX64, which samebits does not implement.
    let e = run("SequenceEmpty", &[], &[("dtype", Attribute::Int(14))]).unwrap_err();
    assert!(e.is_unsupported(), "{e}");
}

#[test]
fn split_to_sequence_by_ones_chunk_size_and_lengths() {
    let x = || Some(Value::from(f32s(&[3, 2], &[0., 1., 2., 3., 4., 5.])));
    let ones = run(
        "SplitToSequence",
        &[x()],
        &[("keepdims", Attribute::Int(0))],
    )
    .unwrap();
    assert_eq!(
        elements(&ones),
        vec![vec![0., 1.], vec![2., 3.], vec![4., 5.]]
    );
    let Value::Sequence(pieces) = &ones else {
        unreachable!()
    };
    assert_eq!(pieces[0].shape(), &[2]);
    let chunks = run(
        "SplitToSequence",
        &[x(), Some(Tensor::scalar(2i64).into())],
        &[],
    )
    .unwrap();
    let Value::Sequence(pieces) = &chunks else {
        unreachable!()
    };
    assert_eq!(
        (pieces[0].shape(), pieces[1].shape()),
        (&[2, 2][..], &[1, 2][..])
    );
    let lengths = run(
        "SplitToSequence",
        &[x(), Some(i64s(&[2], &[1, 1]).into())],
        &[("axis", Attribute::Int(-1))],
    )
    .unwrap();
    assert_eq!(elements(&lengths), vec![vec![0., 2., 4.], vec![1., 3., 5.]]);
    let e = run(
        "SplitToSequence",
        &[x(), Some(i64s(&[2], &[1, 3]).into())],
        &[],
    )
    .unwrap_err();
    assert!(e.to_string().contains("do not sum to 3"), "{e}");
    let e = run(
        "SplitToSequence",
        &[x(), Some(Tensor::scalar(0i64).into())],
        &[],
    )
    .unwrap_err();
    assert!(e.to_string().contains("chunk size must be positive"), "{e}");
}

#[test]
fn concat_from_sequence_joins_or_stacks() {
    let s = seq(&[f32s(&[2], &[1., 2.]), f32s(&[2], &[3., 4.])]);
    let joined = run(
        "ConcatFromSequence",
        std::slice::from_ref(&s),
        &[("axis", Attribute::Int(0))],
    )
    .unwrap();
    assert_eq!(
        tensor(&joined).as_slice::<f32>().unwrap(),
        &[1., 2., 3., 4.]
    );
    let stacked = run(
        "ConcatFromSequence",
        std::slice::from_ref(&s),
        &[
            ("axis", Attribute::Int(-1)),
            ("new_axis", Attribute::Int(1)),
        ],
    )
    .unwrap();
    assert_eq!(tensor(&stacked).shape(), &[2, 2]);
    assert_eq!(
        tensor(&stacked).as_slice::<f32>().unwrap(),
        &[1., 3., 2., 4.]
    );
    let e = run("ConcatFromSequence", &[s], &[("axis", Attribute::Int(1))]).unwrap_err();
    assert!(
        e.to_string().contains("axis 1 is out of range for rank 1"),
        "{e}"
    );
    let e = run(
        "ConcatFromSequence",
        &[seq(&[])],
        &[("axis", Attribute::Int(0))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("empty sequence"), "{e}");
    let ragged = seq(&[f32s(&[1, 2], &[1., 2.]), f32s(&[1, 1], &[3.])]);
    let e = run(
        "ConcatFromSequence",
        &[ragged],
        &[("axis", Attribute::Int(0))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("does not match tensor 0"), "{e}");
}

/// SequenceMap body: `y = x * k + bias` with `bias` read from the enclosing graph.
fn affine_body() -> Attribute {
    subgraph(
        &["x", "k"],
        vec![
            node("Mul", &["x", "k"], &["xk"], &[]),
            node("Add", &["xk", "bias"], &["y"], &[]),
        ],
        &["y"],
    )
}

#[test]
fn sequence_map_feeds_elements_and_tensors_and_reads_captures() {
    let xs = seq(&[f32s(&[2], &[1., 2.]), f32s(&[1], &[3.])]);
    let bias = [("bias", f32s(&[], &[0.5]).into())];
    let run_map = |k: Value| {
        run_node_in_scope(
            "SequenceMap",
            17,
            &[xs.clone(), Some(k)],
            &bias,
            &[("body", affine_body())],
            1,
        )
    };
    // k a tensor: the same for every element.
    let out = run_map(f32s(&[], &[2.]).into()).unwrap();
    assert_eq!(elements(&out[0]), vec![vec![2.5, 4.5], vec![6.5]]);
    // k a sequence: element i with element i.
    let ks = Value::Sequence(vec![f32s(&[], &[1.]), f32s(&[], &[10.])]);
    let out = run_map(ks).unwrap();
    assert_eq!(elements(&out[0]), vec![vec![1.5, 2.5], vec![30.5]]);
    let short = Value::Sequence(vec![f32s(&[], &[1.])]);
    let e = run_map(short).unwrap_err();
    assert!(
        e.to_string()
            .contains("input 1 is a sequence of length 1, input 0 has length 2"),
        "{e}"
    );
}
