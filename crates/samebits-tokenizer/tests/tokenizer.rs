//! The tokenizer and chat template: on the real SmolLM2 file against ids printed by
//! `tools/reference_tokens.py` (an independent plain-Python BPE and the Hugging Face `tokenizers`
//! package, both built from the same GGUF metadata), and on a tiny synthetic vocabulary.

#[path = "../../samebits-gguf/tests/common/mod.rs"]
mod common;

use common::{GgufWriter, smollm2_path, string, strings};
use samebits_gguf::{GgufFile, MetadataValue};
use samebits_tokenizer::{ChatMessage, ChatTemplate, TextTokenizer};
use std::sync::Arc;

const FRANCE: &str = "The capital of France is";
const MIXED: &str =
    "Héllo wörld! 🚀 Prices: 12345 €, naïve café — 2024-11-21 😀\n\tTabs  and   spaces";
const CHAT: &str = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n";

/// Printed by `python3 tools/reference_tokens.py <SmolLM2 GGUF>` (gguf 0.x, tokenizers, regex
/// from PyPI); the plain-Python BPE and the `tokenizers` package agreed on every string.
const FRANCE_IDS: [u32; 5] = [504, 3575, 282, 4649, 314];
const MIXED_IDS: [u32; 45] = [
    56, 2756, 31394, 267, 29989, 400, 17, 15107, 244, 218, 38573, 42, 216, 33, 34, 35, 36, 37,
    24927, 28, 15486, 46494, 37366, 1841, 216, 34, 32, 34, 36, 29, 33, 33, 29, 34, 33, 40303, 218,
    198, 197, 68, 7366, 216, 284, 256, 5600,
];
const CHAT_IDS: [u32; 12] = [1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 2, 198];

fn smollm2() -> Option<(GgufFile, TextTokenizer)> {
    let file = GgufFile::open(smollm2_path()?).unwrap();
    let tokenizer = TextTokenizer::from_gguf(&file).unwrap();
    Some((file, tokenizer))
}

#[test]
fn smollm2_ids_match_the_python_reference_and_round_trip() {
    let Some((_, tok)) = smollm2() else { return };
    assert_eq!(tok.vocab_size(), 49152);
    assert_eq!(
        (tok.bos_id(), tok.eos_id(), tok.unk_id(), tok.pad_id()),
        (Some(1), Some(2), Some(0), Some(2))
    );
    for (text, ids) in [
        (FRANCE, &FRANCE_IDS[..]),
        (MIXED, &MIXED_IDS),
        (CHAT, &CHAT_IDS),
    ] {
        assert_eq!(tok.encode(text, false).unwrap(), ids, "{text:?}");
        // add_bos_token is false in this file: add_special adds nothing.
        assert_eq!(tok.encode(text, true).unwrap(), ids, "{text:?}");
        assert_eq!(tok.decode(ids).unwrap(), text);
    }
    assert_eq!(tok.id_to_token(3575), Some("Ġcapital"));
    assert_eq!(tok.token_to_id("<|im_end|>"), Some(2));
    assert!(tok.decode(&[49152]).is_err());
}

#[test]
fn incremental_decoding_holds_back_split_characters() {
    let Some((_, tok)) = smollm2() else { return };
    let mut decoder = tok.incremental_decoder();
    let mut pieces = Vec::new();
    for &id in &MIXED_IDS {
        pieces.push(decoder.push(id).unwrap());
    }
    assert_eq!(decoder.finish(), "");
    assert_eq!(pieces.concat(), MIXED);
    // " 🚀" is spread over ids 15107 (the space and the first byte), 244, 218 (positions 7..10):
    // the space comes out at once, the rocket only with its last byte.
    assert_eq!(&pieces[7..10], &[" ", "", "🚀"]);
    assert!(pieces.iter().all(|p| !p.contains('\u{FFFD}')));
    // A stream cut inside a character flushes it as U+FFFD.
    let mut cut = tok.incremental_decoder();
    assert_eq!(cut.push(15107).unwrap(), " ");
    assert_eq!(cut.finish(), "\u{FFFD}");
}

#[test]
fn smollm2_chat_template_renders_the_chatml_prompt() {
    let Some((file, tok)) = smollm2() else { return };
    let template = ChatTemplate::from_gguf(&file, &tok).unwrap();
    let prompt = template
        .render_chat(&[ChatMessage::new("user", "What is 2+2?")], true)
        .unwrap();
    assert_eq!(
        prompt,
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging \
         Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    );
    let with_system = template
        .render_chat(
            &[
                ChatMessage::new("system", "Be brief."),
                ChatMessage::new("user", "Hi"),
            ],
            false,
        )
        .unwrap();
    assert_eq!(
        with_system,
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    );
    let ids = tok.encode(&prompt, false).unwrap();
    assert_eq!(ids[0], 1);
    assert_eq!(ids[ids.len() - 4], 1); // <|im_start|>
    assert_eq!(tok.decode(&ids[ids.len() - 3..]).unwrap(), "assistant\n");
    assert_eq!(tok.decode(&ids).unwrap(), prompt);
}

#[test]
fn template_helpers_behave_like_transformers() {
    let source = "{% for m in messages %}{% if m.role not in ['user'] %}\
                  {{ raise_exception('only users: ' + m.role) }}{% endif %}\
                  {{ loop.index }}:{{ m.content.strip() | upper }}{% if not loop.last %},{% endif %}\
                  {% endfor %}{{ eos_token }}";
    let template = ChatTemplate::new(source, "<s>", "</s>").unwrap();
    let users = [
        ChatMessage::new("user", "  a "),
        ChatMessage::new("user", "b"),
    ];
    assert_eq!(template.render_chat(&users, false).unwrap(), "1:A,2:B</s>");
    let err = template
        .render_chat(&[ChatMessage::new("bot", "x")], false)
        .unwrap_err();
    assert!(err.to_string().contains("only users: bot"), "{err}");
    // No clock: Llama 3.x templates fall back to their own date, a direct call fails.
    let clock = ChatTemplate::new("{{ strftime_now('%Y') }}", "", "").unwrap();
    assert!(clock.render_chat(&[], false).is_err());
    let llama3_date = "{%- if strftime_now is defined %}{{ strftime_now('%d %b %Y') }}\
                       {%- else %}26 Jul 2024{%- endif %}";
    let dated = ChatTemplate::new(llama3_date, "", "").unwrap();
    assert_eq!(dated.render_chat(&[], false).unwrap(), "26 Jul 2024");
    assert!(ChatTemplate::new("{% if %}", "", "").is_err());
}

/// A template from a hostile file (found by mutation: nested `range(99999)` loops ran without
/// end under `--chat`) stops with an error after a bounded amount of work.
#[test]
fn a_runaway_template_stops_with_an_error() {
    let source = "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}";
    let template = ChatTemplate::new(source, "", "").unwrap();
    let started = std::time::Instant::now();
    let err = template
        .render_chat(&[ChatMessage::new("user", "hi")], true)
        .unwrap_err();
    assert!(err.to_string().contains("fuel"), "{err}");
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
}

#[test]
fn synthetic_gpt2_vocabulary_encodes_with_merges_and_control_tokens() {
    // Byte-level symbols: "Ġ" is the space byte. Merges build "ab" and "Ġab".
    let tokens = ["<eos>", "a", "b", "Ġ", "ab", "Ġab", "1", "2"];
    let bytes = GgufWriter::new(3)
        .kv("tokenizer.ggml.model", string("gpt2"))
        .kv("tokenizer.ggml.pre", string("smollm"))
        .kv("tokenizer.ggml.tokens", strings(&tokens))
        .kv(
            "tokenizer.ggml.token_type",
            MetadataValue::Array([3, 1, 1, 1, 1, 1, 1, 1].map(MetadataValue::I32).to_vec()),
        )
        .kv("tokenizer.ggml.merges", strings(&["a b", "Ġ ab"]))
        .kv("tokenizer.ggml.eos_token_id", MetadataValue::U32(0))
        .kv("tokenizer.ggml.add_eos_token", MetadataValue::Bool(true))
        .to_bytes();
    let file = GgufFile::from_source("tiny.gguf", Arc::new(bytes)).unwrap();
    let tok = TextTokenizer::from_gguf(&file).unwrap();
    assert_eq!(tok.encode("ab ab<eos>12", false).unwrap(), [4, 5, 0, 6, 7]);
    assert_eq!(tok.encode("ab", true).unwrap(), [4, 0]);
    assert_eq!(tok.decode(&[4, 5, 0, 6]).unwrap(), "ab ab<eos>1");

    let bad_pre = GgufWriter::new(3)
        .kv("tokenizer.ggml.model", string("gpt2"))
        .kv("tokenizer.ggml.pre", string("mystery"))
        .kv("tokenizer.ggml.tokens", strings(&tokens))
        .kv("tokenizer.ggml.merges", strings(&["a b"]))
        .to_bytes();
    let file = GgufFile::from_source("tiny.gguf", Arc::new(bad_pre)).unwrap();
    let err = TextTokenizer::from_gguf(&file).err().unwrap();
    assert!(err.to_string().contains("mystery"), "{err}");
}

/// A SentencePiece (`llama`) vocabulary small enough to tokenize by hand. Encoding turns spaces
/// into `▁`, puts a `▁` in front, then repeatedly merges the adjacent pair whose concatenation
/// is the highest-scoring vocabulary piece (llama.cpp's SentencePiece tokenizer). By hand:
/// - "hello world" → `▁hello▁world` = ▁ h e l l o ▁ w o r l d; the merges, best score first:
///   ll (-4), ▁h (-5), ▁he (-3, available once ▁h exists), ▁hell (-2.5), ▁hello (-1), ▁w (-6),
///   or (-7), ▁wor (-8), ld (-9), ▁world (-2) → [▁hello, ▁world] = [17, 22].
/// - "hell" → ll, ▁h, ▁he, ▁hell → [16]; "el" → `▁el`: only e+l is a piece → [▁, el] = [5, 24].
/// - "hé": é is not a piece, so its UTF-8 bytes C3 A9 become the byte tokens → [▁h, <0xC3>,
///   <0xA9>] = [13, 3, 4]; "hi": no piece or byte token for i → [▁h, <unk>] = [13, 0].
/// - "<s>hello": the control token is matched whole, the text after it gets its own `▁` (as
///   llama.cpp does after a special token) → [1, 17]; with add_special, BOS first.
fn sentencepiece_vocabulary() -> GgufFile {
    // (piece, token type, score); types: 1 normal, 2 unknown, 3 control, 6 byte.
    let vocab: [(&str, i32, f32); 25] = [
        ("<unk>", 2, 0.0),
        ("<s>", 3, 0.0),
        ("</s>", 3, 0.0),
        ("<0xC3>", 6, 0.0),
        ("<0xA9>", 6, 0.0),
        ("▁", 1, -100.0),
        ("h", 1, -100.0),
        ("e", 1, -100.0),
        ("l", 1, -100.0),
        ("o", 1, -100.0),
        ("w", 1, -100.0),
        ("r", 1, -100.0),
        ("d", 1, -100.0),
        ("▁h", 1, -5.0),
        ("▁he", 1, -3.0),
        ("ll", 1, -4.0),
        ("▁hell", 1, -2.5),
        ("▁hello", 1, -1.0),
        ("▁w", 1, -6.0),
        ("or", 1, -7.0),
        ("▁wor", 1, -8.0),
        ("ld", 1, -9.0),
        ("▁world", 1, -2.0),
        ("llo", 1, -10.0),
        ("el", 1, -11.0),
    ];
    let pieces: Vec<&str> = vocab.iter().map(|v| v.0).collect();
    let bytes = GgufWriter::new(3)
        .kv("tokenizer.ggml.model", string("llama"))
        .kv("tokenizer.ggml.tokens", strings(&pieces))
        .kv(
            "tokenizer.ggml.token_type",
            MetadataValue::Array(vocab.iter().map(|v| MetadataValue::I32(v.1)).collect()),
        )
        .kv(
            "tokenizer.ggml.scores",
            MetadataValue::Array(vocab.iter().map(|v| MetadataValue::F32(v.2)).collect()),
        )
        .kv("tokenizer.ggml.unknown_token_id", MetadataValue::U32(0))
        .kv("tokenizer.ggml.bos_token_id", MetadataValue::U32(1))
        .kv("tokenizer.ggml.eos_token_id", MetadataValue::U32(2))
        .kv("tokenizer.ggml.add_bos_token", MetadataValue::Bool(true))
        .to_bytes();
    GgufFile::from_source("spm.gguf", Arc::new(bytes)).unwrap()
}

#[test]
fn synthetic_sentencepiece_vocabulary_encodes_by_score_with_byte_fallback() {
    let tok = TextTokenizer::from_gguf(&sentencepiece_vocabulary()).unwrap();
    for (text, ids) in [
        ("hello world", &[17, 22][..]),
        ("hell", &[16]),
        ("el", &[5, 24]),
        ("hé", &[13, 3, 4]),
        ("hi", &[13, 0]),
        ("<s>hello", &[1, 17]),
    ] {
        assert_eq!(tok.encode(text, false).unwrap(), ids, "{text:?}");
    }
    assert_eq!(tok.encode("hello", true).unwrap(), [1, 17]);
    // `▁` decodes as a space (the prefix one included), byte tokens as their bytes.
    assert_eq!(tok.decode(&[17, 22]).unwrap(), " hello world");
    assert_eq!(tok.decode(&[13, 3, 4]).unwrap(), " hé");
    let mut decoder = tok.incremental_decoder();
    let pieces: Vec<String> = [13, 3, 4]
        .iter()
        .map(|&id| decoder.push(id).unwrap())
        .collect();
    assert_eq!(pieces, [" h", "", "é"]);
    assert_eq!(
        (tok.bos_id(), tok.eos_id(), tok.unk_id()),
        (Some(1), Some(2), Some(0))
    );
}

/// Qwen2's (`qwen2`: NFC, digits one at a time) and Llama 3's (`llama-bpe`: digits in runs of up
/// to three) regular-expression splits on a tiny byte-level vocabulary: the ids the Hugging Face
/// `tokenizers` package gives with the models' own tokenizer.json pipelines, printed by
/// `python3 tools/reference_regex_bpe.py` (tokenizers 0.23.3).
#[test]
fn qwen2_and_llama_bpe_splits_match_the_tokenizers_package() {
    // GPT-2's byte-level symbols (printable Latin-1 stand for themselves, the other 68 bytes for
    // U+0100 onwards in byte order), sorted by code point, then the merged pieces.
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut next = 0u32;
    let mut symbols: Vec<char> = (0..=255u8)
        .map(|b| match printable(b) {
            true => char::from(b),
            false => {
                next += 1;
                char::from_u32(255 + next).unwrap()
            }
        })
        .collect();
    symbols.sort();
    let merges = ["1 2", "12 3", "Ġ w", "l l", "ll o", "i t"];
    let mut tokens: Vec<String> = symbols.iter().map(char::to_string).collect();
    tokens.extend(merges.iter().map(|m| m.replace(' ', "")));
    let token_refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let texts = [
        "Hello wo\u{308}rld 12345 it's  ok\n\n\tx 7z!",
        "IT'S 1234567 \u{d6}R\r\n  end",
    ];
    let expected: [(&str, [&[u32]; 2]); 2] = [
        (
            "qwen2",
            [
                &[
                    39, 68, 260, 258, 127, 114, 81, 75, 67, 220, 16, 17, 18, 19, 20, 220, 261, 6,
                    82, 220, 220, 78, 74, 198, 198, 197, 87, 220, 22, 89, 0,
                ],
                &[
                    40, 51, 6, 50, 220, 16, 17, 18, 19, 20, 21, 22, 220, 127, 244, 49, 201, 198,
                    220, 220, 68, 77, 67,
                ],
            ],
        ),
        (
            "llama-bpe",
            [
                &[
                    39, 68, 260, 258, 78, 136, 230, 81, 75, 67, 220, 257, 19, 20, 220, 261, 6, 82,
                    220, 220, 78, 74, 198, 198, 197, 87, 220, 22, 89, 0,
                ],
                &[
                    40, 51, 6, 50, 220, 257, 19, 20, 21, 22, 220, 127, 244, 49, 201, 198, 220, 220,
                    68, 77, 67,
                ],
            ],
        ),
    ];
    for (pre, ids) in expected {
        let bytes = GgufWriter::new(3)
            .kv("tokenizer.ggml.model", string("gpt2"))
            .kv("tokenizer.ggml.pre", string(pre))
            .kv("tokenizer.ggml.tokens", strings(&token_refs))
            .kv("tokenizer.ggml.merges", strings(&merges))
            .to_bytes();
        let file = GgufFile::from_source("tiny.gguf", Arc::new(bytes)).unwrap();
        let tok = TextTokenizer::from_gguf(&file).unwrap();
        for (text, want) in texts.iter().zip(ids) {
            assert_eq!(tok.encode(text, false).unwrap(), want, "{pre}: {text:?}");
        }
    }
}

/// A `tokenizer.json` whose decoder section is not valid JSON is an error, not a panic inside
/// the `tokenizers` library (found by the `hf_folder` fuzz target: this decoder text is the one
/// its crash input held; fuzz/regressions/hf_folder replays the whole input).
#[test]
fn a_decoder_section_that_is_not_json_is_an_error() {
    let text = r###"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": null, "post_processor": null,
        "decoder": {"type": "WordPiece", "prefix": ""prompt_tokens" true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": {"[UNK]": 0, "a": 1}}}"###;
    let err = samebits_tokenizer::parse_tokenizer_json(text).unwrap_err();
    assert!(err.starts_with("not JSON: expected"), "{err}");
    // The same file with a valid decoder parses.
    let fixed = text.replace(
        r#""prefix": ""prompt_tokens" true"#,
        r###""prefix": "##", "cleanup": true"###,
    );
    let (json, tokenizer) = samebits_tokenizer::parse_tokenizer_json(&fixed).unwrap();
    assert_eq!(json["decoder"]["type"], "WordPiece");
    assert_eq!(tokenizer.token_to_id("a"), Some(1));
}

/// A `tokenizer.json` with a token id far beyond its token count is an error, not tables
/// gigabytes long (found by the `hf_folder` fuzz target: a 259-token vocabulary whose last id
/// was 100,000,002 took over 4 GB; fuzz/regressions/hf_folder replays the input).
#[test]
fn a_token_id_far_beyond_the_vocabulary_is_an_error() {
    let file = |id: u64| {
        format!(
            r#"{{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null, "pre_tokenizer": null, "post_processor": null,
            "decoder": {{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                        "use_regex": true}},
            "model": {{"type": "BPE", "dropout": null, "unk_token": null,
                      "continuing_subword_prefix": null, "end_of_word_suffix": null,
                      "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                      "vocab": {{"a": 0, "b": 1, "ab": {id}}}, "merges": [["a", "b"]]}}}}"#
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, file(120_000_000)).unwrap();
    let err = TextTokenizer::from_tokenizer_json(&path, &serde_json::Value::Null)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("token id 120000000 is far beyond"), "{err}");
    // A gap within the limit loads.
    std::fs::write(&path, file(1000)).unwrap();
    let tokenizer = TextTokenizer::from_tokenizer_json(&path, &serde_json::Value::Null).unwrap();
    assert_eq!(tokenizer.encode("ab", false).unwrap(), [1000]);
}
