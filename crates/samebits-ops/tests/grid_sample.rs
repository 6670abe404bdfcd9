//! GridSample's bits do not depend on the thread count or on the batch: every mode and padding
//! on random points (some outside the image), with 1 and 4 threads, and each batch item alone
//! against the batch of two. (Values against ONNX's own test data: the conformance allowlist.)

mod common;
use common::*;
use samebits_ir::{Attribute, Tensor};

fn grid_sample(x: &Tensor, grid: &Tensor, mode: &str, padding: &str, align: i64) -> Tensor {
    run1(
        "GridSample",
        &[x.clone(), grid.clone()],
        &[
            ("mode", Attribute::String(mode.into())),
            ("padding_mode", Attribute::String(padding.into())),
            ("align_corners", Attribute::Int(align)),
        ],
    )
    .unwrap()
}

#[test]
fn threads_and_batch_leave_the_bits_alone() {
    let (c, h, w, oh, ow) = (3, 5, 7, 4, 6);
    let x = f32s(&[2, c, h, w], &pseudo_random(2 * c * h * w, 1));
    let points: Vec<f32> = pseudo_random(2 * oh * ow * 2, 2)
        .iter()
        .map(|v| v * 1.3)
        .collect();
    let grid = f32s(&[2, oh, ow, 2], &points);
    let half = |t: &Tensor, len: usize| t.as_slice::<f32>().unwrap()[..len].to_vec();
    let x0 = f32s(&[1, c, h, w], &half(&x, c * h * w));
    let grid0 = f32s(&[1, oh, ow, 2], &half(&grid, oh * ow * 2));
    for mode in ["nearest", "linear", "cubic"] {
        for padding in ["zeros", "border", "reflection"] {
            for align in [0, 1] {
                let one = with_threads(1, || grid_sample(&x, &grid, mode, padding, align));
                let four = with_threads(4, || grid_sample(&x, &grid, mode, padding, align));
                assert_eq!(bits(&one), bits(&four), "{mode} {padding} {align}");
                let alone = grid_sample(&x0, &grid0, mode, padding, align);
                assert_eq!(
                    bits(&alone),
                    bits(&one)[..c * oh * ow],
                    "{mode} {padding} {align}"
                );
            }
        }
    }
}

#[test]
fn points_far_outside_or_nan_give_zeros_or_nan_not_a_panic() {
    let x = f32s(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let grid = f32s(
        &[1, 1, 3, 2],
        &[1e30, -1e30, f32::MAX, f32::MIN, f32::NAN, 0.0],
    );
    for mode in ["nearest", "linear", "cubic"] {
        let y = grid_sample(&x, &grid, mode, "zeros", 0);
        let y = y.as_slice::<f32>().unwrap();
        assert_eq!(&y[..2], &[0.0, 0.0], "{mode}");
        for padding in ["border", "reflection"] {
            let y = grid_sample(&x, &grid, mode, padding, 1);
            assert_eq!(y.shape(), [1, 1, 1, 3], "{mode} {padding}");
        }
    }
}
