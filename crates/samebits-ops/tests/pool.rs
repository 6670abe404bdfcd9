//! Pool family: MaxPool (with Indices), AveragePool, LpPool and the global pools, on small
//! inputs of counting numbers or ones whose results are worked out in the comments.
mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};

fn ints(v: &[i64]) -> Attribute {
    Attribute::Ints(v.to_vec())
}

fn counting(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    f32s(shape, &(0..n).map(|v| v as f32).collect::<Vec<_>>())
}

fn max_pool_with_indices(x: Tensor, attrs: &[(&str, Attribute)]) -> (Tensor, Vec<i64>) {
    let out = run_node_opset("MaxPool", 21, &[Some(x.into())], attrs, 2).unwrap();
    let [values, indices]: [Value; 2] = out.try_into().unwrap();
    let indices = indices
        .into_tensor()
        .unwrap()
        .as_slice::<i64>()
        .unwrap()
        .to_vec();
    (values.into_tensor().unwrap(), indices)
}

#[test]
fn max_pool_values_and_indices_in_both_storage_orders() {
    // 4x4 counting numbers, 2x2 windows, stride 2: each window's maximum is its bottom right.
    let attrs = [("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))];
    let (values, indices) = max_pool_with_indices(counting(&[1, 1, 4, 4]), &attrs);
    assert_eq!(values.as_slice::<f32>().unwrap(), &[5., 7., 13., 15.]);
    assert_eq!(indices, vec![5, 7, 13, 15]);
    // Column-major: (h, w) is h + 4 * w; a second channel adds the plane size 16.
    let mut attrs = attrs.to_vec();
    attrs.push(("storage_order", Attribute::Int(1)));
    let (_, indices) = max_pool_with_indices(counting(&[1, 2, 4, 4]), &attrs);
    assert_eq!(indices, vec![5, 13, 7, 15, 21, 29, 23, 31]);
}

#[test]
fn max_pool_nan_wins_and_u8_is_exact() {
    let x = f32s(&[1, 1, 3], &[1., f32::NAN, 3.]);
    let (values, indices) = max_pool_with_indices(x, &[("kernel_shape", ints(&[3]))]);
    assert!(values.as_slice::<f32>().unwrap()[0].is_nan());
    assert_eq!(indices, vec![1]);
    let x = Tensor::from_vec(vec![1, 1, 4], vec![200u8, 255, 3, 7]).unwrap();
    let attrs = [("kernel_shape", ints(&[2])), ("strides", ints(&[2]))];
    let out = run1("MaxPool", &[x], &attrs).unwrap();
    assert_eq!(out.as_slice::<u8>().unwrap(), &[255, 7]);
}

#[test]
fn average_pool_counts_padding_only_when_asked() {
    // 2x2 ones padded by 1: corner windows hold one input tap, the centre four.
    let x = f32s(&[1, 1, 2, 2], &[1.; 4]);
    let attrs = [
        ("kernel_shape", ints(&[2, 2])),
        ("pads", ints(&[1, 1, 1, 1])),
    ];
    let out = run1("AveragePool", std::slice::from_ref(&x), &attrs).unwrap();
    assert_eq!(out.shape(), &[1, 1, 3, 3]);
    assert_eq!(out.as_slice::<f32>().unwrap(), &[1.; 9]);
    let mut attrs = attrs.to_vec();
    attrs.push(("count_include_pad", Attribute::Int(1)));
    let out = run1("AveragePool", &[x], &attrs).unwrap();
    // Corners 1/4, edges 2/4, centre 4/4.
    assert_eq!(
        out.as_slice::<f32>().unwrap(),
        &[0.25, 0.5, 0.25, 0.5, 1., 0.5, 0.25, 0.5, 0.25]
    );
}

#[test]
fn average_pool_ceil_mode_keeps_the_partial_window() {
    // 0..4, windows of 2, stride 2, ceil: (0+1)/2, (2+3)/2, 4/1.
    let attrs = [
        ("kernel_shape", ints(&[2])),
        ("strides", ints(&[2])),
        ("ceil_mode", Attribute::Int(1)),
    ];
    let out = run1("AveragePool", &[counting(&[1, 1, 5])], &attrs).unwrap();
    assert_eq!(out.as_slice::<f32>().unwrap(), &[0.5, 2.5, 4.]);
}

#[test]
fn lp_pool_norms() {
    let x = f32s(&[1, 1, 2], &[-3., 4.]);
    let lp = |p: i64| {
        let attrs = [("kernel_shape", ints(&[2])), ("p", Attribute::Int(p))];
        run1("LpPool", std::slice::from_ref(&x), &attrs)
            .unwrap()
            .as_slice::<f32>()
            .unwrap()[0]
    };
    assert_eq!(lp(1), 7.);
    assert_eq!(lp(2), 5.);
    // 27 + 64 = 91, then the correctly rounded cube root.
    assert_eq!(lp(3), samebits_math::cbrt(91.));
    // 81 + 256 = 337, then exp(log(337) / 4).
    assert_eq!(lp(4), samebits_math::exp(samebits_math::log(337.) / 4.));
    let global = run1("GlobalLpPool", &[x], &[]).unwrap();
    assert_eq!(global.shape(), &[1, 1, 1]);
    assert_eq!(global.as_slice::<f32>().unwrap(), &[5.]);
}

#[test]
fn global_pools_reduce_whole_planes() {
    let x = counting(&[1, 2, 2, 2]);
    let avg = run1("GlobalAveragePool", std::slice::from_ref(&x), &[]).unwrap();
    assert_eq!(avg.shape(), &[1, 2, 1, 1]);
    // (0+1+2+3)/4, (4+5+6+7)/4.
    assert_eq!(avg.as_slice::<f32>().unwrap(), &[1.5, 5.5]);
    let max = run1("GlobalMaxPool", &[x], &[]).unwrap();
    assert_eq!(max.as_slice::<f32>().unwrap(), &[3., 7.]);
}

#[test]
fn pool_errors_and_inference() {
    let e = run1("MaxPool", &[counting(&[1, 1, 4])], &[]).unwrap_err();
    assert!(e.to_string().contains("kernel_shape"), "{e}");
    let e = run1(
        "AveragePool",
        &[counting(&[4, 4])],
        &[("kernel_shape", ints(&[2]))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("rank 3 to 5"), "{e}");
    let e = run1(
        "MaxPool",
        &[counting(&[1, 1, 2])],
        &[("kernel_shape", ints(&[3]))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("exceeds the padded input"), "{e}");
    let e = run1(
        "LpPool",
        &[counting(&[1, 1, 2])],
        &[("kernel_shape", ints(&[1])), ("p", Attribute::Int(0))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("\"p\""), "{e}");
    let attrs = [
        ("kernel_shape", ints(&[3, 3])),
        ("strides", ints(&[2, 2])),
        ("auto_pad", Attribute::String("SAME_UPPER".into())),
    ];
    let shape = infer_shape("MaxPool", &[&[1, 3, 7, 8]], &attrs).unwrap();
    assert_eq!(shape, Some(vec![1, 3, 4, 4]));
    let shape = infer_shape("GlobalAveragePool", &[&[2, 3, 7, 8]], &[]).unwrap();
    assert_eq!(shape, Some(vec![2, 3, 1, 1]));
}

#[test]
fn max_unpool_scatters_into_the_unpooled_shape() {
    // ONNX operator documentation example: 2x2 pooled values of a 4x4 input (kernel 2, stride 2).
    let x = f32s(&[1, 1, 2, 2], &[5., 6., 7., 8.]);
    let i = i64s(&[1, 1, 2, 2], &[5, 7, 13, 15]);
    let attrs = [("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))];
    let y = run1("MaxUnpool", &[x.clone(), i.clone()], &attrs).unwrap();
    assert_eq!(y.shape(), &[1, 1, 4, 4]);
    let mut expect = [0.0f32; 16];
    (expect[5], expect[7], expect[13], expect[15]) = (5., 6., 7., 8.);
    assert_eq!(y.as_slice::<f32>().unwrap(), &expect[..]);
    // With output_shape 5x5 the 4x4 result is padded at the end of each axis.
    let y = run1(
        "MaxUnpool",
        &[x.clone(), i.clone(), i64s(&[4], &[1, 1, 5, 5])],
        &attrs,
    )
    .unwrap();
    let y = y.as_slice::<f32>().unwrap();
    assert_eq!((y[6], y[8], y[16], y[18]), (5., 6., 7., 8.));
    assert_eq!(y.iter().filter(|&&v| v != 0.0).count(), 4);
    // An index outside the unpooled tensor is an error.
    let bad = i64s(&[1, 1, 2, 2], &[5, 7, 13, 16]);
    assert!(run1("MaxUnpool", &[x, bad], &attrs).is_err());
}
