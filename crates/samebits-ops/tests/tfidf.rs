//! TfIdfVectorizer: n-gram counts with skips, the three modes, strings, each batch row the same
//! as the row alone, and malformed pools are errors.

mod common;
use common::*;
use samebits_ir::{Attribute, Tensor, Value};
use samebits_ops::OpError;

fn tfidf(x: Tensor, attributes: &[(&str, Attribute)]) -> Result<Tensor, OpError> {
    let inputs: Vec<Option<Value>> = vec![Some(x.into())];
    Ok(
        run_node_opset("TfIdfVectorizer", 21, &inputs, attributes, 1)?
            .remove(0)
            .into_tensor()?,
    )
}

/// Unigrams [2, 3], bigrams [(2, 3), (3, 2)], in columns 0 .. 3.
fn attributes(mode: &str, min: i64, skip: i64) -> Vec<(&'static str, Attribute)> {
    vec![
        ("mode", Attribute::String(mode.into())),
        ("min_gram_length", Attribute::Int(min)),
        ("max_gram_length", Attribute::Int(2)),
        ("max_skip_count", Attribute::Int(skip)),
        ("ngram_counts", Attribute::Ints(vec![0, 2])),
        ("ngram_indexes", Attribute::Ints(vec![0, 1, 2, 3])),
        ("pool_int64s", Attribute::Ints(vec![2, 3, 2, 3, 3, 2])),
        ("weights", Attribute::Floats(vec![0.5, 0.25, 2.0, 3.0])),
    ]
}

#[test]
fn counts_with_skips_and_modes() {
    let x = i64s(&[5], &[2, 3, 2, 7, 3]);
    // Skip 0: unigrams 2 x2, 3 x2; bigrams (2,3) once, (3,2) once.
    let y = tfidf(x.clone(), &attributes("TF", 1, 0)).unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), [2.0, 2.0, 1.0, 1.0]);
    // Skip up to 1 adds (2,2)? no: (x0,x2) = (2,2), (x1,x3) = (3,7), (x2,x4) = (2,3):
    // one more (2,3); unigrams are not counted again.
    let y = tfidf(x.clone(), &attributes("TF", 1, 1)).unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), [2.0, 2.0, 2.0, 1.0]);
    // Only bigrams.
    let y = tfidf(x.clone(), &attributes("TF", 2, 0)).unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), [0.0, 0.0, 1.0, 1.0]);
    let y = tfidf(x.clone(), &attributes("IDF", 1, 0)).unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), [0.5, 0.25, 2.0, 3.0]);
    let y = tfidf(x, &attributes("TFIDF", 1, 1)).unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), [1.0, 0.5, 4.0, 3.0]);
}

#[test]
fn batch_rows_are_the_rows_alone_and_strings_work() {
    let data = [2i64, 3, 2, 7, 3, 3, 2, 2, 3, 9, 7, 7];
    let batch = tfidf(i64s(&[3, 4], &data), &attributes("TFIDF", 1, 2)).unwrap();
    assert_eq!(batch.shape(), &[3, 4]);
    for r in 0..3 {
        let alone = tfidf(i64s(&[4], &data[r * 4..][..4]), &attributes("TFIDF", 1, 2)).unwrap();
        assert_eq!(&bits(&batch)[r * 4..][..4], &bits(&alone)[..], "row {r}");
    }
    // Bigrams (to, be) in column 1 and (or, to) in column 0.
    let words = vec!["to".to_string(), "be".into(), "or".into(), "to".into()];
    let string_pool = [
        ("mode", Attribute::String("TF".into())),
        ("min_gram_length", Attribute::Int(2)),
        ("max_gram_length", Attribute::Int(2)),
        ("max_skip_count", Attribute::Int(0)),
        ("ngram_counts", Attribute::Ints(vec![0, 0])),
        ("ngram_indexes", Attribute::Ints(vec![1, 0])),
        ("pool_strings", Attribute::Strings(words)),
    ];
    let x = strings(&[5], &["to", "be", "or", "to", "be"]);
    let y = tfidf(x, &string_pool).unwrap();
    assert_eq!(y.as_slice::<f32>().unwrap(), [1.0, 2.0]);
}

#[test]
fn malformed_pools_are_errors() {
    let x = i64s(&[3], &[1, 2, 3]);
    let mut bad = attributes("TF", 1, 0);
    bad[4] = ("ngram_counts", Attribute::Ints(vec![0, 3])); // 3 tokens of bigrams
    assert!(tfidf(x.clone(), &bad).is_err());
    let mut bad = attributes("TF", 1, 0);
    bad[5] = ("ngram_indexes", Attribute::Ints(vec![0, 1, 2]));
    assert!(tfidf(x.clone(), &bad).is_err());
    let mut bad = attributes("TF", 1, 0);
    bad[0] = ("mode", Attribute::String("BM25".into()));
    assert!(tfidf(x.clone(), &bad).is_err());
    assert!(tfidf(strings(&[1], &["a"]), &attributes("TF", 1, 0)).is_err());
}
