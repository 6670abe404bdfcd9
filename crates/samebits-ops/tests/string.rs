//! String family: normalizing, concatenation with broadcasting, splitting (Python `str.split`
//! semantics, as the ONNX reference uses) and full regex matches. Expected values are worked
//! out by hand from the ONNX operator definitions.
mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};
use samebits_ops::OpError;

fn run(
    op: &str,
    inputs: &[Tensor],
    attrs: &[(&str, Attribute)],
    n: usize,
) -> Result<Vec<Value>, OpError> {
    let inputs: Vec<Option<Value>> = inputs.iter().map(|t| Some(t.clone().into())).collect();
    run_node_opset(op, 20, &inputs, attrs, n)
}

fn texts(v: &Value) -> Vec<&str> {
    tensor(v)
        .as_strings()
        .unwrap()
        .iter()
        .map(String::as_str)
        .collect()
}

fn s(v: &str) -> Attribute {
    Attribute::String(v.into())
}

#[test]
fn string_concat_broadcasts_and_keeps_utf8() {
    let out = run(
        "StringConcat",
        &[strings(&[2], &["a", "bé"]), strings(&[1], &["_ü"])],
        &[],
        1,
    )
    .unwrap();
    assert_eq!(texts(&out[0]), ["a_ü", "bé_ü"]);
    let out = run(
        "StringConcat",
        &[strings(&[], &["x"]), strings(&[], &[""])],
        &[],
        1,
    )
    .unwrap();
    assert_eq!(
        (tensor(&out[0]).shape(), texts(&out[0])),
        (&[][..], vec!["x"])
    );
    let e = run(
        "StringConcat",
        &[strings(&[2], &["a", "b"]), strings(&[3], &["a", "b", "c"])],
        &[],
        1,
    )
    .unwrap_err();
    assert!(e.to_string().contains("cannot be broadcast"), "{e}");
    let e = run(
        "StringConcat",
        &[strings(&[1], &["a"]), f32s(&[1], &[1.])],
        &[],
        1,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("input 1 must be a string tensor, got f32"),
        "{e}"
    );
}

#[test]
fn string_split_on_a_delimiter_pads_and_counts() {
    let x = strings(&[2], &["a,b,,c", ""]);
    let out = run(
        "StringSplit",
        std::slice::from_ref(&x),
        &[("delimiter", s(","))],
        2,
    )
    .unwrap();
    assert_eq!(tensor(&out[0]).shape(), &[2, 4]);
    assert_eq!(texts(&out[0]), ["a", "b", "", "c", "", "", "", ""]);
    assert_eq!(tensor(&out[1]).as_slice::<i64>().unwrap(), &[4, 1]);
    let out = run(
        "StringSplit",
        &[x],
        &[("delimiter", s(",")), ("maxsplit", Attribute::Int(1))],
        2,
    )
    .unwrap();
    assert_eq!(texts(&out[0]), ["a", "b,,c", "", ""]);
}

#[test]
fn string_split_on_whitespace_drops_empty_pieces() {
    let x = strings(&[3], &["  hello \t world ", "x", "   "]);
    let out = run("StringSplit", &[x], &[("delimiter", s(""))], 2).unwrap();
    assert_eq!(texts(&out[0]), ["hello", "world", "x", "", "", ""]);
    assert_eq!(tensor(&out[1]).as_slice::<i64>().unwrap(), &[2, 1, 0]);
    // After maxsplit splits the rest is kept as is, trailing whitespace included.
    let out = run(
        "StringSplit",
        &[strings(&[1], &["a  b  c  "])],
        &[("maxsplit", Attribute::Int(1))],
        2,
    )
    .unwrap();
    assert_eq!(texts(&out[0]), ["a", "b  c  "]);
    let out = run("StringSplit", &[strings(&[0], &[])], &[], 2).unwrap();
    assert_eq!(tensor(&out[0]).shape(), &[0, 0]);
}

#[test]
fn string_normalizer_removes_stopwords_then_changes_case() {
    let x = strings(&[3], &["monday", "tuesday", "Monday"]);
    let stop = ("stopwords", Attribute::Strings(vec!["monday".into()]));
    let out = run(
        "StringNormalizer",
        std::slice::from_ref(&x),
        &[stop.clone(), ("case_change_action", s("UPPER"))],
        1,
    )
    .unwrap();
    assert_eq!(texts(&out[0]), ["TUESDAY"]);
    let sensitive = ("is_case_sensitive", Attribute::Int(1));
    let out = run(
        "StringNormalizer",
        std::slice::from_ref(&x),
        &[stop.clone(), sensitive, ("case_change_action", s("LOWER"))],
        1,
    )
    .unwrap();
    assert_eq!(texts(&out[0]), ["tuesday", "monday"]);
    // Everything removed: one empty string, the [1, C] form kept.
    let x2 = strings(&[1, 2], &["monday", "MONDAY"]);
    let out = run("StringNormalizer", &[x2], &[stop], 1).unwrap();
    assert_eq!(
        (tensor(&out[0]).shape(), texts(&out[0])),
        (&[1, 1][..], vec![""])
    );
    let e = run("StringNormalizer", &[strings(&[2, 1], &["a", "b"])], &[], 1).unwrap_err();
    assert!(
        e.to_string().contains("shape [C] or [1, C], got [2, 1]"),
        "{e}"
    );
    let e = run(
        "StringNormalizer",
        &[x],
        &[("case_change_action", s("TITLE"))],
        1,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("\"case_change_action\" must be NONE, LOWER or UPPER"),
        "{e}"
    );
}

#[test]
fn regex_full_match_anchors_the_whole_pattern() {
    let x = strings(
        &[4],
        &["ab@cd.com", "ab@cd.com.x", "x ab@cd.com", "ab@cd.com\n"],
    );
    let out = run(
        "RegexFullMatch",
        &[x],
        &[("pattern", s(r"[a-z]+@[a-z]+\.com"))],
        1,
    )
    .unwrap();
    assert_eq!(tensor(&out[0]).as_bools().unwrap(), &[1, 0, 0, 0]);
    // The alternation is grouped before anchoring: "ab" matches a|ab as a whole.
    let out = run(
        "RegexFullMatch",
        &[strings(&[2], &["ab", "b"])],
        &[("pattern", s("a|ab"))],
        1,
    )
    .unwrap();
    assert_eq!(tensor(&out[0]).as_bools().unwrap(), &[1, 0]);
    let e = run(
        "RegexFullMatch",
        &[strings(&[1], &["a"])],
        &[("pattern", s("("))],
        1,
    )
    .unwrap_err();
    assert!(e.to_string().contains("attribute \"pattern\" \"(\""), "{e}");
}
