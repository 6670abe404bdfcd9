//! Loss family: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss on small cases worked by
//! hand from the contract formulas (section `loss`; log-softmax from section `softmax`).
mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};

fn loss(op: &str, inputs: Vec<Tensor>, attrs: &[(&str, Attribute)], n: usize) -> Vec<Tensor> {
    let inputs: Vec<Option<Value>> = inputs.into_iter().map(|t| Some(t.into())).collect();
    run_node_opset(op, 13, &inputs, attrs, n)
        .unwrap()
        .into_iter()
        .map(|v| v.into_tensor().unwrap())
        .collect()
}

fn reduction(r: &str) -> (&'static str, Attribute) {
    ("reduction", Attribute::String(r.into()))
}

#[test]
fn nll_gathers_weights_and_reduces() {
    // N = 2, C = 3: targets 2 and 0 pick -x[0][2] = -0.3 and -x[1][0] = -0.4.
    let x = f32s(&[2, 3], &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6]);
    let t = i64s(&[2], &[2, 0]);
    let none = loss(
        "NegativeLogLikelihoodLoss",
        vec![x.clone(), t.clone()],
        &[reduction("none")],
        1,
    );
    assert_eq!(none[0].as_slice::<f32>().unwrap(), &[-0.3, -0.4]);
    let sum = loss(
        "NegativeLogLikelihoodLoss",
        vec![x.clone(), t.clone()],
        &[reduction("sum")],
        1,
    );
    assert_eq!(sum[0].as_slice::<f32>().unwrap(), &[-0.3f32 + -0.4]);
    // Mean with weights [1, 2, 4]: (-(0.3 * 4) + -(0.4 * 1)) / (4 + 1).
    let w = f32s(&[3], &[1., 2., 4.]);
    let mean = loss(
        "NegativeLogLikelihoodLoss",
        vec![x.clone(), t.clone(), w],
        &[],
        1,
    );
    assert_eq!(
        mean[0].as_slice::<f32>().unwrap(),
        &[(-(0.3f32 * 4.0) + -0.4) / 5.0]
    );
    // ignore_index 0 drops the second position from the terms and the count.
    let ignore = [("ignore_index", Attribute::Int(0))];
    let mean = loss("NegativeLogLikelihoodLoss", vec![x.clone(), t], &ignore, 1);
    assert_eq!(mean[0].as_slice::<f32>().unwrap(), &[-0.3]);
    // A class outside [0, C) is an error.
    let bad: Vec<Option<Value>> = vec![Some(x.into()), Some(i64s(&[2], &[3, 0]).into())];
    assert!(run_node_opset("NegativeLogLikelihoodLoss", 13, &bad, &[], 1).is_err());
}

#[test]
fn softmax_cross_entropy_uses_the_log_softmax_over_classes() {
    // [N = 1, C = 2, d = 2]: class rows are (x[0,0,j], x[0,1,j]) = (0, ln 3) and (1, 1).
    let x = f32s(&[1, 2, 2], &[0.0, 1.0, 3.0f32.ln(), 1.0]);
    let t = i64s(&[1, 2], &[1, 0]);
    let out = loss(
        "SoftmaxCrossEntropyLoss",
        vec![x.clone(), t],
        &[reduction("none")],
        2,
    );
    // LogSoftmax by contract section `softmax`: (x - m) - log(sum(exp(x - m))).
    let log_softmax = |a: f32, b: f32| {
        let m = a.max(b);
        let s = samebits_math::exp(a - m) + samebits_math::exp(b - m);
        (
            (a - m) - samebits_math::log(s),
            (b - m) - samebits_math::log(s),
        )
    };
    let (_, p01) = log_softmax(0.0, 3.0f32.ln());
    let (p10, p11) = log_softmax(1.0, 1.0);
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[-p01, -p10]);
    assert_eq!(out[1].shape(), &[1, 2, 2]);
    assert_eq!(out[1].as_slice::<f32>().unwrap()[3], p11);
    // -ln(3/4) and ln 2, within rounding.
    assert!((out[0].as_slice::<f32>().unwrap()[0] - 0.287_682_1).abs() < 1e-6);
    assert!((out[0].as_slice::<f32>().unwrap()[1] - std::f32::consts::LN_2).abs() < 1e-6);
}
