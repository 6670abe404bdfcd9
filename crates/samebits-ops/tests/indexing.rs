//! Indexing family. Expected values are the examples of the ONNX operator documentation (noted
//! "ONNX doc") or worked by hand from the definitions.
mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};

fn vals(t: &Tensor) -> Vec<f32> {
    t.as_slice::<f32>().unwrap().to_vec()
}

fn axis(a: i64) -> (&'static str, Attribute) {
    ("axis", Attribute::Int(a))
}

#[test]
fn gather_along_axes_with_negative_and_bad_indices() {
    // ONNX doc, axis 0 and axis 1 examples.
    let data = f32s(&[3, 2], &[1.0, 1.2, 2.3, 3.4, 4.5, 5.7]);
    let y = run1("Gather", &[data.clone(), i64s(&[2, 2], &[0, 1, 1, 2])], &[]).unwrap();
    assert_eq!(y.shape(), &[2, 2, 2]);
    assert_eq!(vals(&y), vec![1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7]);
    let data3 = f32s(&[3, 3], &[1.0, 1.2, 1.9, 2.3, 3.4, 3.9, 4.5, 5.7, 5.9]);
    let y = run1("Gather", &[data3, i64s(&[1, 2], &[0, -1])], &[axis(1)]).unwrap();
    assert_eq!(y.shape(), &[3, 1, 2]);
    assert_eq!(vals(&y), vec![1.0, 1.9, 2.3, 3.9, 4.5, 5.9]);
    let e = run1("Gather", &[data, i64s(&[1], &[3])], &[]).unwrap_err();
    assert!(e.to_string().contains("index 3 is out of range"), "{e}");
}

#[test]
fn gather_elements_and_gather_nd() {
    // ONNX doc examples.
    let d = i64s(&[2, 2], &[1, 2, 3, 4]);
    let y = run1(
        "GatherElements",
        &[d, i64s(&[2, 2], &[0, 0, 1, 0])],
        &[axis(1)],
    )
    .unwrap();
    assert_eq!(y.as_slice::<i64>().unwrap(), &[1, 1, 4, 3]);
    let d = i64s(&[3, 3], &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
    let y = run1(
        "GatherElements",
        &[d.clone(), i64s(&[2, 3], &[1, 2, 0, 2, 0, 0])],
        &[],
    )
    .unwrap();
    assert_eq!(y.as_slice::<i64>().unwrap(), &[4, 8, 3, 7, 2, 3]);
    assert!(run1("GatherElements", &[d, i64s(&[1, 1], &[-4])], &[]).is_err());

    let d = i64s(&[2, 2], &[0, 1, 2, 3]);
    let y = run1("GatherND", &[d.clone(), i64s(&[2, 2], &[0, 0, 1, 1])], &[]).unwrap();
    assert_eq!(y.as_slice::<i64>().unwrap(), &[0, 3]);
    let y = run1("GatherND", &[d.clone(), i64s(&[2, 1], &[1, 0])], &[]).unwrap();
    assert_eq!(
        (y.shape(), y.as_slice::<i64>().unwrap()),
        (&[2, 2][..], &[2, 3, 0, 1][..])
    );
    let d3 = i64s(&[2, 2, 2], &[0, 1, 2, 3, 4, 5, 6, 7]);
    let y = run1(
        "GatherND",
        &[d3, i64s(&[2, 1], &[1, 0])],
        &[("batch_dims", Attribute::Int(1))],
    )
    .unwrap();
    assert_eq!(y.as_slice::<i64>().unwrap(), &[2, 3, 4, 5]);
    assert!(run1("GatherND", &[d, i64s(&[1, 3], &[0, 0, 0])], &[]).is_err());
}

#[test]
fn scatter_nd_overwrites_and_reduces_in_update_order() {
    // ONNX doc example 1.
    let data = f32s(&[8], &[1., 2., 3., 4., 5., 6., 7., 8.]);
    let y = run1(
        "ScatterND",
        &[
            data,
            i64s(&[4, 1], &[4, 3, 1, 7]),
            f32s(&[4], &[9., 10., 11., 12.]),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(vals(&y), vec![1., 11., 3., 10., 9., 6., 7., 12.]);
    let data = i64s(&[4], &[1, 2, 3, 4]);
    let idx = i64s(&[2, 1], &[0, 0]);
    let upd = i64s(&[2], &[5, 6]);
    let reduce = |r: &str| {
        run1(
            "ScatterND",
            &[data.clone(), idx.clone(), upd.clone()],
            &[("reduction", Attribute::String(r.into()))],
        )
        .unwrap()
        .as_slice::<i64>()
        .unwrap()[0]
    };
    assert_eq!(
        [reduce("add"), reduce("mul"), reduce("max"), reduce("min")],
        [12, 30, 6, 1]
    );
    let e = run1(
        "ScatterND",
        &[data.clone(), i64s(&[1, 1], &[4]), i64s(&[1], &[0])],
        &[],
    )
    .unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
    let e = run1("ScatterND", &[data, idx, i64s(&[3], &[0, 0, 0])], &[]).unwrap_err();
    assert!(e.to_string().contains("updates"), "{e}");
}

#[test]
fn scatter_elements_and_legacy_scatter() {
    // ONNX doc example 2.
    let data = f32s(&[1, 5], &[1., 2., 3., 4., 5.]);
    let idx = i64s(&[1, 2], &[1, 3]);
    let upd = f32s(&[1, 2], &[1.1, 2.1]);
    let y = run1(
        "ScatterElements",
        &[data.clone(), idx.clone(), upd.clone()],
        &[axis(1)],
    )
    .unwrap();
    assert_eq!(vals(&y), vec![1., 1.1, 3., 2.1, 5.]);
    let y = run1(
        "ScatterElements",
        &[data.clone(), i64s(&[1, 2], &[1, 1]), upd.clone()],
        &[axis(1), ("reduction", Attribute::String("max".into()))],
    )
    .unwrap();
    assert_eq!(vals(&y), vec![1., 2.1, 3., 4., 5.]);
    let old = run_node_opset(
        "Scatter",
        9,
        &[Some(data.into()), Some(idx.into()), Some(upd.into())],
        &[axis(-1)],
        1,
    )
    .unwrap();
    assert_eq!(
        vals(old[0].as_tensor().unwrap()),
        vec![1., 1.1, 3., 2.1, 5.]
    );
}

/// Scatter max / min follow contract section `reduce-extrema`: `-0.0 < +0.0` whichever side
/// holds which zero, and a NaN on either side gives the canonical NaN.
#[test]
fn scatter_extrema_order_signed_zeros_and_canonicalize_nan() {
    let scatter = |data: &[f32], update: f32, reduction: &str| {
        let y = run1(
            "ScatterElements",
            &[
                f32s(&[data.len()], data),
                i64s(&[1], &[0]),
                f32s(&[1], &[update]),
            ],
            &[("reduction", Attribute::String(reduction.into()))],
        )
        .unwrap();
        vals(&y)[0].to_bits()
    };
    let payload_nan = f32::from_bits(0x7fc0_1234);
    for (data, update) in [(0.0f32, -0.0f32), (-0.0, 0.0)] {
        assert_eq!(scatter(&[data], update, "max"), 0.0f32.to_bits());
        assert_eq!(scatter(&[data], update, "min"), (-0.0f32).to_bits());
    }
    for (data, update) in [(payload_nan, 1.0), (1.0, payload_nan)] {
        assert_eq!(scatter(&[data], update, "max"), 0x7fc0_0000);
        assert_eq!(scatter(&[data], update, "min"), 0x7fc0_0000);
    }
}

#[test]
fn slice_clamps_steps_backwards_and_reads_old_attributes() {
    let x = f32s(&[2, 4], &[1., 2., 3., 4., 5., 6., 7., 8.]);
    // ONNX doc examples.
    let y = run1(
        "Slice",
        &[
            x.clone(),
            i64s(&[2], &[1, 0]),
            i64s(&[2], &[2, 3]),
            i64s(&[2], &[0, 1]),
            i64s(&[2], &[1, 2]),
        ],
        &[],
    )
    .unwrap();
    assert_eq!((y.shape(), vals(&y)), (&[1, 2][..], vec![5., 7.]));
    let y = run1(
        "Slice",
        &[x.clone(), i64s(&[2], &[0, 1]), i64s(&[2], &[-1, 1000])],
        &[],
    )
    .unwrap();
    assert_eq!(vals(&y), vec![2., 3., 4.]);
    // Backwards over everything: start clamps to n-1, end i64::MIN clamps to -1.
    let y = run1(
        "Slice",
        &[
            x.clone(),
            i64s(&[1], &[-1]),
            i64s(&[1], &[i64::MIN]),
            i64s(&[1], &[1]),
            i64s(&[1], &[-2]),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(vals(&y), vec![4., 2., 8., 6.]);
    let old = run_node_opset(
        "Slice",
        9,
        &[Some(x.clone().into())],
        &[
            ("starts", Attribute::Ints(vec![1])),
            ("ends", Attribute::Ints(vec![3])),
            ("axes", Attribute::Ints(vec![1])),
        ],
        1,
    )
    .unwrap();
    assert_eq!(vals(old[0].as_tensor().unwrap()), vec![2., 3., 6., 7.]);
    let e = run1(
        "Slice",
        &[
            x,
            i64s(&[1], &[0]),
            i64s(&[1], &[1]),
            i64s(&[1], &[0]),
            i64s(&[1], &[0]),
        ],
        &[],
    )
    .unwrap_err();
    assert!(e.to_string().contains("step is 0"), "{e}");
}

#[test]
fn trilu_keeps_a_triangle() {
    let x = i64s(&[3, 3], &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
    let up = run1("Trilu", std::slice::from_ref(&x), &[]).unwrap();
    assert_eq!(up.as_slice::<i64>().unwrap(), &[1, 2, 3, 0, 5, 6, 0, 0, 9]);
    let low = run1(
        "Trilu",
        &[x, i64s(&[], &[-1])],
        &[("upper", Attribute::Int(0))],
    )
    .unwrap();
    assert_eq!(low.as_slice::<i64>().unwrap(), &[0, 0, 0, 4, 0, 0, 7, 8, 0]);
}

#[test]
fn one_hot_wraps_negative_and_zeroes_out_of_range() {
    let values = f32s(&[2], &[0., 1.]);
    let y = run1(
        "OneHot",
        &[i64s(&[3], &[0, -1, 5]), i64s(&[], &[3]), values.clone()],
        &[],
    )
    .unwrap();
    assert_eq!(y.shape(), &[3, 3]);
    assert_eq!(vals(&y), vec![1., 0., 0., 0., 0., 1., 0., 0., 0.]);
    let y = run1(
        "OneHot",
        &[i64s(&[2], &[1, 0]), i64s(&[], &[2]), values],
        &[axis(0)],
    )
    .unwrap();
    assert_eq!(vals(&y), vec![0., 1., 1., 0.]);
}

#[test]
fn nonzero_compress_reverse_sequence() {
    // ONNX doc examples.
    let b = Tensor::from_bools(vec![2, 2], vec![true, false, true, true]).unwrap();
    let nz = run1("NonZero", &[b], &[]).unwrap();
    assert_eq!(
        (nz.shape(), nz.as_slice::<i64>().unwrap()),
        (&[2, 3][..], &[0, 1, 1, 0, 0, 1][..])
    );
    let x = f32s(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
    let cond = |v: &[bool]| Tensor::from_bools(vec![v.len()], v.to_vec()).unwrap();
    let y = run1(
        "Compress",
        &[x.clone(), cond(&[false, true, true])],
        &[axis(0)],
    )
    .unwrap();
    assert_eq!(vals(&y), vec![3., 4., 5., 6.]);
    let y = run1("Compress", &[x.clone(), cond(&[false, true])], &[axis(1)]).unwrap();
    assert_eq!(vals(&y), vec![2., 4., 6.]);
    let y = run1(
        "Compress",
        &[x.clone(), cond(&[false, true, false, false, true])],
        &[],
    )
    .unwrap();
    assert_eq!(vals(&y), vec![2., 5.]);
    assert!(run1("Compress", &[x, cond(&[true; 7])], &[]).is_err());

    let x = f32s(&[4, 4], &(0..16).map(|v| v as f32).collect::<Vec<_>>());
    let y = run1(
        "ReverseSequence",
        &[x.clone(), i64s(&[4], &[4, 3, 2, 1])],
        &[
            ("batch_axis", Attribute::Int(1)),
            ("time_axis", Attribute::Int(0)),
        ],
    )
    .unwrap();
    assert_eq!(
        vals(&y),
        vec![
            12., 9., 6., 3., 8., 5., 2., 7., 4., 1., 10., 11., 0., 13., 14., 15.
        ]
    );
    assert!(run1("ReverseSequence", &[x, i64s(&[4], &[5, 1, 1, 1])], &[]).is_err());
}

fn top_k(x: Tensor, k: i64, attrs: &[(&str, Attribute)]) -> (Tensor, Vec<i64>) {
    let out = run_node_opset(
        "TopK",
        11,
        &[Some(x.into()), Some(i64s(&[1], &[k]).into())],
        attrs,
        2,
    )
    .unwrap();
    let idx = out[1]
        .as_tensor()
        .unwrap()
        .as_slice::<i64>()
        .unwrap()
        .to_vec();
    (out[0].as_tensor().unwrap().clone(), idx)
}

#[test]
fn top_k_orders_ties_by_index_and_nan_highest() {
    // ONNX doc: 3x4 of 0..11, k = 3.
    let (v, i) = top_k(
        f32s(&[3, 4], &(0..12).map(|v| v as f32).collect::<Vec<_>>()),
        3,
        &[],
    );
    assert_eq!(vals(&v), vec![3., 2., 1., 7., 6., 5., 11., 10., 9.]);
    assert_eq!(i, vec![3, 2, 1, 3, 2, 1, 3, 2, 1]);
    let (v, i) = top_k(f32s(&[4], &[1., 3., 3., 2.]), 2, &[]);
    assert_eq!((vals(&v), i), (vec![3., 3.], vec![1, 2]));
    let (v, i) = top_k(f32s(&[3], &[1., f32::NAN, 5.]), 1, &[]);
    assert!(vals(&v)[0].is_nan() && i == vec![1]);
    let (v, i) = top_k(
        f32s(&[3], &[2., f32::NAN, 1.]),
        2,
        &[("largest", Attribute::Int(0))],
    );
    assert_eq!((vals(&v), i), (vec![1., 2.], vec![2, 0]));
    let (_, i) = top_k(f32s(&[2, 2], &[1., 4., 3., 2.]), 1, &[axis(0)]);
    assert_eq!(i, vec![1, 0]);
    let e = run_node_opset(
        "TopK",
        11,
        &[
            Some(f32s(&[2], &[1., 2.]).into()),
            Some(i64s(&[1], &[3]).into()),
        ],
        &[],
        2,
    )
    .unwrap_err();
    assert!(e.to_string().contains("K = 3"), "{e}");
}

fn unique(x: Tensor, attrs: &[(&str, Attribute)]) -> Vec<Value> {
    run_node_opset("Unique", 11, &[Some(x.into())], attrs, 4).unwrap()
}

fn i64_out(v: &Value) -> Vec<i64> {
    v.as_tensor().unwrap().as_slice::<i64>().unwrap().to_vec()
}

#[test]
fn unique_sorted_unsorted_and_along_an_axis() {
    // ONNX doc examples.
    let x = f32s(&[6], &[2., 1., 1., 3., 4., 3.]);
    let u = unique(x.clone(), &[("sorted", Attribute::Int(0))]);
    assert_eq!(vals(u[0].as_tensor().unwrap()), vec![2., 1., 3., 4.]);
    assert_eq!(i64_out(&u[1]), vec![0, 1, 3, 4]);
    assert_eq!(i64_out(&u[2]), vec![0, 1, 1, 2, 3, 2]);
    assert_eq!(i64_out(&u[3]), vec![1, 2, 2, 1]);
    let u = unique(x, &[]);
    assert_eq!(vals(u[0].as_tensor().unwrap()), vec![1., 2., 3., 4.]);
    assert_eq!(i64_out(&u[1]), vec![1, 0, 3, 4]);
    assert_eq!(i64_out(&u[2]), vec![1, 0, 0, 2, 3, 2]);
    assert_eq!(i64_out(&u[3]), vec![2, 1, 2, 1]);
    let rows = i64s(&[3, 3], &[1, 0, 0, 1, 0, 0, 2, 3, 4]);
    let u = unique(rows, &[axis(0)]);
    assert_eq!(u[0].as_tensor().unwrap().shape(), &[2, 3]);
    assert_eq!(i64_out(&u[0]), vec![1, 0, 0, 2, 3, 4]);
    assert_eq!(
        (i64_out(&u[1]), i64_out(&u[2]), i64_out(&u[3])),
        (vec![0, 2], vec![0, 0, 1], vec![2, 1])
    );
    let s = Tensor::from_strings(vec![3], ["b", "a", "b"].map(String::from).to_vec()).unwrap();
    let u = unique(s, &[]);
    assert_eq!(u[0].as_tensor().unwrap().as_strings().unwrap(), &["a", "b"]);
}
