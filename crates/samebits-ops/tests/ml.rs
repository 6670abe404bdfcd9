//! ai.onnx.ml LabelEncoder: string, integer and float keys, defaults, tensor attributes, and
//! tables that are not one-to-one are errors.

mod common;
use common::*;
use samebits_ir::{Attribute, Graph, Tensor};
use samebits_ops::{OpError, OperationSet, Plan, RunOptions};

/// Runs one ai.onnx.ml (opset 4) LabelEncoder node on `x`.
fn label_encoder(x: Tensor, attributes: &[(&str, Attribute)]) -> Result<Tensor, OpError> {
    let mut g = Graph::default();
    g.inputs.push(value_info("x"));
    g.outputs.push(value_info("y"));
    let mut n = node("LabelEncoder", &["x"], &["y"], attributes);
    n.domain = "ai.onnx.ml".into();
    g.nodes.push(n);
    let opsets = [(String::new(), 21), ("ai.onnx.ml".to_string(), 4)]
        .into_iter()
        .collect();
    let plan = Plan::build(&g, &opsets, OperationSet::Reproducible, &[])?;
    Ok(plan
        .run(vec![x.into()], RunOptions::default())?
        .remove(0)
        .into_tensor()?)
}

fn texts(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn strings_map_to_integers_with_a_default() {
    let attributes = [
        ("keys_strings", Attribute::Strings(texts(&["a", "b", "c"]))),
        ("values_int64s", Attribute::Ints(vec![10, 11, 12])),
        ("default_int64", Attribute::Int(42)),
    ];
    let y = label_encoder(strings(&[2, 2], &["c", "z", "a", "b"]), &attributes).unwrap();
    assert_eq!(y.shape(), &[2, 2]);
    assert_eq!(y.as_slice::<i64>().unwrap(), [12, 42, 10, 11]);
    // Without default_int64 a missing key gives -1.
    let y = label_encoder(strings(&[1], &["q"]), &attributes[..2]).unwrap();
    assert_eq!(y.as_slice::<i64>().unwrap(), [-1]);
}

#[test]
fn floats_compare_by_value_and_tensors_give_the_table() {
    // Float keys: -0.0 finds the key 0.0, any NaN finds the NaN key.
    let attributes = [
        ("keys_floats", Attribute::Floats(vec![0.0, f32::NAN, 1.5])),
        (
            "values_strings",
            Attribute::Strings(texts(&["zero", "nan", "x"])),
        ),
    ];
    let x = f32s(&[4], &[-0.0, f32::from_bits(0xffc0_0001), 1.5, 2.0]);
    let y = label_encoder(x, &attributes).unwrap();
    assert_eq!(y.as_strings().unwrap(), ["zero", "nan", "x", "_Unused"]);
    // keys_tensor / values_tensor / default_tensor (int16 values).
    let values: Tensor = Tensor::from_vec(vec![2], vec![7i16, -9]).unwrap();
    let default: Tensor = Tensor::from_vec(vec![1], vec![5i16]).unwrap();
    let attributes = [
        ("keys_tensor", Attribute::Tensor(i64s(&[2], &[3, 4]))),
        ("values_tensor", Attribute::Tensor(values)),
        ("default_tensor", Attribute::Tensor(default)),
    ];
    let y = label_encoder(i64s(&[3], &[4, 0, 3]), &attributes).unwrap();
    assert_eq!(y.as_slice::<i16>().unwrap(), [-9, 5, 7]);
}

#[test]
fn inconsistent_tables_are_errors() {
    let two_keys = [
        ("keys_strings", Attribute::Strings(texts(&["a", "b"]))),
        ("values_int64s", Attribute::Ints(vec![1])),
    ];
    assert!(label_encoder(strings(&[1], &["a"]), &two_keys).is_err());
    let both = [
        ("keys_strings", Attribute::Strings(texts(&["a"]))),
        ("keys_int64s", Attribute::Ints(vec![1])),
        ("values_int64s", Attribute::Ints(vec![1])),
    ];
    assert!(label_encoder(strings(&[1], &["a"]), &both).is_err());
    // Integer input against string keys.
    let table = [
        ("keys_strings", Attribute::Strings(texts(&["a"]))),
        ("values_int64s", Attribute::Ints(vec![1])),
    ];
    assert!(label_encoder(i64s(&[1], &[0]), &table).is_err());
}
