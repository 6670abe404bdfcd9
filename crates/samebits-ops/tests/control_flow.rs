//! Control-flow family: If, Loop and Scan, with bodies that read outer-scope values
//! (captures). Expected values are worked out by hand from the ONNX operator definitions.
mod common;
use common::*;
use samebits_ir::{Attribute, DType, Shape, Tensor, Value, ValueType};

fn i64_scalar(v: i64) -> Value {
    Tensor::scalar(v).into()
}

fn bool_scalar(v: bool) -> Value {
    bools(&[], &[v]).into()
}

/// If on `cond`; then doubles the outer `x`, else returns the outer `w`.
fn run_if(cond: Tensor) -> Result<Vec<Value>, samebits_ops::OpError> {
    let then_branch = subgraph(&[], vec![node("Add", &["x", "x"], &["y"], &[])], &["y"]);
    let else_branch = subgraph(&[], vec![node("Identity", &["w"], &["z"], &[])], &["z"]);
    run_node_in_scope(
        "If",
        21,
        &[Some(cond.into())],
        &[
            ("x", f32s(&[2], &[1., 2.]).into()),
            ("w", f32s(&[1], &[7.]).into()),
        ],
        &[("then_branch", then_branch), ("else_branch", else_branch)],
        1,
    )
}

#[test]
fn if_runs_the_branch_the_condition_picks_on_captured_values() {
    let out = run_if(bools(&[], &[true])).unwrap();
    assert_eq!(tensor(&out[0]).as_slice::<f32>().unwrap(), &[2., 4.]);
    let out = run_if(bools(&[1], &[false])).unwrap();
    assert_eq!(tensor(&out[0]).as_slice::<f32>().unwrap(), &[7.]);
}

#[test]
fn if_rejects_a_condition_that_is_not_one_bool() {
    let e = run_if(bools(&[2], &[true, false])).unwrap_err();
    assert!(
        e.to_string()
            .contains("input 0 (cond) must be a bool tensor with one element"),
        "{e}"
    );
    let e = run_if(f32s(&[], &[1.])).unwrap_err();
    assert!(e.to_string().contains("got f32"), "{e}");
}

#[test]
fn nested_if_reads_a_value_two_scopes_out() {
    let inner = |op: &str| subgraph(&[], vec![node(op, &["x"], &["r"], &[])], &["r"]);
    let then_branch = subgraph(
        &[],
        vec![node(
            "If",
            &["c2"],
            &["r2"],
            &[
                ("then_branch", inner("Identity")),
                ("else_branch", inner("Neg")),
            ],
        )],
        &["r2"],
    );
    let out = run_node_in_scope(
        "If",
        21,
        &[Some(bools(&[], &[true]).into())],
        &[
            ("x", f32s(&[2], &[1., 2.]).into()),
            ("c2", bools(&[], &[false]).into()),
        ],
        &[
            ("then_branch", then_branch),
            ("else_branch", inner("Identity")),
        ],
        1,
    )
    .unwrap();
    assert_eq!(tensor(&out[0]).as_slice::<f32>().unwrap(), &[-1., -2.]);
}

/// Loop body: `v += step` (outer), `cond_out = iter < limit` (outer), scan outputs: `v` and `iter`.
fn counting_body() -> Attribute {
    subgraph(
        &["iter", "cond_in", "v_in"],
        vec![
            node("Add", &["v_in", "step"], &["v_out"], &[]),
            node("Less", &["iter", "limit"], &["cond_out"], &[]),
            node("Identity", &["v_out"], &["v_scan"], &[]),
            node("Identity", &["iter"], &["iter_scan"], &[]),
        ],
        &["cond_out", "v_out", "v_scan", "iter_scan"],
    )
}

fn run_counting_loop(m: Option<i64>, cond: Option<bool>, limit: i64) -> Vec<Value> {
    run_node_in_scope(
        "Loop",
        21,
        &[
            m.map(i64_scalar),
            cond.map(bool_scalar),
            Some(f32s(&[1], &[0.]).into()),
        ],
        &[
            ("step", f32s(&[1], &[1.5]).into()),
            ("limit", i64_scalar(limit)),
        ],
        &[("body", counting_body())],
        3,
    )
    .unwrap()
}

#[test]
fn loop_runs_m_times_and_stacks_scan_outputs_on_a_new_axis() {
    // cond stays true (iter < 100), so M = 3 bounds it: v = 1.5, 3, 4.5.
    let out = run_counting_loop(Some(3), Some(true), 100);
    assert_eq!(tensor(&out[0]).as_slice::<f32>().unwrap(), &[4.5]);
    assert_eq!(tensor(&out[1]).shape(), &[3, 1]);
    assert_eq!(tensor(&out[1]).as_slice::<f32>().unwrap(), &[1.5, 3., 4.5]);
    assert_eq!(tensor(&out[2]).as_slice::<i64>().unwrap(), &[0, 1, 2]);
}

#[test]
fn loop_stops_when_the_body_returns_false() {
    // Iteration 0 returns 0 < 1 (go on), iteration 1 returns 1 < 1 (stop): two iterations.
    let out = run_counting_loop(Some(10), Some(true), 1);
    assert_eq!(tensor(&out[0]).as_slice::<f32>().unwrap(), &[3.]);
    assert_eq!(tensor(&out[2]).as_slice::<i64>().unwrap(), &[0, 1]);
    // Without M the condition alone bounds the loop.
    let out = run_counting_loop(None, Some(true), 1);
    assert_eq!(tensor(&out[2]).as_slice::<i64>().unwrap(), &[0, 1]);
    // Without cond the body's condition is ignored: M alone bounds the loop.
    let out = run_counting_loop(Some(4), None, 1);
    assert_eq!(tensor(&out[2]).as_slice::<i64>().unwrap(), &[0, 1, 2, 3]);
}

#[test]
fn loop_without_iterations_yields_empty_scan_outputs_of_the_declared_type() {
    let Attribute::Graph(mut body) = counting_body() else {
        unreachable!()
    };
    body.outputs[2].ty = Some(ValueType::tensor(DType::F32, Some(Shape::known(&[1]))));
    let run = |m: i64, cond: bool, body: &samebits_ir::Graph| {
        run_node_in_scope(
            "Loop",
            21,
            &[
                Some(i64_scalar(m)),
                Some(bool_scalar(cond)),
                Some(f32s(&[1], &[5.]).into()),
            ],
            &[
                ("step", f32s(&[1], &[1.5]).into()),
                ("limit", i64_scalar(9)),
            ],
            &[("body", Attribute::Graph(Box::new(body.clone())))],
            3,
        )
    };
    let e = run(0, true, &body).unwrap_err();
    assert!(
        e.to_string()
            .contains("scan output 1 is empty and the body does not declare"),
        "{e}"
    );
    body.outputs[3].ty = Some(ValueType::tensor(DType::I64, Some(Shape::known(&[]))));
    // M = 0, or a false initial condition: nothing runs, the carried value passes through.
    for (m, cond) in [(0, true), (5, false)] {
        let out = run(m, cond, &body).unwrap();
        assert_eq!(tensor(&out[0]).as_slice::<f32>().unwrap(), &[5.]);
        assert_eq!(tensor(&out[1]).shape(), &[0, 1]);
        assert_eq!(tensor(&out[2]).shape(), &[0]);
        assert_eq!(tensor(&out[2]).dtype(), DType::I64);
    }
}

#[test]
fn loop_refuses_to_run_forever_and_checks_the_body_arity() {
    let e = run_node_in_scope(
        "Loop",
        21,
        &[None, None, Some(f32s(&[1], &[0.]).into())],
        &[("step", f32s(&[1], &[1.]).into()), ("limit", i64_scalar(1))],
        &[("body", counting_body())],
        1,
    )
    .unwrap_err();
    assert!(e.to_string().contains("neither input M"), "{e}");
    let e = run_node_in_scope(
        "Loop",
        21,
        &[Some(i64_scalar(1)), None],
        &[("step", f32s(&[1], &[1.]).into()), ("limit", i64_scalar(1))],
        &[("body", counting_body())],
        1,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("body declares 3 inputs, expected 2"),
        "{e}"
    );
}

/// Scan over `x`: state `s += x_t`, scan outputs `s` twice, `x_t * factor` (outer).
fn scan_body() -> Attribute {
    subgraph(
        &["s_in", "x_t"],
        vec![
            node("Add", &["s_in", "x_t"], &["s_out"], &[]),
            node("Identity", &["s_out"], &["y1"], &[]),
            node("Identity", &["s_out"], &["y2"], &[]),
            node("Mul", &["x_t", "factor"], &["y3"], &[]),
        ],
        &["s_out", "y1", "y2", "y3"],
    )
}

fn run_scan(x: Tensor, extra: &[(&str, Attribute)]) -> Result<Vec<Value>, samebits_ops::OpError> {
    let mut attributes = vec![
        ("body", scan_body()),
        ("num_scan_inputs", Attribute::Int(1)),
    ];
    attributes.extend(extra.iter().cloned());
    run_node_in_scope(
        "Scan",
        21,
        &[Some(f32s(&[2], &[0., 0.]).into()), Some(x.into())],
        &[("factor", f32s(&[], &[10.]).into())],
        &attributes,
        4,
    )
}

#[test]
fn scan_threads_state_and_stacks_outputs_along_axis_0() {
    let x = f32s(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
    let out = run_scan(x, &[]).unwrap();
    assert_eq!(tensor(&out[0]).as_slice::<f32>().unwrap(), &[9., 12.]);
    assert_eq!(tensor(&out[1]).shape(), &[3, 2]);
    assert_eq!(
        tensor(&out[1]).as_slice::<f32>().unwrap(),
        &[1., 2., 4., 6., 9., 12.]
    );
    assert_eq!(
        tensor(&out[3]).as_slice::<f32>().unwrap(),
        &[10., 20., 30., 40., 50., 60.]
    );
}

#[test]
fn scan_honours_axes_and_directions() {
    // Columns of x taken last to first: [3,6], [2,5], [1,4]; running sums [3,6], [5,11], [6,15].
    let x = f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let out = run_scan(
        x,
        &[
            ("scan_input_axes", Attribute::Ints(vec![-1])),
            ("scan_input_directions", Attribute::Ints(vec![1])),
            ("scan_output_axes", Attribute::Ints(vec![1, 0, -1])),
            ("scan_output_directions", Attribute::Ints(vec![0, 1, 0])),
        ],
    )
    .unwrap();
    assert_eq!(tensor(&out[0]).as_slice::<f32>().unwrap(), &[6., 15.]);
    // Forward, stacked along axis 1.
    assert_eq!(tensor(&out[1]).shape(), &[2, 3]);
    assert_eq!(
        tensor(&out[1]).as_slice::<f32>().unwrap(),
        &[3., 5., 6., 6., 11., 15.]
    );
    // Reversed (last iteration first), stacked along axis 0.
    assert_eq!(tensor(&out[2]).shape(), &[3, 2]);
    assert_eq!(
        tensor(&out[2]).as_slice::<f32>().unwrap(),
        &[6., 15., 5., 11., 3., 6.]
    );
}

#[test]
fn scan_rejects_bad_attributes_and_mismatched_lengths() {
    let x = f32s(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
    let e = run_scan(
        x.clone(),
        &[("scan_input_directions", Attribute::Ints(vec![2]))],
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("\"scan_input_directions\" holds 2"),
        "{e}"
    );
    let e = run_scan(x.clone(), &[("scan_input_axes", Attribute::Ints(vec![2]))]).unwrap_err();
    assert!(
        e.to_string()
            .contains("scan_input_axes[0]: axis 2 is out of range"),
        "{e}"
    );
    let e = run_scan(x, &[("scan_output_axes", Attribute::Ints(vec![0]))]).unwrap_err();
    assert!(
        e.to_string()
            .contains("\"scan_output_axes\" has 1 values, expected 3"),
        "{e}"
    );
    let body = subgraph(
        &["a", "b"],
        vec![node("Add", &["a", "b"], &["c"], &[])],
        &["c"],
    );
    let e = run_node_opset(
        "Scan",
        21,
        &[
            Some(f32s(&[3], &[1., 2., 3.]).into()),
            Some(f32s(&[2], &[1., 2.]).into()),
        ],
        &[("body", body), ("num_scan_inputs", Attribute::Int(2))],
        1,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("scan input 1 (input 1) has 2 steps"),
        "{e}"
    );
}
