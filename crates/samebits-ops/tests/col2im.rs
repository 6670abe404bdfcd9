//! Col2Im: overlapping blocks add up in block-position order, bits do not depend on the thread
//! count or on the batch, and inconsistent shapes are errors. (Values against ONNX's own test
//! data: the conformance allowlist.)

mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};
use samebits_ops::OpError;

fn col2im(
    x: &Tensor,
    image: &[i64],
    block: &[i64],
    attributes: &[(&str, Attribute)],
) -> Result<Tensor, OpError> {
    let inputs: Vec<Option<Value>> = vec![
        Some(x.clone().into()),
        Some(i64s(&[image.len()], image).into()),
        Some(i64s(&[block.len()], block).into()),
    ];
    Ok(run_node_opset("Col2Im", 18, &inputs, attributes, 1)?
        .remove(0)
        .into_tensor()?)
}

#[test]
fn overlapping_blocks_add_up() {
    // Image [1, 5], block [1, 2], stride 1: 4 positions; pixel p takes column (b=0, l=p) and
    // column (b=1, l=p-1).
    let x = f32s(&[1, 2, 4], &[1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0, 40.0]);
    let y = col2im(&x, &[1, 5], &[1, 2], &[]).unwrap();
    assert_eq!(y.shape(), &[1, 1, 1, 5]);
    assert_eq!(y.as_slice::<f32>().unwrap(), [1.0, 12.0, 23.0, 34.0, 40.0]);
    // Stride 2 and one pad each side: positions at -1, 1, 3 cover pixels (-1, 0), (1, 2), (3, 4).
    let x = f32s(&[1, 2, 3], &[1.0, 2.0, 3.0, 10.0, 20.0, 30.0]);
    let attributes = [
        ("strides", Attribute::Ints(vec![1, 2])),
        ("pads", Attribute::Ints(vec![0, 1, 0, 1])),
    ];
    let y = col2im(&x, &[1, 5], &[1, 2], &attributes).unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), [10.0, 2.0, 20.0, 3.0, 30.0]);
}

#[test]
fn bits_do_not_depend_on_threads_or_batch() {
    const BATCH: usize = 3;
    let attributes = [
        ("dilations", Attribute::Ints(vec![2, 1])),
        ("strides", Attribute::Ints(vec![1, 2])),
        ("pads", Attribute::Ints(vec![1, 0, 1, 1])),
    ];
    // Axis 0: 6 + 2 - 5 + 1 = 4 positions; axis 1: (7 + 1 - 2) / 2 + 1 = 4 positions.
    let (channels, block, positions) = (2, 6, 16);
    let per_item = channels * block * positions;
    let data = pseudo_random(BATCH * per_item, 21);
    let x = f32s(&[BATCH, channels * block, positions], &data);
    let one = with_threads(1, || col2im(&x, &[6, 7], &[3, 2], &attributes).unwrap());
    let four = with_threads(4, || col2im(&x, &[6, 7], &[3, 2], &attributes).unwrap());
    assert_eq!(one.shape(), &[BATCH, channels, 6, 7]);
    assert_eq!(bits(&one), bits(&four));
    let row = one.numel() / BATCH;
    for b in 0..BATCH {
        let alone = f32s(
            &[1, channels * block, positions],
            &data[b * per_item..][..per_item],
        );
        let single = col2im(&alone, &[6, 7], &[3, 2], &attributes).unwrap();
        assert_eq!(
            &bits(&one)[b * row..][..row],
            &bits(&single)[..],
            "item {b}"
        );
    }
}

#[test]
fn inconsistent_shapes_are_errors() {
    let x = f32s(&[1, 2, 4], &[0.0; 8]);
    // 5 positions expected for image 6 and block 2, not 4.
    assert!(col2im(&x, &[1, 6], &[1, 2], &[]).is_err());
    // Block larger than the image.
    assert!(col2im(&x, &[1, 1], &[1, 2], &[]).is_err());
    // Mismatched lengths, zero stride.
    assert!(col2im(&x, &[1, 5], &[2], &[]).is_err());
    let zero_stride = [("strides", Attribute::Ints(vec![1, 0]))];
    assert!(col2im(&x, &[1, 5], &[1, 2], &zero_stride).is_err());
}
