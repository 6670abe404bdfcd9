//! Optional family: wrapping, emptiness, unwrapping, and ONNX 1.22's plain tensor / sequence /
//! omitted inputs. Expected values follow the ONNX operator definitions.
mod common;
use common::*;
use samebits_ir::{Attribute, DType, Value, ValueType};
use samebits_ops::OpError;

fn run(op: &str, input: Option<Value>, attrs: &[(&str, Attribute)]) -> Result<Value, OpError> {
    Ok(run_node_opset(op, 18, &[input], attrs, 1)?.remove(0))
}

fn has_element(input: Option<Value>) -> bool {
    let out = run("OptionalHasElement", input, &[]).unwrap();
    tensor(&out).as_bools().unwrap() == [1]
}

fn f32_type() -> Attribute {
    Attribute::Type(ValueType::tensor(DType::F32, None))
}

#[test]
fn optional_wraps_a_value_and_unwraps_it() {
    let x = f32s(&[2], &[1., 2.]);
    let wrapped = run("Optional", Some(x.clone().into()), &[]).unwrap();
    assert_eq!(wrapped, Value::Optional(Some(Box::new(x.clone().into()))));
    assert!(has_element(Some(wrapped.clone())));
    let unwrapped = run("OptionalGetElement", Some(wrapped), &[]).unwrap();
    assert_eq!(unwrapped, Value::Tensor(x));
}

#[test]
fn empty_optionals_and_omitted_inputs_have_no_element() {
    let empty = run("Optional", None, &[("type", f32_type())]).unwrap();
    assert_eq!(empty, Value::Optional(None));
    assert!(!has_element(Some(empty.clone())));
    assert!(!has_element(None));
    let e = run("OptionalGetElement", Some(empty), &[]).unwrap_err();
    assert!(
        e.to_string().contains("input 0 is an empty optional"),
        "{e}"
    );
}

#[test]
fn plain_tensors_and_sequences_count_as_present() {
    let x: Value = f32s(&[], &[3.]).into();
    assert!(has_element(Some(x.clone())));
    assert_eq!(run("OptionalGetElement", Some(x.clone()), &[]).unwrap(), x);
    let s = Value::Sequence(vec![f32s(&[1], &[1.])]);
    assert!(has_element(Some(s.clone())));
    assert_eq!(run("OptionalGetElement", Some(s.clone()), &[]).unwrap(), s);
}

#[test]
fn optional_checks_its_type_attribute() {
    let e = run("Optional", None, &[]).unwrap_err();
    assert!(
        e.to_string().contains("needs the \"type\" attribute"),
        "{e}"
    );
    let e = run(
        "Optional",
        Some(i64s(&[1], &[1]).into()),
        &[("type", f32_type())],
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("input 0 has dtype i64, attribute \"type\" says f32"),
        "{e}"
    );
}
