//! Reduction family: hand-checked reductions, the canonical order over several axes, integer and
//! half-precision dtypes, ArgMax/ArgMin ties and NaN, CumSum modes, and error messages.
mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};

fn ints(v: &[i64]) -> Attribute {
    Attribute::Ints(v.to_vec())
}

fn run_opset(
    op: &str,
    opset: i64,
    inputs: &[Option<Tensor>],
    attrs: &[(&str, Attribute)],
) -> Tensor {
    let inputs: Vec<Option<Value>> = inputs.iter().map(|t| t.clone().map(Value::from)).collect();
    let out = run_node_opset(op, opset, &inputs, attrs, 1).unwrap();
    out.into_iter().next().unwrap().into_tensor().unwrap()
}

#[test]
fn reduce_sum_over_axes_input_with_and_without_keepdims() {
    // [[1, 2], [3, 4]] summed over axis 1: [3, 7] (by hand).
    let x = f32s(&[2, 2], &[1., 2., 3., 4.]);
    let y = run1("ReduceSum", &[x.clone(), i64s(&[1], &[1])], &[]).unwrap();
    assert_eq!(y.shape(), &[2, 1]);
    assert_eq!(y.as_slice::<f32>().unwrap(), &[3., 7.]);
    let y = run1(
        "ReduceSum",
        &[x, i64s(&[1], &[-2])],
        &[("keepdims", Attribute::Int(0))],
    )
    .unwrap();
    assert_eq!(y.shape(), &[2]);
    assert_eq!(y.as_slice::<f32>().unwrap(), &[4., 6.]);
}

#[test]
fn empty_axes_reduce_everything_unless_noop() {
    let x = f32s(&[2, 2], &[1., 2., 3., 4.]);
    let all = run_opset("ReduceMean", 18, &[Some(x.clone())], &[]);
    assert_eq!(all.shape(), &[1, 1]);
    assert_eq!(all.as_slice::<f32>().unwrap(), &[2.5]);
    let noop = run_opset(
        "ReduceSum",
        13,
        &[Some(x.clone()), Some(i64s(&[0], &[]))],
        &[("noop_with_empty_axes", Attribute::Int(1))],
    );
    assert_eq!(noop, x);
}

#[test]
fn attribute_axes_in_old_opsets() {
    let x = f32s(&[2, 3], &[1., 5., 3., 4., 2., 6.]);
    let y = run_opset("ReduceMax", 13, &[Some(x.clone())], &[("axes", ints(&[1]))]);
    assert_eq!(y.as_slice::<f32>().unwrap(), &[5., 6.]);
    let y = run_opset(
        "ReduceProd",
        13,
        &[Some(x)],
        &[("axes", ints(&[0])), ("keepdims", Attribute::Int(0))],
    );
    assert_eq!(y.as_slice::<f32>().unwrap(), &[4., 10., 18.]);
}

#[test]
fn several_axes_reduce_in_row_major_order_of_the_reduced_index() {
    // Shape [3, 2, 70], axes {0, 2}: output j sums x[i, j, k] in (i, k) row-major order,
    // i.e. one canonical sum over 210 terms (contract: reduce-axes).
    let shape = [3usize, 2, 70];
    let x: Vec<f32> = (0..420)
        .map(|i| ((i * 7919) % 1000) as f32 * 1.37e-3 - 0.5)
        .collect();
    let y = run1(
        "ReduceSum",
        &[f32s(&shape, &x), i64s(&[2], &[2, 0])],
        &[("keepdims", Attribute::Int(0))],
    )
    .unwrap();
    for j in 0..2 {
        let terms: Vec<f32> = (0..3)
            .flat_map(|i| (0..70).map(move |k| (i, k)))
            .map(|(i, k)| x[(i * 2 + j) * 70 + k])
            .collect();
        let expect = samebits_kernels::canonical_sum(&terms);
        assert_eq!(y.as_slice::<f32>().unwrap()[j].to_bits(), expect.to_bits());
    }
}

#[test]
fn sum_square_and_l2_use_the_canonical_dot() {
    let x: Vec<f32> = (0..130).map(|i| (i as f32).sin()).collect();
    let t = f32s(&[130], &x);
    let ss = run1("ReduceSumSquare", std::slice::from_ref(&t), &[]).unwrap();
    let expect = samebits_kernels::canonical_dot(&x, &x);
    assert_eq!(ss.as_slice::<f32>().unwrap()[0].to_bits(), expect.to_bits());
    let l2 = run1("ReduceL2", std::slice::from_ref(&t), &[]).unwrap();
    assert_eq!(
        l2.as_slice::<f32>().unwrap()[0].to_bits(),
        expect.sqrt().to_bits()
    );
    let l1 = run1("ReduceL1", &[f32s(&[3], &[-1., 2., -3.5])], &[]).unwrap();
    assert_eq!(l1.as_slice::<f32>().unwrap(), &[6.5]);
}

#[test]
fn empty_reductions_give_identities() {
    // ONNX: empty sum 0, product 1, max -inf, min +inf.
    let x = f32s(&[2, 0], &[]);
    let axis = || i64s(&[1], &[1]);
    let get = |op: &str| {
        run1(op, &[x.clone(), axis()], &[])
            .unwrap()
            .as_slice::<f32>()
            .unwrap()
            .to_vec()
    };
    assert_eq!(get("ReduceSum"), vec![0.0, 0.0]);
    assert_eq!(get("ReduceProd"), vec![1.0, 1.0]);
    assert_eq!(get("ReduceMax"), vec![f32::NEG_INFINITY; 2]);
    assert_eq!(get("ReduceMin"), vec![f32::INFINITY; 2]);
}

#[test]
fn integer_bool_and_half_dtypes() {
    let x = Tensor::from_vec(vec![4], vec![7i32, -2, 3, 1]).unwrap();
    let mean = run1("ReduceMean", std::slice::from_ref(&x), &[]).unwrap();
    assert_eq!(mean.as_slice::<i32>().unwrap(), &[2]); // 9 / 4 truncated
    let l2 = run1("ReduceL2", &[x], &[]).unwrap();
    assert_eq!(l2.as_slice::<i32>().unwrap(), &[7]); // sqrt(63) = 7.94 truncated
    let b = Tensor::from_bools(vec![2, 2], vec![true, false, false, false]).unwrap();
    let any = run1("ReduceMax", &[b.clone(), i64s(&[1], &[1])], &[]).unwrap();
    assert_eq!(any.as_bools().unwrap(), &[1, 0]);
    let all = run1("ReduceMin", &[b, i64s(&[1], &[0])], &[]).unwrap();
    assert_eq!(all.as_bools().unwrap(), &[0, 0]);
    let h: Vec<half::f16> = [0.1f32, 0.2, 0.3]
        .iter()
        .map(|&v| half::f16::from_f32(v))
        .collect();
    let s = run1(
        "ReduceSum",
        &[Tensor::from_vec(vec![3], h.clone()).unwrap()],
        &[],
    )
    .unwrap();
    let wide = h.iter().fold(0.0f32, |a, v| a + v.to_f32());
    assert_eq!(
        s.as_slice::<half::f16>().unwrap(),
        &[half::f16::from_f32(wide)]
    );
}

#[test]
fn argmax_argmin_ties_nan_and_select_last_index() {
    let x = f32s(&[2, 3], &[1., 3., 3., f32::NAN, 0., f32::NAN]);
    let am = run1(
        "ArgMax",
        std::slice::from_ref(&x),
        &[("axis", Attribute::Int(1))],
    )
    .unwrap();
    assert_eq!(am.shape(), &[2, 1]);
    assert_eq!(am.as_slice::<i64>().unwrap(), &[1, 0]);
    let last = run1(
        "ArgMax",
        std::slice::from_ref(&x),
        &[
            ("axis", Attribute::Int(-1)),
            ("select_last_index", Attribute::Int(1)),
            ("keepdims", Attribute::Int(0)),
        ],
    )
    .unwrap();
    assert_eq!(last.as_slice::<i64>().unwrap(), &[2, 2]);
    let ai = run1(
        "ArgMin",
        &[Tensor::from_vec(vec![2, 2], vec![5i64, 2, 1, 9]).unwrap()],
        &[],
    )
    .unwrap();
    assert_eq!(ai.as_slice::<i64>().unwrap(), &[1, 0]);
}

#[test]
fn cumsum_modes() {
    // ONNX CumSum documentation example: [1, 2, 3, 4, 5].
    let x = f32s(&[5], &[1., 2., 3., 4., 5.]);
    let axis = Tensor::scalar(0i32);
    let run = |exclusive: i64, reverse: i64| {
        run1(
            "CumSum",
            &[x.clone(), axis.clone()],
            &[
                ("exclusive", Attribute::Int(exclusive)),
                ("reverse", Attribute::Int(reverse)),
            ],
        )
        .unwrap()
        .as_slice::<f32>()
        .unwrap()
        .to_vec()
    };
    assert_eq!(run(0, 0), vec![1., 3., 6., 10., 15.]);
    assert_eq!(run(1, 0), vec![0., 1., 3., 6., 10.]);
    assert_eq!(run(0, 1), vec![15., 14., 12., 9., 5.]);
    assert_eq!(run(1, 1), vec![14., 12., 9., 5., 0.]);
    let m = Tensor::from_vec(vec![2, 2], vec![1i64, 2, 3, 4]).unwrap();
    let y = run1("CumSum", &[m, Tensor::scalar(-1i64)], &[]).unwrap();
    assert_eq!(y.as_slice::<i64>().unwrap(), &[1, 3, 3, 7]);
}

#[test]
fn bad_axes_and_attributes_are_named() {
    let x = f32s(&[2, 2], &[1., 2., 3., 4.]);
    let e = run1("ReduceSum", &[x.clone(), i64s(&[2], &[1, -1])], &[]).unwrap_err();
    assert!(e.to_string().contains("twice"), "{e}");
    let e = run1("ReduceSum", &[x.clone(), i64s(&[1], &[2])], &[]).unwrap_err();
    assert!(
        e.to_string().contains("axes") && e.to_string().contains("out of range"),
        "{e}"
    );
    let e = run1(
        "ReduceSum",
        std::slice::from_ref(&x),
        &[("keepdims", Attribute::Int(2))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("keepdims"), "{e}");
    let e = run1("ArgMax", &[f32s(&[0, 2], &[])], &[]).unwrap_err();
    assert!(e.to_string().contains("length 0"), "{e}");
    let e = run1("CumSum", &[x, f32s(&[], &[0.])], &[]).unwrap_err();
    assert!(e.to_string().contains("axis"), "{e}");
}

#[test]
fn cumprod_modes() {
    let x = f32s(&[4], &[1., 2., 3., 4.]);
    let axis = Tensor::scalar(0i64);
    let run = |attrs: &[(&str, Attribute)]| {
        run1("CumProd", &[x.clone(), axis.clone()], attrs)
            .unwrap()
            .as_slice::<f32>()
            .unwrap()
            .to_vec()
    };
    // Running products 1, 1*2, 2*3, 6*4; exclusive starts at 1; reverse runs from the end.
    assert_eq!(run(&[]), [1., 2., 6., 24.]);
    assert_eq!(run(&[("exclusive", Attribute::Int(1))]), [1., 1., 2., 6.]);
    assert_eq!(run(&[("reverse", Attribute::Int(1))]), [24., 24., 12., 4.]);
    let both = [
        ("exclusive", Attribute::Int(1)),
        ("reverse", Attribute::Int(1)),
    ];
    assert_eq!(run(&both), [24., 12., 4., 1.]);
    // Integers wrap: 2^31 * 2 in i32 is 0.
    let big = Tensor::from_vec(vec![2], vec![i32::MIN, 2]).unwrap();
    let y = run1("CumProd", &[big, axis], &[]).unwrap();
    assert_eq!(y.as_slice::<i32>().unwrap(), &[i32::MIN, 0]);
}
