//! Normalization family: each op against its contract formula evaluated by hand in f32 (the
//! expectations are written out here step by step), batch and thread invariance of a row,
//! and error messages.
mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};

fn outputs(
    op: &str,
    opset: i64,
    inputs: &[Tensor],
    attrs: &[(&str, Attribute)],
    n: usize,
) -> Vec<Tensor> {
    let inputs: Vec<Option<Value>> = inputs.iter().cloned().map(|t| Some(t.into())).collect();
    run_node_opset(op, opset, &inputs, attrs, n)
        .unwrap()
        .into_iter()
        .map(|v| v.into_tensor().unwrap())
        .collect()
}

fn values(t: &Tensor) -> Vec<f32> {
    t.as_slice::<f32>().unwrap().to_vec()
}

#[test]
fn layer_norm_follows_the_contract_formula() {
    let x = [1.0f32, 2.0, 4.0, 8.0];
    let (scale, bias) = ([0.5f32, 1.0, 2.0, -1.0], [0.25f32, 0.0, -0.5, 1.0]);
    let out = outputs(
        "LayerNormalization",
        17,
        &[f32s(&[1, 4], &x), f32s(&[4], &scale), f32s(&[4], &bias)],
        &[("epsilon", Attribute::Float(1e-3))],
        3,
    );
    // mean = 15 / 4; d = x - mean; var = dot(d, d) / 4; rstd = 1 / sqrt(var + eps).
    let mean = 15.0f32 / 4.0;
    let d: Vec<f32> = x.iter().map(|v| v - mean).collect();
    let var = samebits_kernels::canonical_dot(&d, &d) / 4.0;
    let rstd = 1.0 / (var + 1e-3f32).sqrt();
    let expect: Vec<f32> = (0..4).map(|k| (d[k] * rstd) * scale[k] + bias[k]).collect();
    assert_eq!(values(&out[0]), expect);
    assert_eq!(out[1].shape(), &[1, 1]);
    assert_eq!(values(&out[1]), vec![mean]);
    assert_eq!(values(&out[2]), vec![rstd]);
}

#[test]
fn rms_norm_follows_the_contract_formula() {
    let x = [3.0f32, -4.0];
    let out = outputs(
        "RMSNormalization",
        23,
        &[f32s(&[2], &x), f32s(&[2], &[1.0, 2.0])],
        &[],
        1,
    );
    let rrms = 1.0 / ((25.0f32 / 2.0) + 1e-5).sqrt();
    assert_eq!(values(&out[0]), vec![3.0 * rrms, (-4.0 * rrms) * 2.0]);
}

#[test]
fn layer_norm_row_is_independent_of_batch_and_threads() {
    let len = 300;
    let batch: Vec<f32> = (0..64 * len)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013)
        .collect();
    let scale = f32s(&[len], &vec![1.5; len]);
    let bias = f32s(&[len], &vec![-0.25; len]);
    let run = |rows: usize| {
        let x = f32s(&[rows, len], &batch[..rows * len]);
        values(
            &outputs(
                "LayerNormalization",
                17,
                &[x, scale.clone(), bias.clone()],
                &[],
                1,
            )[0],
        )[..len]
            .to_vec()
    };
    let one = run(1);
    assert_eq!(one, run(64));
    let pool = |n| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
    };
    assert_eq!(pool(1).install(|| run(64)), pool(2).install(|| run(64)));
}

#[test]
fn batch_norm_inference_and_training() {
    // x [N=1, C=2, 2]: channel 0 = [1, 3], channel 1 = [2, 6].
    let x = f32s(&[1, 2, 2], &[1., 3., 2., 6.]);
    let (scale, b) = (f32s(&[2], &[1., 2.]), f32s(&[2], &[0., 1.]));
    let (mean, var) = (f32s(&[2], &[1., 2.]), f32s(&[2], &[4., 16.]));
    let y = outputs(
        "BatchNormalization",
        15,
        &[
            x.clone(),
            scale.clone(),
            b.clone(),
            mean.clone(),
            var.clone(),
        ],
        &[("epsilon", Attribute::Float(0.0))],
        1,
    );
    // channel 0: (x - 1) / 2; channel 1: ((x - 2) / 4) * 2 + 1.
    assert_eq!(values(&y[0]), vec![0., 1., 1., 3.]);
    let t = outputs(
        "BatchNormalization",
        15,
        &[x, scale, b, mean, var],
        &[
            ("epsilon", Attribute::Float(0.0)),
            ("training_mode", Attribute::Int(1)),
            ("momentum", Attribute::Float(0.5)),
        ],
        3,
    );
    // Batch stats: channel 0 mean 2, var 1; channel 1 mean 4, var 4.
    assert_eq!(values(&t[0]), vec![-1., 1., -1., 3.]);
    assert_eq!(values(&t[1]), vec![1.5, 3.0]);
    assert_eq!(values(&t[2]), vec![2.5, 10.0]);
}

#[test]
fn group_norm_with_one_channel_per_group_is_instance_norm() {
    let x: Vec<f32> = (0..2 * 4 * 3)
        .map(|i| ((i * 13 % 7) as f32) * 0.5)
        .collect();
    let x = f32s(&[2, 4, 3], &x);
    let (scale, b) = (
        f32s(&[4], &[1., 2., 3., 4.]),
        f32s(&[4], &[0., 0.5, 1., 1.5]),
    );
    let inst = outputs(
        "InstanceNormalization",
        6,
        &[x.clone(), scale.clone(), b.clone()],
        &[],
        1,
    );
    let group = outputs(
        "GroupNormalization",
        21,
        &[x, scale, b],
        &[("num_groups", Attribute::Int(4))],
        1,
    );
    assert_eq!(inst[0], group[0]);
    // Each (n, c) row of the instance norm with unit scale would have zero mean: check row 0.
    let y = values(&inst[0]);
    assert!((y[0] + y[1] + y[2]).abs() < 1e-5);
}

#[test]
fn lp_norm_and_mvn() {
    let y = run1(
        "LpNormalization",
        &[f32s(&[2], &[3., 4.])],
        &[("p", Attribute::Int(1))],
    )
    .unwrap();
    assert_eq!(values(&y), vec![3.0 / 7.0, 4.0 / 7.0]);
    let y = run1("LpNormalization", &[f32s(&[2], &[3., 4.])], &[]).unwrap();
    assert_eq!(values(&y), vec![3.0 / 5.0, 4.0 / 5.0]);
    // MVN over axes [0, 2]: channel 0 = [1, 3] -> mean 2, std 1 -> [-1, 1] (up to 1e-9).
    let y = run1(
        "MeanVarianceNormalization",
        &[f32s(&[1, 2, 2], &[1., 3., 10., 10.])],
        &[("axes", Attribute::Ints(vec![0, 2]))],
    )
    .unwrap();
    assert_eq!(
        values(&y),
        vec![-1.0 / (1.0 + 1e-9), 1.0 / (1.0 + 1e-9), 0.0, 0.0]
    );
}

#[test]
fn bad_attributes_and_inputs_are_named() {
    let x = f32s(&[1, 3, 2], &[0.; 6]);
    let p = f32s(&[3], &[1.; 3]);
    let e = run1(
        "GroupNormalization",
        &[x.clone(), p.clone(), p.clone()],
        &[("num_groups", Attribute::Int(2))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("num_groups"), "{e}");
    let e = run1(
        "LpNormalization",
        std::slice::from_ref(&x),
        &[("p", Attribute::Int(3))],
    )
    .unwrap_err();
    assert!(e.to_string().contains("\"p\""), "{e}");
    let e = run1(
        "LayerNormalization",
        &[x.clone(), f32s(&[5], &[1.; 5])],
        &[],
    )
    .unwrap_err();
    assert!(e.to_string().contains("scale"), "{e}");
    let e = run1("InstanceNormalization", &[x, f32s(&[2], &[1.; 2]), p], &[]).unwrap_err();
    assert!(e.to_string().contains("scale"), "{e}");
}

#[test]
fn lrn_sums_squares_over_the_channel_window() {
    // size 2: channel c reads channels c ..= c + 1 that exist. alpha / size = 1, bias 1,
    // beta 1 (pow is then exact): y_c = x_c / (1 + sq_c).
    let attrs = [
        ("size", Attribute::Int(2)),
        ("alpha", Attribute::Float(2.0)),
        ("beta", Attribute::Float(1.0)),
        ("bias", Attribute::Float(1.0)),
    ];
    let y = run1("LRN", &[f32s(&[1, 3, 1, 1], &[1., 2., 3.])], &attrs).unwrap();
    // sq = 1 + 4, 4 + 9, 9.
    assert_eq!(
        y.as_slice::<f32>().unwrap(),
        &[1.0 / 6.0, 2.0 / 14.0, 3.0 / 10.0]
    );
    assert!(
        run1(
            "LRN",
            &[f32s(&[1, 3], &[1., 2., 3.])],
            &[("size", Attribute::Int(0))]
        )
        .is_err()
    );
}
