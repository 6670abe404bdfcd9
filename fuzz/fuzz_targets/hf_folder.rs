//! A Hugging Face folder through what `samebits generate` and `samebits embed` do with one: the
//! fuzz input is split into `config.json`, `model.safetensors` and `tokenizer.json` (at
//! [`samebits_fuzz::PART_SEPARATOR`]); the tokenizer is read and round-trips a short text, then
//! the folder loads as a decoder ([`Llm::load`], one greedy token) and as a sentence embedder
//! ([`Embedder::load`], one text).

#![no_main]

use libfuzzer_sys::fuzz_target;
use samebits_fuzz::{scratch_subdir, split_parts, write_file};
use samebits_llm::{Embedder, GenerateOptions, Llm, generate};
use samebits_runtime::OperationSet;
use samebits_tokenizer::TextTokenizer;

fuzz_target!(|data: &[u8]| {
    let [config, safetensors, tokenizer] = split_parts::<3>(data);
    let folder = scratch_subdir("hf");
    write_file(&folder, "config.json", config);
    write_file(&folder, "model.safetensors", safetensors);
    let tokenizer_json = write_file(&folder, "tokenizer.json", tokenizer);
    if let Ok(tokenizer) =
        TextTokenizer::from_tokenizer_json(&tokenizer_json, &serde_json::Value::Null)
        && let Ok(ids) = tokenizer.encode("Hello, world! 123", true)
    {
        let _ = tokenizer.decode(&ids);
    }
    if let Ok(llm) = Llm::load(&folder, OperationSet::Reproducible) {
        let options = GenerateOptions {
            chat: false,
            max_tokens: 1,
            sampling: Default::default(),
        };
        let _ = generate(&llm, "Hi", &options, |_| {});
    }
    if let Ok(embedder) = Embedder::load(&folder, OperationSet::Reproducible) {
        let _ = embedder.embed(&["Hello, world!"]);
    }
});
