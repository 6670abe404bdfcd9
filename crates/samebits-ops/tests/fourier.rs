//! DFT and STFT bits do not depend on the thread count or on the batch: transforms of a batch
//! with 1 and 4 threads, and each signal alone against its row of the batch. Plus a few exact
//! identities of the contract's twiddles (quarter turns exact) and the round trip of the
//! inverse. (Values against ONNX's own test data: the conformance allowlist.)

mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};

fn dft(x: &Tensor, axis: i64, inverse: bool, onesided: bool, length: Option<i64>) -> Tensor {
    let inputs: Vec<Option<Value>> = vec![
        Some(x.clone().into()),
        length.map(|l| i64s(&[], &[l]).into()),
        Some(i64s(&[], &[axis]).into()),
    ];
    let attributes = [
        ("inverse", Attribute::Int(inverse as i64)),
        ("onesided", Attribute::Int(onesided as i64)),
    ];
    run_node_opset("DFT", 20, &inputs, &attributes, 1)
        .unwrap()
        .remove(0)
        .into_tensor()
        .unwrap()
}

fn stft(x: &Tensor, step: i64, window: &Tensor) -> Tensor {
    let inputs: Vec<Option<Value>> = vec![
        Some(x.clone().into()),
        Some(i64s(&[], &[step]).into()),
        Some(window.clone().into()),
    ];
    run_node_opset("STFT", 17, &inputs, &[], 1)
        .unwrap()
        .remove(0)
        .into_tensor()
        .unwrap()
}

#[test]
fn dft_bits_do_not_depend_on_threads_or_batch() {
    const BATCH: usize = 3;
    const LEN: usize = 77; // two reduction tiles of the 2L-term sums, and a prime length
    let data = pseudo_random(BATCH * LEN * 2, 5);
    let x = f32s(&[BATCH, LEN, 2], &data);
    for (inverse, onesided, length) in [
        (false, false, None),
        (true, false, None),
        (false, true, Some(90)),
    ] {
        let one = with_threads(1, || dft(&x, 1, inverse, onesided, length));
        let four = with_threads(4, || dft(&x, 1, inverse, onesided, length));
        assert_eq!(
            bits(&one),
            bits(&four),
            "inverse {inverse} onesided {onesided}"
        );
        let row = one.numel() / BATCH;
        for b in 0..BATCH {
            let alone = f32s(&[1, LEN, 2], &data[b * LEN * 2..][..LEN * 2]);
            let single = dft(&alone, 1, inverse, onesided, length);
            assert_eq!(
                &bits(&one)[b * row..][..row],
                &bits(&single)[..],
                "signal {b} inverse {inverse} onesided {onesided}"
            );
        }
    }
}

#[test]
fn a_transform_along_a_middle_axis_is_the_transform_of_each_line() {
    // [2, 5, 3, 1] along axis 1: line (o, i) is x[o, :, i].
    let data = pseudo_random(2 * 5 * 3, 9);
    let x = f32s(&[2, 5, 3, 1], &data);
    let all = dft(&x, 1, false, false, None);
    assert_eq!(all.shape(), &[2, 5, 3, 2]);
    for o in 0..2 {
        for i in 0..3 {
            let line: Vec<f32> = (0..5).map(|n| data[(o * 5 + n) * 3 + i]).collect();
            let single = dft(&f32s(&[1, 5, 1], &line), 1, false, false, None);
            for k in 0..5 {
                let at = ((o * 5 + k) * 3 + i) * 2;
                assert_eq!(bits(&all)[at..at + 2], bits(&single)[k * 2..k * 2 + 2]);
            }
        }
    }
}

#[test]
fn quarter_turn_twiddles_are_exact() {
    // x = [1, 2, 3, 4]: bins 10, -2+2i, -2, -2-2i, exactly (all twiddles are 0 or ±1).
    let x = f32s(&[1, 4, 1], &[1.0, 2.0, 3.0, 4.0]);
    let y = dft(&x, 1, false, false, None);
    let expected = [10.0, 0.0, -2.0, 2.0, -2.0, 0.0, -2.0, -2.0];
    assert_eq!(y.as_slice::<f32>().unwrap(), expected);
    // One-sided inverse of the first three bins gives the signal back.
    let half = f32s(&[1, 3, 2], &expected[..6]);
    let back = dft(&half, 1, true, true, None);
    assert_eq!(back.shape(), &[1, 4, 1]);
    assert_eq!(back.as_slice::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn the_inverse_undoes_the_forward_transform_closely() {
    let data = pseudo_random(50 * 2, 3);
    let x = f32s(&[1, 50, 2], &data);
    let back = dft(&dft(&x, 1, false, false, None), 1, true, false, None);
    for (a, b) in back.as_slice::<f32>().unwrap().iter().zip(&data) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
}

#[test]
fn stft_bits_do_not_depend_on_threads_or_batch() {
    const BATCH: usize = 2;
    const LEN: usize = 200;
    let data = pseudo_random(BATCH * LEN, 13);
    let x = f32s(&[BATCH, LEN, 1], &data);
    let window = f32s(&[70], &pseudo_random(70, 17));
    let one = with_threads(1, || stft(&x, 13, &window));
    let four = with_threads(4, || stft(&x, 13, &window));
    // (200 - 70) / 13 + 1 = 11 frames of 36 bins.
    assert_eq!(one.shape(), &[BATCH, 11, 36, 2]);
    assert_eq!(bits(&one), bits(&four));
    let row = one.numel() / BATCH;
    for b in 0..BATCH {
        let alone = stft(&f32s(&[1, LEN, 1], &data[b * LEN..][..LEN]), 13, &window);
        assert_eq!(
            &bits(&one)[b * row..][..row],
            &bits(&alone)[..],
            "signal {b}"
        );
    }
    // Frame 2 is the one-sided DFT of the windowed samples 26 .. 96.
    let w = window.as_slice::<f32>().unwrap();
    let frame: Vec<f32> = (0..70).map(|n| data[26 + n] * w[n]).collect();
    let direct = dft(&f32s(&[1, 70, 1], &frame), 1, false, true, None);
    assert_eq!(&bits(&one)[2 * 36 * 2..][..36 * 2], &bits(&direct)[..]);
}

#[test]
fn bad_axes_and_lengths_are_errors_not_panics() {
    let x = f32s(&[1, 4, 1], &[1.0, 2.0, 3.0, 4.0]);
    for axis in [2, -1, 3, -4] {
        let inputs = vec![
            Some(x.clone().into()),
            None,
            Some(i64s(&[], &[axis]).into()),
        ];
        assert!(
            run_node_opset("DFT", 20, &inputs, &[], 1).is_err(),
            "axis {axis}"
        );
    }
    let inputs = vec![Some(x.clone().into()), Some(i64s(&[], &[0]).into()), None];
    assert!(run_node_opset("DFT", 20, &inputs, &[], 1).is_err());
    let three = f32s(&[1, 4, 3], &[0.0; 12]);
    assert!(run_node_opset("DFT", 20, &[Some(three.into())], &[], 1).is_err());
    // STFT: frame longer than the signal, zero step.
    let window = f32s(&[8], &[1.0; 8]);
    let inputs = vec![
        Some(x.clone().into()),
        Some(i64s(&[], &[1]).into()),
        Some(window.into()),
    ];
    assert!(run_node_opset("STFT", 17, &inputs, &[], 1).is_err());
    let inputs = vec![
        Some(x.into()),
        Some(i64s(&[], &[0]).into()),
        None,
        Some(i64s(&[], &[2]).into()),
    ];
    assert!(run_node_opset("STFT", 17, &inputs, &[], 1).is_err());
}
