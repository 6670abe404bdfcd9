//! Resize and Upsample: coordinates and weights worked out by hand from the formulas of
//! contract section `resize` (the ONNX Resize definitions), on tiny inputs.
mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};

fn text(s: &str) -> Attribute {
    Attribute::String(s.into())
}

/// Resize at opset 19 with the given optional roi, scales and sizes.
fn resize(
    x: Tensor,
    roi: Option<Tensor>,
    scales: Option<&[f32]>,
    sizes: Option<&[i64]>,
    attrs: &[(&str, Attribute)],
) -> Result<Tensor, samebits_ops::OpError> {
    let inputs: Vec<Option<Value>> = vec![
        Some(x.into()),
        roi.map(Value::from),
        scales.map(|s| f32s(&[s.len()], s).into()),
        sizes.map(|s| i64s(&[s.len()], s).into()),
    ];
    let out = run_node_opset("Resize", 19, &inputs, attrs, 1)?;
    Ok(out.into_iter().next().unwrap().into_tensor().unwrap())
}

#[test]
fn nearest_half_pixel_doubling_repeats_elements() {
    // Output x maps to (x + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25: rounded 0, 0, 1, 1.
    let x = f32s(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let out = resize(x, None, Some(&[1., 1., 2., 2.]), None, &[]).unwrap();
    assert_eq!(out.shape(), &[1, 1, 4, 4]);
    assert_eq!(
        out.as_slice::<f32>().unwrap(),
        &[
            1., 1., 2., 2., 1., 1., 2., 2., 3., 3., 4., 4., 3., 3., 4., 4.
        ]
    );
}

#[test]
fn nearest_rounding_modes() {
    // Asymmetric, scale 2 on 0..3: coordinates 0, 0.5, 1, 1.5, 2, 2.5.
    let x = f32s(&[3], &[10., 20., 30.]);
    let run = |mode: &str| {
        let attrs = [
            ("coordinate_transformation_mode", text("asymmetric")),
            ("nearest_mode", text(mode)),
        ];
        resize(x.clone(), None, Some(&[2.]), None, &attrs)
            .unwrap()
            .as_slice::<f32>()
            .unwrap()
            .to_vec()
    };
    assert_eq!(run("round_prefer_floor"), [10., 10., 20., 20., 30., 30.]);
    assert_eq!(run("round_prefer_ceil"), [10., 20., 20., 30., 30., 30.]);
    assert_eq!(run("floor"), [10., 10., 20., 20., 30., 30.]);
    assert_eq!(run("ceil"), [10., 20., 20., 30., 30., 30.]);
}

#[test]
fn linear_half_pixel_clamps_at_the_edges() {
    // Coordinates -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped to 1) between 1 and 2.
    let out = resize(
        f32s(&[2], &[1., 2.]),
        None,
        Some(&[2.]),
        None,
        &[("mode", text("linear"))],
    )
    .unwrap();
    assert_eq!(out.as_slice::<f32>().unwrap(), &[1., 1.25, 1.75, 2.]);
}

#[test]
fn linear_align_corners_hits_both_ends() {
    let attrs = [
        ("mode", text("linear")),
        ("coordinate_transformation_mode", text("align_corners")),
    ];
    let out = resize(f32s(&[2], &[0., 3.]), None, None, Some(&[4]), &attrs).unwrap();
    let out = out.as_slice::<f32>().unwrap();
    for (got, want) in out.iter().zip([0., 1., 2., 3.]) {
        assert!((got - want).abs() < 1e-6, "{out:?}");
    }
    assert_eq!((out[0], out[3]), (0., 3.));
}

#[test]
fn cubic_at_integer_coordinates_copies_the_input() {
    // At t = 0 the cubic weights are (0, 1, 0, 0): a single tap of weight 1.
    let x = f32s(&[4], &[1., -2., 5., 0.5]);
    let attrs = [
        ("mode", text("cubic")),
        ("coordinate_transformation_mode", text("asymmetric")),
    ];
    let out = resize(x, None, Some(&[2.]), None, &attrs).unwrap();
    let out = out.as_slice::<f32>().unwrap();
    assert_eq!([out[0], out[2], out[4], out[6]], [1., -2., 5., 0.5]);
    // Halfway between -2 and 5 with A = -0.75: weights (-0.09375, 0.59375, 0.59375, -0.09375)
    // on 1, -2, 5, 0.5.
    let want = -0.09375f32 * 1. + 0.59375 * -2. + 0.59375 * 5. + -0.09375 * 0.5;
    assert!((out[3] - want).abs() < 1e-6, "{} vs {want}", out[3]);
}

#[test]
fn tf_crop_and_resize_extrapolates_outside_the_input() {
    // roi [-1, 1] over 3 elements, 3 outputs: coordinates -2, 0, 2.
    let attrs = [
        ("coordinate_transformation_mode", text("tf_crop_and_resize")),
        ("extrapolation_value", Attribute::Float(7.)),
    ];
    let out = resize(
        f32s(&[3], &[1., 2., 3.]),
        Some(f32s(&[2], &[-1., 1.])),
        None,
        Some(&[3]),
        &attrs,
    )
    .unwrap();
    assert_eq!(out.as_slice::<f32>().unwrap(), &[7., 1., 3.]);
}

#[test]
fn sizes_with_axes_and_aspect_policy() {
    // not_larger over [2, 4] -> [4, 4]: common scale min(2, 1) = 1, nothing changes.
    let x = counting_f32(&[1, 1, 2, 4]);
    let attrs = [
        ("axes", Attribute::Ints(vec![2, 3])),
        ("keep_aspect_ratio_policy", text("not_larger")),
    ];
    let out = resize(x.clone(), None, None, Some(&[4, 4]), &attrs).unwrap();
    assert_eq!(out.shape(), &[1, 1, 2, 4]);
    assert_eq!(bits(&out), bits(&x));
    let attrs = [
        ("axes", Attribute::Ints(vec![2, 3])),
        ("keep_aspect_ratio_policy", text("not_smaller")),
    ];
    let out = resize(x, None, None, Some(&[4, 4]), &attrs).unwrap();
    assert_eq!(out.shape(), &[1, 1, 4, 8]);
}

fn counting_f32(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    f32s(shape, &(0..n).map(|v| v as f32).collect::<Vec<_>>())
}

#[test]
fn upsample_repeats_by_integer_scales() {
    let x = f32s(&[1, 1, 1, 2], &[1., 2.]);
    let inputs = [Some(x.into()), Some(f32s(&[4], &[1., 1., 2., 3.]).into())];
    let out = run_node_opset("Upsample", 9, &inputs, &[], 1).unwrap();
    let out = out[0].as_tensor().unwrap();
    assert_eq!(out.shape(), &[1, 1, 2, 6]);
    assert_eq!(
        out.as_slice::<f32>().unwrap(),
        &[1., 1., 1., 2., 2., 2., 1., 1., 1., 2., 2., 2.]
    );
}

#[test]
fn resize_errors_name_the_problem() {
    let x = f32s(&[2], &[1., 2.]);
    let e = resize(x.clone(), None, Some(&[2.]), Some(&[4]), &[]).unwrap_err();
    assert!(e.to_string().contains("not both"), "{e}");
    let e = resize(x.clone(), None, Some(&[2., 2.]), None, &[]).unwrap_err();
    assert!(e.to_string().contains("scales has 2 values"), "{e}");
    let e = resize(x.clone(), None, Some(&[-1.]), None, &[]).unwrap_err();
    assert!(e.to_string().contains("positive"), "{e}");
    let e = resize(x, None, Some(&[2.]), None, &[("mode", text("area"))]).unwrap_err();
    assert!(e.to_string().contains("\"mode\""), "{e}");
}

#[test]
fn plane_fast_path_matches_general_path() {
    // Sizes [1, 3, 7, 9] resize only the last two axes (the per-plane path); sizes [2, 3, 7, 9]
    // also stretch axis 0 (the general path), whose two halves are each that same resize.
    let values: Vec<f32> = (0..60)
        .map(|i| ((i * 37) % 23) as f32 * 0.3 - 2.9)
        .collect();
    let x = f32s(&[1, 3, 4, 5], &values);
    for mode in ["nearest", "linear", "cubic"] {
        let attrs = [
            ("mode", text(mode)),
            ("coordinate_transformation_mode", text("align_corners")),
        ];
        let run = |sizes: &[i64]| {
            let out = resize(x.clone(), None, None, Some(sizes), &attrs).unwrap();
            out.as_slice::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
        };
        let planes = run(&[1, 3, 7, 9]);
        let general = run(&[2, 3, 7, 9]);
        assert_eq!(general[..planes.len()], planes[..], "{mode}");
        assert_eq!(general[planes.len()..], planes[..], "{mode}");
    }
}
