//! Shape family. Expected values come from the ONNX operator documentation's examples where
//! noted, otherwise from working the index arithmetic by hand.
mod common;
use common::*;
use half::f16;
use samebits_ir::{Attribute, Tensor, Value};

fn iota(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    f32s(shape, &(0..n).map(|v| v as f32).collect::<Vec<_>>())
}

fn ints(v: &[i64]) -> Attribute {
    Attribute::Ints(v.to_vec())
}

#[test]
fn reshape_copies_zero_dims_and_infers_minus_one() {
    let x = iota(&[2, 3, 4]);
    let y = run1("Reshape", &[x.clone(), i64s(&[2], &[0, -1])], &[]).unwrap();
    assert_eq!(y.shape(), &[2, 12]);
    assert_eq!(y.as_slice::<f32>().unwrap()[13], 13.0);
    let e = run1("Reshape", &[x.clone(), i64s(&[2], &[-1, -1])], &[]).unwrap_err();
    assert!(e.to_string().contains("more than one -1"), "{e}");
    let e = run1("Reshape", &[x, i64s(&[2], &[5, 5])], &[]).unwrap_err();
    assert!(e.to_string().contains("cannot reshape"), "{e}");
    // allowzero=1 keeps a literal 0 (ONNX doc: reshaping an empty tensor).
    let e = run1(
        "Reshape",
        &[f32s(&[0, 3], &[]), i64s(&[2], &[0, -1])],
        &[("allowzero", Attribute::Int(1))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("allowzero"), "{e}");
    let y = run1(
        "Reshape",
        &[f32s(&[0, 3], &[]), i64s(&[2], &[3, 0])],
        &[("allowzero", Attribute::Int(1))],
    )
    .unwrap();
    assert_eq!(y.shape(), &[3, 0]);
}

#[test]
fn shape_and_size() {
    let x = iota(&[2, 3, 4, 5]);
    let s = run1("Shape", std::slice::from_ref(&x), &[]).unwrap();
    assert_eq!(s.as_slice::<i64>().unwrap(), &[2, 3, 4, 5]);
    // ONNX doc: start=-3 → [3, 4, 5]; end=-1 drops the last.
    let s = run1(
        "Shape",
        std::slice::from_ref(&x),
        &[("start", Attribute::Int(-3)), ("end", Attribute::Int(-1))],
    )
    .unwrap();
    assert_eq!(s.as_slice::<i64>().unwrap(), &[3, 4]);
    let s = run1(
        "Shape",
        std::slice::from_ref(&x),
        &[("start", Attribute::Int(10))],
    )
    .unwrap();
    assert_eq!(s.shape(), &[0]);
    let n = run1("Size", &[x], &[]).unwrap();
    assert_eq!(
        (n.shape(), n.as_slice::<i64>().unwrap()),
        (&[][..], &[120][..])
    );
}

#[test]
fn squeeze_and_unsqueeze_by_input_and_attribute() {
    let x = iota(&[1, 3, 1, 2]);
    let y = run1("Squeeze", std::slice::from_ref(&x), &[]).unwrap();
    assert_eq!(y.shape(), &[3, 2]);
    let y = run1("Squeeze", &[x.clone(), i64s(&[1], &[-2])], &[]).unwrap();
    assert_eq!(y.shape(), &[1, 3, 2]);
    let e = run1("Squeeze", &[x.clone(), i64s(&[1], &[1])], &[]).unwrap_err();
    assert!(e.to_string().contains("size is not 1"), "{e}");
    let y = run1("Unsqueeze", &[iota(&[3, 2]), i64s(&[2], &[0, -1])], &[]).unwrap();
    assert_eq!(y.shape(), &[1, 3, 2, 1]);
    let old = run_node_opset(
        "Unsqueeze",
        11,
        &[Some(iota(&[3]).into())],
        &[("axes", ints(&[1]))],
        1,
    )
    .unwrap();
    assert_eq!(old[0].as_tensor().unwrap().shape(), &[3, 1]);
    let e = run1("Unsqueeze", &[iota(&[3]), i64s(&[2], &[0, 0])], &[]).unwrap_err();
    assert!(e.to_string().contains("twice"), "{e}");
}

#[test]
fn flatten_around_axis() {
    let x = iota(&[2, 3, 4]);
    let y = run1(
        "Flatten",
        std::slice::from_ref(&x),
        &[("axis", Attribute::Int(-1))],
    )
    .unwrap();
    assert_eq!(y.shape(), &[6, 4]);
    let y = run1(
        "Flatten",
        std::slice::from_ref(&x),
        &[("axis", Attribute::Int(0))],
    )
    .unwrap();
    assert_eq!(y.shape(), &[1, 24]);
    assert!(run1("Flatten", &[x], &[("axis", Attribute::Int(4))]).is_err());
}

#[test]
fn expand_broadcasts_both_ways() {
    // ONNX doc: [3, 1] expanded by [2, 1, 6] gives [2, 3, 6].
    let x = f32s(&[3, 1], &[1., 2., 3.]);
    let y = run1("Expand", &[x.clone(), i64s(&[3], &[2, 1, 6])], &[]).unwrap();
    assert_eq!(y.shape(), &[2, 3, 6]);
    let v = y.as_slice::<f32>().unwrap();
    assert_eq!(&v[..7], &[1., 1., 1., 1., 1., 1., 2.]);
    assert_eq!(v[35], 3.);
    assert!(run1("Expand", &[x, i64s(&[2], &[2, 1])], &[]).is_err());
}

#[test]
fn transpose_moves_any_dtype() {
    let x = Tensor::from_vec(
        vec![2, 3],
        [1., 2., 3., 4., 5., 6.].map(f16::from_f32).to_vec(),
    )
    .unwrap();
    let y = run1("Transpose", &[x], &[]).unwrap();
    assert_eq!(y.shape(), &[3, 2]);
    let got: Vec<f32> = y
        .as_slice::<f16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(got, vec![1., 4., 2., 5., 3., 6.]);
    let s =
        Tensor::from_strings(vec![2, 2], ["a", "b", "c", "d"].map(String::from).to_vec()).unwrap();
    let t = run1("Transpose", &[s], &[("perm", ints(&[1, 0]))]).unwrap();
    assert_eq!(t.as_strings().unwrap(), &["a", "c", "b", "d"]);
    let e = run1("Transpose", &[iota(&[2, 3])], &[("perm", ints(&[0, 0]))]).unwrap_err();
    assert!(e.to_string().contains("perm"), "{e}");
}

#[test]
fn transpose_of_a_large_3d_tensor_matches_index_arithmetic() {
    let (a, b, c) = (37, 50, 3);
    let x = iota(&[a, b, c]);
    let y = run1("Transpose", &[x], &[("perm", ints(&[2, 0, 1]))]).unwrap();
    assert_eq!(y.shape(), &[c, a, b]);
    let v = y.as_slice::<f32>().unwrap();
    for k in 0..c {
        for i in 0..a {
            for j in 0..b {
                assert_eq!(v[(k * a + i) * b + j], ((i * b + j) * c + k) as f32);
            }
        }
    }
}

#[test]
fn concat_along_negative_axis_and_mismatch() {
    let y = run1(
        "Concat",
        &[iota(&[2, 1]), f32s(&[2, 2], &[7., 8., 9., 10.])],
        &[("axis", Attribute::Int(-1))],
    )
    .unwrap();
    assert_eq!(y.shape(), &[2, 3]);
    assert_eq!(y.as_slice::<f32>().unwrap(), &[0., 7., 8., 1., 9., 10.]);
    let e = run1(
        "Concat",
        &[iota(&[2, 1]), iota(&[3, 1])],
        &[("axis", Attribute::Int(1))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("does not match"), "{e}");
}

fn split(
    opset: i64,
    inputs: Vec<Option<Value>>,
    attrs: &[(&str, Attribute)],
    n: usize,
) -> Vec<Vec<f32>> {
    run_node_opset("Split", opset, &inputs, attrs, n)
        .unwrap()
        .into_iter()
        .map(|v| v.as_tensor().unwrap().as_slice::<f32>().unwrap().to_vec())
        .collect()
}

#[test]
fn split_by_sizes_equal_parts_and_num_outputs() {
    let x = Some(iota(&[7]).into());
    assert_eq!(
        split(
            13,
            vec![x.clone(), Some(i64s(&[2], &[3, 4]).into())],
            &[],
            2
        ),
        vec![vec![0., 1., 2.], vec![3., 4., 5., 6.]]
    );
    assert_eq!(
        split(11, vec![x.clone()], &[("split", ints(&[6, 1]))], 2),
        vec![vec![0., 1., 2., 3., 4., 5.], vec![6.]]
    );
    // ONNX doc (opset 18): 7 elements in 3 outputs → chunks of ceil(7/3) = 3, the last 1.
    assert_eq!(
        split(
            18,
            vec![x.clone()],
            &[("num_outputs", Attribute::Int(3))],
            3
        ),
        vec![vec![0., 1., 2.], vec![3., 4., 5.], vec![6.]]
    );
    assert!(run_node_opset("Split", 13, &[x], &[], 2).is_err());
    let rows = split(
        13,
        vec![Some(iota(&[2, 2]).into())],
        &[("axis", Attribute::Int(1))],
        2,
    );
    assert_eq!(rows, vec![vec![0., 2.], vec![1., 3.]]);
}

#[test]
fn tile_repeats_each_axis() {
    let y = run1("Tile", &[iota(&[2, 2]), i64s(&[2], &[2, 2])], &[]).unwrap();
    assert_eq!(y.shape(), &[4, 4]);
    assert_eq!(
        y.as_slice::<f32>().unwrap(),
        &[
            0., 1., 0., 1., 2., 3., 2., 3., 0., 1., 0., 1., 2., 3., 2., 3.
        ]
    );
    assert!(run1("Tile", &[iota(&[2, 2]), i64s(&[1], &[2])], &[]).is_err());
}

fn pad(mode: &str, pads: &[i64], value: Option<f32>) -> Tensor {
    // ONNX doc example input.
    let x = f32s(&[3, 2], &[1.0, 1.2, 2.3, 3.4, 4.5, 5.7]);
    let mut inputs = vec![x, i64s(&[pads.len()], pads)];
    inputs.extend(value.map(|v| f32s(&[], &[v])));
    run1("Pad", &inputs, &[("mode", Attribute::String(mode.into()))]).unwrap()
}

#[test]
fn pad_modes_match_the_onnx_examples() {
    let c = pad("constant", &[0, 2, 0, 0], Some(0.0));
    assert_eq!(
        c.as_slice::<f32>().unwrap(),
        &[0., 0., 1.0, 1.2, 0., 0., 2.3, 3.4, 0., 0., 4.5, 5.7]
    );
    let r = pad("reflect", &[0, 2, 0, 0], None);
    assert_eq!(
        r.as_slice::<f32>().unwrap(),
        &[1.0, 1.2, 1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7, 4.5, 5.7]
    );
    let e = pad("edge", &[0, 2, 0, 0], None);
    assert_eq!(
        e.as_slice::<f32>().unwrap(),
        &[1.0, 1.0, 1.0, 1.2, 2.3, 2.3, 2.3, 3.4, 4.5, 4.5, 4.5, 5.7]
    );
    let w = pad("wrap", &[2, 1, 1, 1], None);
    assert_eq!(w.shape(), &[6, 4]);
    assert_eq!(
        &w.as_slice::<f32>().unwrap()[..8],
        &[3.4, 2.3, 3.4, 2.3, 5.7, 4.5, 5.7, 4.5]
    );
    let crop = pad("constant", &[-1, 0, 0, 1], Some(9.0));
    assert_eq!(
        crop.as_slice::<f32>().unwrap(),
        &[2.3, 3.4, 9., 4.5, 5.7, 9.]
    );
}

#[test]
fn pad_with_axes_and_the_old_attribute_form() {
    let y = run_node_opset(
        "Pad",
        18,
        &[
            Some(iota(&[2, 2]).into()),
            Some(i64s(&[2], &[1, 0]).into()),
            Some(f32s(&[], &[5.]).into()),
            Some(i64s(&[1], &[-1]).into()),
        ],
        &[],
        1,
    )
    .unwrap();
    let y = y[0].as_tensor().unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), &[5., 0., 1., 5., 2., 3.]);
    let y = run_node_opset(
        "Pad",
        2,
        &[Some(iota(&[2]).into())],
        &[("pads", ints(&[1, 1])), ("value", Attribute::Float(-1.0))],
        1,
    )
    .unwrap();
    assert_eq!(
        y[0].as_tensor().unwrap().as_slice::<f32>().unwrap(),
        &[-1., 0., 1., -1.]
    );
    let e = run1("Pad", &[iota(&[2]), i64s(&[1], &[1])], &[]).unwrap_err();
    assert!(e.to_string().contains("pads"), "{e}");
}

#[test]
fn depth_to_space_orders_and_space_to_depth_inverts_dcr() {
    // Channels c = 0..8, blocksize 2, one output channel pair: worked by hand from the ONNX
    // definitions. DCR: out[c][i][j] = x[(i*2 + j)*2 + c]; CRD: out[c][i][j] = x[c*4 + i*2 + j].
    let x = iota(&[1, 8, 1, 1]);
    let b = [("blocksize", Attribute::Int(2))];
    let dcr = run1("DepthToSpace", std::slice::from_ref(&x), &b).unwrap();
    assert_eq!(dcr.shape(), &[1, 2, 2, 2]);
    assert_eq!(
        dcr.as_slice::<f32>().unwrap(),
        &[0., 2., 4., 6., 1., 3., 5., 7.]
    );
    let crd = run1(
        "DepthToSpace",
        std::slice::from_ref(&x),
        &[b[0].clone(), ("mode", Attribute::String("CRD".into()))],
    )
    .unwrap();
    assert_eq!(
        crd.as_slice::<f32>().unwrap(),
        &[0., 1., 2., 3., 4., 5., 6., 7.]
    );
    let big = iota(&[2, 8, 3, 5]);
    let there = run1("DepthToSpace", std::slice::from_ref(&big), &b).unwrap();
    assert_eq!(there.shape(), &[2, 2, 6, 10]);
    let back = run1("SpaceToDepth", &[there], &b).unwrap();
    assert_eq!(back, big);
    assert!(run1("DepthToSpace", &[iota(&[1, 6, 1, 1])], &b).is_err());
    assert!(run1("SpaceToDepth", &[iota(&[1, 1, 3, 2])], &b).is_err());
}

#[test]
fn center_crop_pad_centers_with_the_extra_element_last() {
    // iota [2, 5]: rows 0..5 and 5..10. Axis 1 cropped to 2: (5 - 2) / 2 = 1 dropped before,
    // 2 after; axis 0 padded to 5: (5 - 2) / 2 = 1 zero row before, 2 after.
    let y = run1("CenterCropPad", &[iota(&[2, 5]), i64s(&[2], &[5, 2])], &[]).unwrap();
    assert_eq!(y.shape(), &[5, 2]);
    assert_eq!(
        y.as_slice::<f32>().unwrap(),
        &[0., 0., 1., 2., 6., 7., 0., 0., 0., 0.]
    );
    // With axes: only axis 1, cropped to 4 (one element dropped, at the end).
    let y = run1(
        "CenterCropPad",
        &[iota(&[2, 5]), i64s(&[1], &[4])],
        &[("axes", ints(&[-1]))],
    )
    .unwrap();
    assert_eq!(
        y.as_slice::<f32>().unwrap(),
        &[0., 1., 2., 3., 5., 6., 7., 8.]
    );
    assert!(run1("CenterCropPad", &[iota(&[2, 5]), i64s(&[1], &[4])], &[]).is_err());
}
