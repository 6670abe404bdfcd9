//! RoiAlign: a hand-computed bilinear average and maximum, bits independent of the thread
//! count and of the batch (each region alone against its row among many), and bad inputs are
//! errors. (Values against ONNX's own test data: the conformance allowlist.)

mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};
use samebits_ops::OpError;

fn roi_align(
    x: &Tensor,
    rois: &[f32],
    batch: &[i64],
    attributes: &[(&str, Attribute)],
) -> Result<Tensor, OpError> {
    let inputs: Vec<Option<Value>> = vec![
        Some(x.clone().into()),
        Some(f32s(&[batch.len(), 4], rois).into()),
        Some(i64s(&[batch.len()], batch).into()),
    ];
    Ok(run_node_opset("RoiAlign", 16, &inputs, attributes, 1)?
        .remove(0)
        .into_tensor()?)
}

#[test]
fn one_bin_averages_or_maximizes_its_samples() {
    // A 2 x 2 image; the region (0, 0)-(2, 2) with half_pixel is [-0.5, 1.5] on each axis: one
    // bin, 2 x 2 samples at 0 and 1 (clamped and exact pixels): the mean of the four pixels.
    let x = f32s(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let y = roi_align(&x, &[0.0, 0.0, 2.0, 2.0], &[0], &[]).unwrap();
    assert_eq!(y.shape(), &[1, 1, 1, 1]);
    assert_eq!(y.as_slice::<f32>().unwrap(), [2.5]);
    let max = [("mode", Attribute::String("max".into()))];
    let y = roi_align(&x, &[0.0, 0.0, 2.0, 2.0], &[0], &max).unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), [4.0]);
    // One sample at the centre (0.5, 0.5) of the image: weights 1/4 each.
    let one = [("sampling_ratio", Attribute::Int(1))];
    let y = roi_align(&x, &[0.0, 0.0, 2.0, 2.0], &[0], &one).unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), [2.5]);
}

#[test]
fn bits_do_not_depend_on_threads_or_on_the_other_regions() {
    let (batch, channels, h, w) = (2, 3, 9, 11);
    let x = f32s(
        &[batch, channels, h, w],
        &pseudo_random(batch * channels * h * w, 31),
    );
    let rois = [
        0.5, 1.0, 7.25, 6.0, //
        2.0, 0.0, 10.0, 8.5, //
        -1.0, -2.0, 4.0, 3.0, //
        3.3, 2.2, 3.9, 2.8,
    ];
    let indices = [1i64, 0, 1, 0];
    let attributes = [
        ("output_height", Attribute::Int(3)),
        ("output_width", Attribute::Int(2)),
        ("spatial_scale", Attribute::Float(0.75)),
    ];
    for mode in ["avg", "max"] {
        let mut attributes = attributes.to_vec();
        attributes.push(("mode", Attribute::String(mode.into())));
        let one = with_threads(1, || roi_align(&x, &rois, &indices, &attributes).unwrap());
        let four = with_threads(4, || roi_align(&x, &rois, &indices, &attributes).unwrap());
        assert_eq!(bits(&one), bits(&four), "{mode}");
        let row = one.numel() / indices.len();
        assert!(bits(&one).iter().any(|&b| b != 0), "{mode}: all zero");
        for r in 0..indices.len() {
            let alone =
                roi_align(&x, &rois[r * 4..][..4], &indices[r..r + 1], &attributes).unwrap();
            assert_eq!(
                &bits(&one)[r * row..][..row],
                &bits(&alone)[..],
                "{mode} roi {r}"
            );
        }
    }
}

#[test]
fn bad_inputs_are_errors() {
    let x = f32s(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    assert!(roi_align(&x, &[0.0, 0.0, 1.0, 1.0], &[1], &[]).is_err());
    // A region needing more than 2^20 samples per bin.
    assert!(roi_align(&x, &[0.0, 0.0, 1e9, 1e9], &[0], &[]).is_err());
    let bad_mode = [("mode", Attribute::String("median".into()))];
    assert!(roi_align(&x, &[0.0, 0.0, 1.0, 1.0], &[0], &bad_mode).is_err());
    let flat = f32s(&[1, 4], &[1.0, 2.0, 3.0, 4.0]);
    assert!(roi_align(&flat, &[0.0, 0.0, 1.0, 1.0], &[0], &[]).is_err());
}
