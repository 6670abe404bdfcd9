//! Conv family: Conv, ConvTranspose, ConvInteger. Small cases are worked by hand on inputs of
//! ones or counting numbers (the sums are in the comments); reproducibility cases check that an
//! image's bits do not depend on the batch size or the thread count.
mod common;
use common::*;
use half::f16;
use samebits_ir::{Attribute, Tensor};

fn ints(v: &[i64]) -> Attribute {
    Attribute::Ints(v.to_vec())
}

fn text(s: &str) -> Attribute {
    Attribute::String(s.into())
}

#[test]
fn conv_2x2_ones_with_bias_by_hand() {
    // Input 0..8 as 3x3; each output is the sum of a 2x2 window plus the bias 1:
    // 0+1+3+4, 1+2+4+5, 3+4+6+7, 4+5+7+8.
    let x = f32s(&[1, 1, 3, 3], &[0., 1., 2., 3., 4., 5., 6., 7., 8.]);
    let w = f32s(&[1, 1, 2, 2], &[1.; 4]);
    let out = run1("Conv", &[x, w, f32s(&[1], &[1.])], &[]).unwrap();
    assert_eq!(out.shape(), &[1, 1, 2, 2]);
    assert_eq!(out.as_slice::<f32>().unwrap(), &[9., 13., 21., 25.]);
}

#[test]
fn conv_same_padding_puts_the_odd_pad_at_the_end_or_the_beginning() {
    // 4x4 ones, 3x3 ones, stride 2: two outputs per axis, one pad in total per axis.
    let x = f32s(&[1, 1, 4, 4], &[1.; 16]);
    let w = f32s(&[1, 1, 3, 3], &[1.; 9]);
    let strides = ("strides", ints(&[2, 2]));
    let upper = run1(
        "Conv",
        &[x.clone(), w.clone()],
        &[("auto_pad", text("SAME_UPPER")), strides.clone()],
    )
    .unwrap();
    // Pad after: windows rows/cols {0..2} and {2..4 with one padded}: 3x3, 3x2, 2x3, 2x2.
    assert_eq!(upper.as_slice::<f32>().unwrap(), &[9., 6., 6., 4.]);
    let lower = run1(
        "Conv",
        &[x, w],
        &[("auto_pad", text("SAME_LOWER")), strides],
    )
    .unwrap();
    assert_eq!(lower.as_slice::<f32>().unwrap(), &[4., 6., 6., 9.]);
}

#[test]
fn conv_groups_dilations_and_1d() {
    // Depthwise: each channel scaled by its own 1x1 weight.
    let x = f32s(&[1, 2, 1, 2], &[1., 2., 3., 4.]);
    let w = f32s(&[2, 1, 1, 1], &[2., 3.]);
    let out = run1("Conv", &[x, w], &[("group", Attribute::Int(2))]).unwrap();
    assert_eq!(out.as_slice::<f32>().unwrap(), &[2., 4., 9., 12.]);
    // 1-D, dilation 2: y[o] = x[o] + x[o + 2].
    let x = f32s(&[1, 1, 5], &[1., 2., 4., 8., 16.]);
    let w = f32s(&[1, 1, 2], &[1., 1.]);
    let out = run1("Conv", &[x, w], &[("dilations", ints(&[2]))]).unwrap();
    assert_eq!(out.as_slice::<f32>().unwrap(), &[5., 10., 20.]);
}

#[test]
fn conv_f16_rounds_once_at_the_store() {
    // 1 + 2^-11 + 2^-11 = 1 + 2^-10 exactly in f32, one f16 ulp above 1.
    let x: Vec<f16> = [1.0, 1.0 / 2048.0, 1.0 / 2048.0]
        .map(f16::from_f32)
        .to_vec();
    let w: Vec<f16> = [1.0f32; 3].map(f16::from_f32).to_vec();
    let out = run1(
        "Conv",
        &[
            Tensor::from_vec(vec![1, 3, 1], x).unwrap(),
            Tensor::from_vec(vec![1, 3, 1], w).unwrap(),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(
        out.as_slice::<f16>().unwrap(),
        &[f16::from_f32(1.0 + 1.0 / 1024.0)]
    );
}

#[test]
fn conv_transpose_strides_output_padding_and_output_shape() {
    let x = f32s(&[1, 1, 2], &[1., 2.]);
    let w = f32s(&[1, 1, 2], &[1., 1.]);
    // Stride 1: [1, 1+2, 2].
    let out = run1("ConvTranspose", &[x.clone(), w.clone()], &[]).unwrap();
    assert_eq!(out.as_slice::<f32>().unwrap(), &[1., 3., 2.]);
    // Stride 2: each input spreads over its own two outputs; output_padding adds a zero.
    let strided = [("strides", ints(&[2])), ("output_padding", ints(&[1]))];
    let out = run1("ConvTranspose", &[x.clone(), w.clone()], &strided).unwrap();
    assert_eq!(out.as_slice::<f32>().unwrap(), &[1., 1., 2., 2., 0.]);
    // output_shape 2 of the natural 3 (stride 1): total pad 1, at the beginning (NOTSET).
    let out = run1("ConvTranspose", &[x, w], &[("output_shape", ints(&[2]))]).unwrap();
    assert_eq!(out.as_slice::<f32>().unwrap(), &[3., 2.]);
}

#[test]
fn conv_integer_subtracts_zero_points() {
    // (x - 1) * 2.
    let x = Tensor::from_vec(vec![1, 1, 2, 2], vec![1u8, 2, 3, 4]).unwrap();
    let w = Tensor::from_vec(vec![1, 1, 1, 1], vec![2u8]).unwrap();
    let zero = Tensor::from_vec(vec![], vec![1u8]).unwrap();
    let out = run1("ConvInteger", &[x, w, zero], &[]).unwrap();
    assert_eq!(out.as_slice::<i32>().unwrap(), &[0, 2, 4, 6]);
}

#[test]
fn conv_errors_name_the_problem() {
    let x = f32s(&[1, 2, 3, 3], &[0.; 18]);
    let e = run1("Conv", &[x.clone(), f32s(&[1, 3, 1, 1], &[0.; 3])], &[]).unwrap_err();
    assert!(e.to_string().contains("group = 1"), "{e}");
    let w = f32s(&[1, 2, 2, 2], &[0.; 8]);
    let e = run1(
        "Conv",
        &[x.clone(), w.clone()],
        &[("kernel_shape", ints(&[3, 3]))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("kernel_shape"), "{e}");
    let e = run1(
        "Conv",
        &[x.clone(), w.clone()],
        &[("dilations", ints(&[4, 4]))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("exceeds the padded input"), "{e}");
    let e = run1(
        "Conv",
        &[x.clone(), w.clone()],
        &[("strides", ints(&[0, 1]))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("\"strides\""), "{e}");
    let e = run1("Conv", &[x, w], &[("pads", ints(&[1, 1]))]).unwrap_err();
    assert!(e.to_string().contains("\"pads\" needs 4 values"), "{e}");
}

#[test]
fn conv_infers_output_shapes() {
    let shape = infer_shape(
        "Conv",
        &[&[2, 3, 10, 9], &[8, 3, 3, 3]],
        &[("strides", ints(&[2, 2])), ("pads", ints(&[1, 1, 1, 1]))],
    )
    .unwrap();
    assert_eq!(shape, Some(vec![2, 8, 5, 5]));
    let shape = infer_shape("ConvTranspose", &[&[1, 4, 5, 5], &[4, 2, 3, 3]], &[]).unwrap();
    assert_eq!(shape, Some(vec![1, 2, 7, 7]));
}

#[test]
fn conv_images_do_not_depend_on_batch_or_threads() {
    let (c, m, hw) = (16, 12, 10);
    let image_len = c * hw * hw;
    let data = pseudo_random(8 * image_len, 11);
    let w = f32s(&[m, c, 3, 3], &pseudo_random(m * c * 9, 12));
    let bias = f32s(&[m], &pseudo_random(m, 13));
    let attrs = [("pads", ints(&[1, 1, 1, 1]))];
    let conv = |batch: usize| {
        let x = f32s(&[batch, c, hw, hw], &data[..batch * image_len]);
        bits(&run1("Conv", &[x, w.clone(), bias.clone()], &attrs).unwrap())
    };
    let one = conv(1);
    assert_eq!(conv(8)[..one.len()], one[..]);
    for threads in [1, 2] {
        assert_eq!(with_threads(threads, || conv(8))[..one.len()], one[..]);
    }
    let wt = f32s(&[c, m, 3, 3], &pseudo_random(m * c * 9, 14));
    let transpose = |batch: usize| {
        let x = f32s(&[batch, c, hw, hw], &data[..batch * image_len]);
        let attrs = [("strides", ints(&[2, 2]))];
        bits(&run1("ConvTranspose", &[x, wt.clone()], &attrs).unwrap())
    };
    let one = transpose(1);
    assert_eq!(transpose(8)[..one.len()], one[..]);
    assert_eq!(with_threads(2, || transpose(8))[..one.len()], one[..]);
}
