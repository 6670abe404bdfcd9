//! GGUF bytes through what `samebits generate` does: the container and metadata
//! ([`GgufFile`]), the model configuration ([`ModelConfig::from_gguf`]), the tokenizer
//! ([`TextTokenizer::from_gguf`]) and a round trip of a short text, the chat template, every
//! tensor read and dequantized, and, when all of that holds, the model build ([`Llm::load`]) and
//! two greedy and two sampled tokens of a chat prompt.

#![no_main]

use libfuzzer_sys::fuzz_target;
use samebits_fuzz::{scratch_subdir, write_file};
use samebits_gguf::{GgufFile, ModelConfig};
use samebits_llm::{GenerateOptions, Llm, SamplingOptions, generate};
use samebits_runtime::OperationSet;
use samebits_tokenizer::{ChatMessage, ChatTemplate, TextTokenizer};

fuzz_target!(|data: &[u8]| {
    let path = write_file(&scratch_subdir("gguf"), "model.gguf", data);
    let Ok(file) = GgufFile::open(&path) else {
        return;
    };
    for info in file.tensor_infos() {
        if let Ok(tensor) = file.tensor(&info.name) {
            let _ = tensor.to_f32();
        }
    }
    let config = ModelConfig::from_gguf(&file);
    let Ok(tokenizer) = TextTokenizer::from_gguf(&file) else {
        return;
    };
    if let Ok(ids) = tokenizer.encode("Hello, world! 123", true) {
        let _ = tokenizer.decode(&ids);
    }
    if let Ok(template) = ChatTemplate::from_gguf(&file, &tokenizer) {
        let _ = template.render_chat(&[ChatMessage::new("user", "Hi")], true);
    }
    if config.is_err() {
        return;
    }
    let Ok(llm) = Llm::load(&path, OperationSet::Reproducible) else {
        return;
    };
    for sampling in [
        SamplingOptions::default(),
        SamplingOptions {
            temperature: 0.8,
            top_k: 5,
            top_p: 0.9,
            seed: 1,
        },
    ] {
        let options = GenerateOptions {
            chat: llm.chat_template.is_some(),
            max_tokens: 2,
            sampling,
        };
        let _ = generate(&llm, "Hi", &options, |_| {});
    }
});
