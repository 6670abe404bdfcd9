//! Sentence embeddings of all-MiniLM-L6-v2 (skipped with a notice when scripts/setup.sh has not
//! fetched it) against `tests/fixtures/minilm_embeddings.json`, written by
//! `tools/reference_embed.py`: token ids from the Hugging Face `tokenizers` package and
//! embeddings from an independent numpy float64 BERT forward, each text run alone.
//! - token ids equal the reference's (and, for the first sentence, the vocab.txt line numbers
//!   of its words, read by hand: [CLS] 101, the 1996, cat 4937, sits 7719, on 2006, mat 13523,
//!   . 1012, [SEP] 102);
//! - every embedding is within 1e-5 (absolute, per element) of the float64 one, and has unit norm;
//! - cosine similarities order as meaning does: the two cat sentences and the two market
//!   sentences are each other's nearest neighbours;
//! - a text's embedding has the same bits alone and in a padded batch;
//! - an embedding receipt verifies, and one with a changed hash does not.

use samebits_llm::Embedder;
use samebits_llm::embed::{EmbeddingReceipt, verify};
use samebits_ops::OperationSet;
use samebits_testdata::MINILM;
use std::path::PathBuf;

fn model_dir() -> Option<PathBuf> {
    let weights = samebits_testdata::cached(&format!("{MINILM}/model.safetensors"))?;
    Some(weights.parent()?.to_path_buf())
}

#[derive(serde::Deserialize)]
struct Reference {
    normalize: bool,
    cases: Vec<Case>,
}

#[derive(serde::Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
    embedding: Vec<f64>,
}

fn reference() -> Reference {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/minilm_embeddings.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot = |x: &[f32], y: &[f32]| -> f64 {
        x.iter()
            .zip(y)
            .map(|(&p, &q)| f64::from(p) * f64::from(q))
            .sum()
    };
    dot(a, b) / (dot(a, a) * dot(b, b)).sqrt()
}

#[test]
fn minilm_embeddings_match_the_float64_reference() {
    let Some(dir) = model_dir() else { return };
    let reference = reference();
    let embedder = Embedder::load(&dir, OperationSet::Reproducible).unwrap();
    assert_eq!(embedder.dim, 384);
    assert_eq!(embedder.normalize, reference.normalize);
    assert_eq!(
        embedder.token_ids(&reference.cases[0].text).unwrap(),
        [101, 1996, 4937, 7719, 2006, 1996, 13523, 1012, 102]
    );
    let texts: Vec<&str> = reference.cases.iter().map(|c| c.text.as_str()).collect();
    for case in &reference.cases {
        assert_eq!(
            embedder.token_ids(&case.text).unwrap(),
            case.ids,
            "{:?}",
            case.text
        );
    }
    let batch = embedder.embed(&texts).unwrap();
    let rows: Vec<&[f32]> = batch.as_slice::<f32>().unwrap().chunks(384).collect();
    let mut worst = 0f64;
    for (case, row) in reference.cases.iter().zip(&rows) {
        let err = row
            .iter()
            .zip(&case.embedding)
            .fold(0f64, |m, (&a, &b)| m.max((f64::from(a) - b).abs()));
        worst = worst.max(err);
        let norm: f64 = row.iter().map(|&x| f64::from(x) * f64::from(x)).sum();
        assert!(
            (norm.sqrt() - 1.0).abs() < 1e-6,
            "{:?}: norm {norm}",
            case.text
        );
    }
    eprintln!("max |embedding - float64| = {worst:.2e}");
    assert!(worst <= 1e-5, "max error {worst}");

    // Nearest neighbours: cat ↔ kitten, market ↔ investors.
    let nearest = |i: usize| {
        (0..rows.len())
            .filter(|&j| j != i)
            .max_by(|&a, &b| cosine(rows[i], rows[a]).total_cmp(&cosine(rows[i], rows[b])))
            .unwrap()
    };
    assert_eq!(
        [nearest(0), nearest(1), nearest(2), nearest(3)],
        [1, 0, 3, 2]
    );
    assert!(cosine(rows[0], rows[1]) > 0.5 && cosine(rows[0], rows[2]) < 0.2);

    // Alone (no padding) and in the batch: the same bits.
    for (i, text) in texts.iter().enumerate() {
        let alone = embedder.embed(&[text]).unwrap();
        let same = alone
            .as_slice::<f32>()
            .unwrap()
            .iter()
            .zip(rows[i])
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{text:?}: batched and alone differ");
    }
}

#[test]
fn embedding_receipts_verify_and_catch_changes() {
    let Some(dir) = model_dir() else { return };
    let embedder = Embedder::load(&dir, OperationSet::Reproducible).unwrap();
    let texts = ["The cat sits on the mat.", "Receipts record hashes."];
    let embeddings = embedder.embed(&texts).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("embed.json");
    let receipt = EmbeddingReceipt::new(&embedder, &texts, &embeddings, &path).unwrap();
    receipt.write(&path).unwrap();
    assert!(verify(&path).unwrap().matches());
    let mut changed = receipt.clone();
    changed.sha256 = "0".repeat(64);
    changed.write(&path).unwrap();
    assert!(!verify(&path).unwrap().matches());
}
