//! Random family: Dropout in inference and training. Expectations: the identity and all-true
//! mask by the ONNX definition; the training stream against values NumPy's
//! `RandomState(seed).random_sample()` prints (written in the comments).
mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};

fn dropout(opset: i64, inputs: Vec<Option<Tensor>>, seed: Option<i64>) -> Vec<Value> {
    let inputs: Vec<Option<Value>> = inputs.into_iter().map(|t| t.map(Value::from)).collect();
    let attrs: Vec<(&str, Attribute)> = seed
        .map(|s| ("seed", Attribute::Int(s)))
        .into_iter()
        .collect();
    run_node_opset("Dropout", opset, &inputs, &attrs, 2).unwrap()
}

#[test]
fn inference_and_zero_ratio_are_the_identity() {
    let x = f32s(&[3], &[1., -2., 3.]);
    for (opset, inputs) in [
        (7, vec![Some(x.clone())]),
        (13, vec![Some(x.clone())]),
        (13, vec![Some(x.clone()), Some(Tensor::scalar(0.5f32))]),
        (
            13,
            vec![
                Some(x.clone()),
                Some(Tensor::scalar(0.0f32)),
                Some(bools(&[], &[true])),
            ],
        ),
    ] {
        let out = dropout(opset, inputs, None);
        assert_eq!(tensor(&out[0]).as_slice::<f32>().unwrap(), &[1., -2., 3.]);
        if opset >= 10 {
            assert_eq!(tensor(&out[1]).as_bools().unwrap(), &[1, 1, 1]);
        } else {
            // Before opset 10 the mask has the input's dtype.
            assert_eq!(tensor(&out[1]).as_slice::<f32>().unwrap(), &[1., 1., 1.]);
        }
    }
}

#[test]
fn training_follows_numpy_random_state() {
    // np.random.RandomState(0).random_sample(3) = [0.5488135, 0.71518937, 0.60276338]:
    // with ratio 0.6 the first is dropped, the others kept and scaled by 1 / (1 - 0.6).
    let x = f32s(&[3], &[1., -2., 3.]);
    let ratio = Tensor::scalar(0.6f32);
    let on = bools(&[], &[true]);
    let out = dropout(
        13,
        vec![Some(x.clone()), Some(ratio), Some(on.clone())],
        Some(0),
    );
    let scale = 1.0f32 / (1.0f32 - 0.6f32);
    assert_eq!(
        tensor(&out[0]).as_slice::<f32>().unwrap(),
        &[0.0, -2.0 * scale, 3.0 * scale]
    );
    assert_eq!(tensor(&out[1]).as_bools().unwrap(), &[0, 1, 1]);
    // Without a seed there is no stream to draw from.
    let inputs: Vec<Option<Value>> = vec![Some(x.into()), None, Some(on.into())];
    let e = run_node_opset("Dropout", 13, &inputs, &[], 1).unwrap_err();
    assert!(e.to_string().contains("seed"), "{e}");
}
