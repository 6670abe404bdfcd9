//! TensorScatter: linear and circular writes along the sequence axis, each batch row at its
//! own offset (the same as the row alone), any dtype copied bit for bit, and offsets that do
//! not fit are errors.

mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};
use samebits_ops::OpError;

fn scatter(
    cache: &Tensor,
    update: &Tensor,
    offsets: Option<&[i64]>,
    mode: &str,
) -> Result<Tensor, OpError> {
    let inputs: Vec<Option<Value>> = vec![
        Some(cache.clone().into()),
        Some(update.clone().into()),
        offsets.map(|w| i64s(&[w.len()], w).into()),
    ];
    let attributes = [("mode", Attribute::String(mode.into()))];
    Ok(
        run_node_opset("TensorScatter", 24, &inputs, &attributes, 1)?
            .remove(0)
            .into_tensor()?,
    )
}

#[test]
fn rows_are_written_at_their_offsets() {
    // Cache [2, 4, 1] of zeros, update [2, 2, 1]: row 0 at 1, row 1 at 3 (circular: 3, 0).
    let cache = f32s(&[2, 4, 1], &[0.0; 8]);
    let update = f32s(&[2, 2, 1], &[1.0, 2.0, 3.0, 4.0]);
    let y = scatter(&cache, &update, Some(&[1, 3]), "circular").unwrap();
    assert_eq!(
        y.as_slice::<f32>().unwrap(),
        [0.0, 1.0, 2.0, 0.0, 4.0, 0.0, 0.0, 3.0]
    );
    let y = scatter(&cache, &update, Some(&[1, 2]), "linear").unwrap();
    assert_eq!(
        y.as_slice::<f32>().unwrap(),
        [0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 3.0, 4.0]
    );
    // Without write_indices every row starts at 0.
    let y = scatter(&cache, &update, None, "linear").unwrap();
    assert_eq!(
        y.as_slice::<f32>().unwrap(),
        [1.0, 2.0, 0.0, 0.0, 3.0, 4.0, 0.0, 0.0]
    );
}

#[test]
fn each_row_is_the_row_alone_and_nans_keep_their_bits() {
    // [batch 3, heads 2, seq 5, dim 3], update seq 2, an f32 NaN with a payload in it.
    let mut cache_data = pseudo_random(3 * 2 * 5 * 3, 4);
    cache_data[7] = f32::from_bits(0x7fc0_1234);
    let mut update_data = pseudo_random(3 * 2 * 2 * 3, 5);
    update_data[2] = f32::from_bits(0xffc0_0042);
    let cache = f32s(&[3, 2, 5, 3], &cache_data);
    let update = f32s(&[3, 2, 2, 3], &update_data);
    let offsets = [0i64, 4, 2];
    let all = scatter(&cache, &update, Some(&offsets), "circular").unwrap();
    assert!(bits(&all).contains(&0x7fc0_1234));
    assert!(bits(&all).contains(&0xffc0_0042));
    let (c_row, u_row) = (2 * 5 * 3, 2 * 2 * 3);
    for b in 0..3 {
        let alone = scatter(
            &f32s(&[1, 2, 5, 3], &cache_data[b * c_row..][..c_row]),
            &f32s(&[1, 2, 2, 3], &update_data[b * u_row..][..u_row]),
            Some(&offsets[b..b + 1]),
            "circular",
        )
        .unwrap();
        assert_eq!(
            &bits(&all)[b * c_row..][..c_row],
            &bits(&alone)[..],
            "row {b}"
        );
    }
    // Integers too.
    let cache = i64s(&[1, 3, 1], &[7, 8, 9]);
    let update = i64s(&[1, 1, 1], &[-1]);
    let y = scatter(&cache, &update, Some(&[2]), "linear").unwrap();
    assert_eq!(y.as_slice::<i64>().unwrap(), [7, 8, -1]);
}

#[test]
fn offsets_that_do_not_fit_are_errors() {
    let cache = f32s(&[1, 4, 1], &[0.0; 4]);
    let update = f32s(&[1, 2, 1], &[1.0, 2.0]);
    assert!(scatter(&cache, &update, Some(&[3]), "linear").is_err());
    assert!(scatter(&cache, &update, Some(&[-1]), "circular").is_err());
    assert!(scatter(&cache, &update, Some(&[4]), "circular").is_err());
    assert!(scatter(&cache, &update, Some(&[0, 0]), "linear").is_err());
    let longer = f32s(&[1, 5, 1], &[0.0; 5]);
    assert!(scatter(&cache, &longer, None, "linear").is_err());
    assert!(scatter(&cache, &update, None, "sideways").is_err());
}
