//! [`TextTokenizer`]: a model's tokenizer built with the `tokenizers` crate, from GGUF metadata
//! (`tokenizer.ggml.*`) or from a Hugging Face `tokenizer.json`, and [`IncrementalDecoder`] for
//! streaming output.
//!
//! From GGUF metadata, two `tokenizer.ggml.model` values:
//! - `gpt2`: the byte-level BPE of GPT-2 built from `tokenizer.ggml.tokens` and
//!   `tokenizer.ggml.merges`, with the pre-tokenizer that `tokenizer.ggml.pre` names:
//!   `default`/`gpt2` (the GPT-2 split), `smollm`/`starcoder`/`refact` (every digit split off on
//!   its own first, then the GPT-2 split), `qwen2` and `llama-bpe` (Qwen2's and Llama 3's
//!   regular-expression split: contractions, letter runs with one leading non-letter, digits one
//!   at a time (`qwen2`) or in runs of up to three (`llama-bpe`), punctuation runs, newlines,
//!   spaces; then byte-level symbols without a second split; `qwen2` normalizes the text to NFC
//!   first), as the Hugging Face tokenizers of those models do.
//! - `llama`: a SentencePiece BPE vocabulary (`tokenizer.ggml.tokens` with `tokenizer.ggml.scores`),
//!   encoded as llama.cpp's SentencePiece tokenizer does: the text's spaces become `▁`
//!   (U+2581), a `▁` is put in front of it (`tokenizer.ggml.add_space_prefix`, true when absent),
//!   then adjacent pieces are merged, highest-scoring merged piece first; characters outside the
//!   vocabulary become their UTF-8 bytes as the `<0xNN>` byte tokens (byte fallback), or the unknown
//!   token when the vocabulary has no byte tokens. This is a BPE whose merge list is every pair
//!   `(left, right)` of vocabulary pieces whose concatenation is a vocabulary piece, ranked by that
//!   piece's score, highest first (ties: the piece's id, then the ids of left and right): the
//!   construction Hugging Face uses to convert SentencePiece models.
//!
//! In both, control and user-defined tokens (`tokenizer.ggml.token_type` 3 and 4) are added
//! tokens matched whole in the input text, and `tokenizer.ggml.add_bos_token` /
//! `add_eos_token` become a post-processor that adds BOS / EOS when encoding with special tokens.
//!
//! From `tokenizer.json` (+ `tokenizer_config.json`): the file's own pipeline, its truncation and
//! padding switched off; BOS / EOS / UNK / PAD are the ids of `tokenizer_config.json`'s
//! `bos_token`, `eos_token`, `unk_token`, `pad_token`; special tokens are added by the file's
//! post-processor. Supported decoders: byte-level (GPT-2 style) and SentencePiece style (a
//! `Metaspace` decoder, or a sequence with `ByteFallback` / a `▁` replacement).
//!
//! Decoding maps each id to its bytes and turns the concatenation into a string, replacing
//! invalid UTF-8 by U+FFFD: byte-level tokens go through the inverse of GPT-2's byte-to-character
//! table; SentencePiece tokens are their text with `▁` read as a space, `<0xNN>` tokens the byte
//! `NN`; added tokens are their UTF-8 text. (The leading `▁` that encoding puts in front of a
//! SentencePiece text decodes as a space.)

use crate::{Error, Result};
use samebits_gguf::{GgufFile, Metadata};
use std::collections::HashMap;
use std::path::Path;
use tokenizers::models::bpe::{BPE, Merges, Vocab};
use tokenizers::normalizers::{NFC, NormalizerWrapper, Prepend, Replace};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

/// `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`).
const TOKEN_TYPE_NORMAL: i64 = 1;
const TOKEN_TYPE_CONTROL: i64 = 3;
const TOKEN_TYPE_USER_DEFINED: i64 = 4;

/// SentencePiece's word-boundary mark, U+2581.
const SPIECE_SPACE: char = '\u{2581}';

/// A `tokenizer.json`'s token ids must stay below twice its token count or this, whichever is
/// larger (the id-indexed tables stay proportionate to the file).
const MIN_ID_SPAN: usize = 1 << 16;

/// How vocabulary strings spell bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum PieceSpelling {
    /// GPT-2's byte-to-character table (`Ġ` is the space byte).
    ByteLevel,
    /// Text with `▁` for spaces, and `<0xNN>` byte tokens.
    SentencePiece,
}

impl PieceSpelling {
    /// The bytes a (non-added) vocabulary piece stands for.
    fn bytes(self, piece: &str, byte_of_char: &HashMap<char, u8>) -> Vec<u8> {
        match self {
            PieceSpelling::ByteLevel => piece
                .chars()
                .map(|c| byte_of_char.get(&c).copied())
                .collect::<Option<Vec<u8>>>()
                .unwrap_or_else(|| piece.as_bytes().to_vec()),
            PieceSpelling::SentencePiece => match byte_token(piece) {
                Some(b) => vec![b],
                None => piece.replace(SPIECE_SPACE, " ").into_bytes(),
            },
        }
    }
}

/// The byte of a `<0xNN>` token.
fn byte_token(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2)
        .then(|| u8::from_str_radix(hex, 16).ok())
        .flatten()
}

/// A tokenizer read from GGUF metadata or from a `tokenizer.json`.
pub struct TextTokenizer {
    inner: Tokenizer,
    tokens: Vec<String>,
    token_bytes: Vec<Vec<u8>>,
    bos: Option<u32>,
    eos: Option<u32>,
    unk: Option<u32>,
    pad: Option<u32>,
}

impl TextTokenizer {
    /// Builds the tokenizer described by the file's `tokenizer.ggml.*` metadata.
    pub fn from_gguf(file: &GgufFile) -> Result<TextTokenizer> {
        let meta = file.metadata();
        let name = file.name();
        let bad = |message: String| Error::Tokenizer(format!("{name}: {message}"));
        let model = meta.str("tokenizer.ggml.model")?;
        let tokens: Vec<String> = meta
            .str_array("tokenizer.ggml.tokens")?
            .into_iter()
            .map(String::from)
            .collect();
        let token_types = match meta.get("tokenizer.ggml.token_type") {
            Some(_) => meta.i64_array("tokenizer.ggml.token_type")?,
            None => vec![TOKEN_TYPE_NORMAL; tokens.len()],
        };
        if token_types.len() != tokens.len() {
            return Err(bad(format!(
                "{} token types for {} tokens",
                token_types.len(),
                tokens.len()
            )));
        }
        let id_of = |key: &str| -> Result<Option<u32>> {
            match meta.get(key) {
                None => Ok(None),
                Some(_) => {
                    let id = meta.u64(key)?;
                    if id >= tokens.len() as u64 {
                        return Err(bad(format!(
                            "{key} = {id} is outside the vocabulary of {}",
                            tokens.len()
                        )));
                    }
                    Ok(Some(id as u32))
                }
            }
        };
        let flag = |key: &str, absent: bool| -> Result<bool> {
            meta.get(key).map_or(Ok(absent), |_| Ok(meta.bool(key)?))
        };
        let (bos, eos) = (
            id_of("tokenizer.ggml.bos_token_id")?,
            id_of("tokenizer.ggml.eos_token_id")?,
        );
        let unk = id_of("tokenizer.ggml.unknown_token_id")?;
        let mut vocab = Vocab::with_capacity(tokens.len());
        for (id, token) in tokens.iter().enumerate() {
            vocab.entry(token.clone()).or_insert(id as u32);
        }
        let tokenizer_error = |e: tokenizers::Error| bad(e.to_string());
        let (mut inner, spelling) = match model {
            "gpt2" => (gpt2_tokenizer(meta, vocab, &bad)?, PieceSpelling::ByteLevel),
            "llama" => {
                let scores = meta.f32_array("tokenizer.ggml.scores")?;
                if scores.len() != tokens.len() {
                    return Err(bad(format!(
                        "{} scores for {} tokens",
                        scores.len(),
                        tokens.len()
                    )));
                }
                let merges = sentencepiece_merges(&tokens, &token_types, &scores, &vocab);
                let mut bpe = BPE::builder()
                    .vocab_and_merges(vocab, merges)
                    .byte_fallback(true);
                if let Some(unk) = unk {
                    bpe = bpe.unk_token(tokens[unk as usize].clone()).fuse_unk(true);
                }
                let bpe = bpe.build().map_err(|e| bad(e.to_string()))?;
                let mut inner = Tokenizer::new(bpe);
                let spaces =
                    Replace::new(" ", SPIECE_SPACE.to_string()).map_err(tokenizer_error)?;
                let normalizer = if flag("tokenizer.ggml.add_space_prefix", true)? {
                    NormalizerWrapper::Sequence(tokenizers::normalizers::Sequence::new(vec![
                        NormalizerWrapper::Prepend(Prepend::new(SPIECE_SPACE.to_string())),
                        NormalizerWrapper::Replace(spaces),
                    ]))
                } else {
                    NormalizerWrapper::Replace(spaces)
                };
                inner
                    .with_normalizer(Some(normalizer))
                    .map_err(tokenizer_error)?;
                (inner, PieceSpelling::SentencePiece)
            }
            other => {
                return Err(bad(format!(
                    "tokenizer.ggml.model `{other}` is not supported (only gpt2 and llama)"
                )));
            }
        };
        let added = |wanted: i64, special: bool| -> Vec<AddedToken> {
            tokens
                .iter()
                .zip(&token_types)
                .filter(|&(_, &t)| t == wanted)
                .map(|(token, _)| AddedToken::from(token.clone(), special))
                .collect()
        };
        inner
            .add_special_tokens(added(TOKEN_TYPE_CONTROL, true))
            .map_err(tokenizer_error)?;
        inner
            .add_tokens(added(TOKEN_TYPE_USER_DEFINED, false))
            .map_err(tokenizer_error)?;
        let mut template = Vec::new();
        let mut specials = Vec::new();
        for (id, wanted) in [
            (bos, flag("tokenizer.ggml.add_bos_token", false)?),
            (None, true),
            (eos, flag("tokenizer.ggml.add_eos_token", false)?),
        ] {
            match (id, wanted) {
                (None, true) => template.push("$A".to_string()),
                (Some(id), true) => {
                    template.push(tokens[id as usize].clone());
                    specials.push((tokens[id as usize].clone(), id));
                }
                _ => {}
            }
        }
        if !specials.is_empty() {
            let processor = TemplateProcessing::builder()
                .try_single(template)
                .map_err(|e| bad(format!("BOS/EOS template: {e}")))?
                .special_tokens(specials)
                .build()
                .map_err(|e| bad(format!("BOS/EOS template: {e}")))?;
            inner.with_post_processor(Some(processor));
        }

        let byte_of_char = byte_level_decoding_table();
        let token_bytes = tokens
            .iter()
            .zip(&token_types)
            .map(|(token, &t)| {
                if t == TOKEN_TYPE_CONTROL || t == TOKEN_TYPE_USER_DEFINED {
                    token.as_bytes().to_vec()
                } else {
                    spelling.bytes(token, &byte_of_char)
                }
            })
            .collect();
        Ok(TextTokenizer {
            bos,
            eos,
            unk,
            pad: id_of("tokenizer.ggml.padding_token_id")?,
            inner,
            tokens,
            token_bytes,
        })
    }

    /// Builds the tokenizer of a Hugging Face `tokenizer.json`; `config` is the parsed
    /// `tokenizer_config.json` (or `Null` when the folder has none), which names the special
    /// tokens.
    pub fn from_tokenizer_json(path: &Path, config: &serde_json::Value) -> Result<TextTokenizer> {
        let name = path.display().to_string();
        let bad = |message: String| Error::Tokenizer(format!("{name}: {message}"));
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let (json, mut inner) = parse_tokenizer_json(&text).map_err(bad)?;
        inner
            .with_truncation(None)
            .map_err(|e| bad(e.to_string()))?
            .with_padding(None);
        let spelling = decoder_spelling(&json["decoder"]).ok_or_else(|| {
            bad(format!(
                "decoder {} is not supported (byte-level or SentencePiece style only)",
                json["decoder"]
            ))
        })?;
        let vocab = inner.get_vocab(true);
        let size = vocab.values().max().map_or(0, |&id| id as usize + 1);
        // Tables below are indexed by id: a few tokens with huge ids (a hostile file) must not
        // make them gigabytes long. Real vocabularies number their tokens from 0 with few gaps.
        let limit = vocab.len().saturating_mul(2).max(MIN_ID_SPAN);
        if size > limit {
            return Err(bad(format!(
                "token id {} is far beyond the vocabulary's {} tokens (ids must stay below {limit})",
                size - 1,
                vocab.len()
            )));
        }
        let mut tokens = vec![String::new(); size];
        for (token, &id) in &vocab {
            tokens[id as usize] = token.clone();
        }
        let added = inner.get_added_tokens_decoder();
        let byte_of_char = byte_level_decoding_table();
        let token_bytes = tokens
            .iter()
            .enumerate()
            .map(|(id, token)| match added.contains_key(&(id as u32)) {
                true => token.as_bytes().to_vec(),
                false => spelling.bytes(token, &byte_of_char),
            })
            .collect();
        let special = |key: &str| -> Result<Option<u32>> {
            let content = match &config[key] {
                serde_json::Value::String(s) => s.as_str(),
                serde_json::Value::Object(o) => match o.get("content") {
                    Some(serde_json::Value::String(s)) => s.as_str(),
                    _ => return Err(bad(format!("tokenizer_config.json: {key} has no content"))),
                },
                _ => return Ok(None),
            };
            inner.token_to_id(content).map(Some).ok_or_else(|| {
                bad(format!(
                    "tokenizer_config.json: {key} `{content}` is not in the vocabulary"
                ))
            })
        };
        Ok(TextTokenizer {
            bos: special("bos_token")?,
            eos: special("eos_token")?,
            unk: special("unk_token")?,
            pad: special("pad_token")?,
            inner,
            tokens,
            token_bytes,
        })
    }

    /// The ids of `text`. With `add_special`, BOS and EOS are added where the model asks for
    /// them. Control tokens written in the text (`<|im_start|>`) are matched whole.
    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>> {
        let encoding = self
            .inner
            .encode(text, add_special)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The text of `ids`, control tokens included; invalid UTF-8 becomes U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        let mut bytes = Vec::new();
        for &id in ids {
            bytes.extend_from_slice(self.token_bytes(id)?);
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The bytes a token stands for.
    pub fn token_bytes(&self, id: u32) -> Result<&[u8]> {
        self.token_bytes
            .get(id as usize)
            .map(Vec::as_slice)
            .ok_or_else(|| {
                Error::Tokenizer(format!(
                    "id {id} is outside the vocabulary of {}",
                    self.vocab_size()
                ))
            })
    }

    /// The token's string as stored in the vocabulary (`Ġthe` for " the").
    pub fn id_to_token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// The id of a vocabulary string.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    pub fn eos_id(&self) -> Option<u32> {
        self.eos
    }

    pub fn unk_id(&self) -> Option<u32> {
        self.unk
    }

    pub fn pad_id(&self) -> Option<u32> {
        self.pad
    }

    /// A decoder that turns ids into text one at a time.
    pub fn incremental_decoder(&self) -> IncrementalDecoder<'_> {
        IncrementalDecoder {
            tokenizer: self,
            pending: Vec::new(),
        }
    }
}

/// The byte-level BPE of a `gpt2` GGUF vocabulary.
fn gpt2_tokenizer(
    meta: &Metadata,
    vocab: Vocab,
    bad: &dyn Fn(String) -> Error,
) -> Result<Tokenizer> {
    let merges = meta
        .str_array("tokenizer.ggml.merges")?
        .into_iter()
        .map(|m| {
            m.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| bad(format!("merge `{m}` has no space")))
        })
        .collect::<Result<Vec<_>>>()?;
    let pre = match meta.get("tokenizer.ggml.pre") {
        Some(_) => meta.str("tokenizer.ggml.pre")?,
        None => "default",
    };
    let (normalizer, pre_tokenizer) = gpt2_pre_tokenizer(pre)
        .ok_or_else(|| bad(format!("tokenizer.ggml.pre `{pre}` is not supported")))?;
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| bad(e.to_string()))?;
    let mut inner = Tokenizer::new(bpe);
    inner
        .with_normalizer(normalizer)
        .map_err(|e| bad(e.to_string()))?;
    inner.with_pre_tokenizer(Some(pre_tokenizer));
    Ok(inner)
}

/// The merges of a SentencePiece vocabulary (module doc): for every normal piece, each split into
/// two vocabulary pieces, ranked by the piece's score (highest first), then the piece's id, then
/// the ids of the two halves.
fn sentencepiece_merges(
    tokens: &[String],
    token_types: &[i64],
    scores: &[f32],
    vocab: &Vocab,
) -> Merges {
    let mut ranked: Vec<(f32, u32, u32, u32)> = Vec::new();
    for (id, piece) in tokens.iter().enumerate() {
        if token_types[id] != TOKEN_TYPE_NORMAL {
            continue;
        }
        for (split, _) in piece.char_indices().skip(1) {
            let (left, right) = piece.split_at(split);
            if let (Some(&l), Some(&r)) = (vocab.get(left), vocab.get(right)) {
                ranked.push((scores[id], id as u32, l, r));
            }
        }
    }
    ranked.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(a.1.cmp(&b.1))
            .then((a.2, a.3).cmp(&(b.2, b.3)))
    });
    ranked
        .into_iter()
        .map(|(_, _, l, r)| (tokens[l as usize].clone(), tokens[r as usize].clone()))
        .collect()
}

/// How a `tokenizer.json` decoder spells bytes, or `None` for a decoder this crate cannot
/// stream.
fn decoder_spelling(decoder: &serde_json::Value) -> Option<PieceSpelling> {
    let is_sentencepiece_step = |d: &serde_json::Value| match d["type"].as_str() {
        Some("ByteFallback" | "Metaspace") => true,
        Some("Replace") => d["pattern"]["String"].as_str() == Some("\u{2581}"),
        _ => false,
    };
    match decoder["type"].as_str()? {
        "ByteLevel" => Some(PieceSpelling::ByteLevel),
        "Metaspace" => Some(PieceSpelling::SentencePiece),
        "Sequence" => {
            let steps = decoder["decoders"].as_array()?;
            if steps.iter().any(|d| d["type"] == "ByteLevel") {
                Some(PieceSpelling::ByteLevel)
            } else if steps.iter().any(is_sentencepiece_step) {
                Some(PieceSpelling::SentencePiece)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The normalizer and pre-tokenizer of a byte-level BPE for a `tokenizer.ggml.pre` value.
fn gpt2_pre_tokenizer(pre: &str) -> Option<(Option<NormalizerWrapper>, PreTokenizerWrapper)> {
    let byte_level = PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true));
    match pre {
        "default" | "gpt2" => Some((None, byte_level)),
        "smollm" | "starcoder" | "refact" => Some((
            None,
            PreTokenizerWrapper::Sequence(Sequence::new(vec![
                PreTokenizerWrapper::Digits(Digits::new(true)),
                byte_level,
            ])),
        )),
        // Qwen2's tokenizer.json also normalizes to NFC first.
        "qwen2" => Some((
            Some(NormalizerWrapper::NFC(NFC)),
            regex_then_byte_level("")?,
        )),
        "llama-bpe" => Some((None, regex_then_byte_level("{1,3}")?)),
        _ => None,
    }
}

/// The split of Qwen2's and Llama 3's tokenizers (the `Split` regular expression of their
/// tokenizer.json, each match its own piece), digits repeated `digits` times, then byte-level
/// symbols (no second split).
fn regex_then_byte_level(digits: &str) -> Option<PreTokenizerWrapper> {
    let pattern = format!(
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{{L}}\p{{N}}]?\p{{L}}+|\p{{N}}{digits}| ?[^\s\p{{L}}\p{{N}}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    );
    let split = Split::new(
        SplitPattern::Regex(pattern),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .ok()?;
    Some(PreTokenizerWrapper::Sequence(Sequence::new(vec![
        PreTokenizerWrapper::Split(split),
        PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, false, false)),
    ])))
}

/// The inverse of GPT-2's byte-to-character table: printable Latin-1 bytes (`!`..`~`,
/// `¡`..`¬`, `®`..`ÿ`) stand for themselves, the other 68 bytes for U+0100 onwards in byte order.
fn byte_level_decoding_table() -> HashMap<char, u8> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut next = 0u32;
    (0..=255u8)
        .map(|b| {
            let c = if printable(b) {
                char::from(b)
            } else {
                next += 1;
                char::from_u32(255 + next).expect("U+0100..U+0143 are chars")
            };
            (c, b)
        })
        .collect()
}

/// Turns ids into text as they arrive, emitting text only when it is complete UTF-8: a character
/// split across tokens is held back until its last byte arrives.
pub struct IncrementalDecoder<'a> {
    tokenizer: &'a TextTokenizer,
    pending: Vec<u8>,
}

impl IncrementalDecoder<'_> {
    /// Adds one id; returns the text that became complete (possibly empty). Invalid bytes become
    /// U+FFFD as soon as they are known to be invalid.
    pub fn push(&mut self, id: u32) -> Result<String> {
        self.pending
            .extend_from_slice(self.tokenizer.token_bytes(id)?);
        let mut text = String::new();
        let mut rest = self.pending.as_slice();
        loop {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    text.push_str(valid);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    text.push_str(std::str::from_utf8(valid).expect("checked valid"));
                    match e.error_len() {
                        Some(bad) => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[bad..];
                        }
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        Ok(text)
    }

    /// Ends the stream: bytes of an unfinished character become U+FFFD.
    pub fn finish(self) -> String {
        String::from_utf8_lossy(&self.pending).into_owned()
    }
}

/// Parses a Hugging Face `tokenizer.json` into the `tokenizers` library's tokenizer, returning
/// the parsed JSON too. The text is checked to be JSON first: the library panics, rather than
/// erroring, on a decoder section that is not valid JSON (`tokenizers` 0.23.2,
/// `decoders/mod.rs`: `expect("Helper")`; found by the `hf_folder` fuzz target), and it is handed
/// only JSON it has been checked to be.
pub fn parse_tokenizer_json(
    text: &str,
) -> std::result::Result<(serde_json::Value, Tokenizer), String> {
    let json: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let tokenizer = Tokenizer::from_bytes(text.as_bytes()).map_err(|e| e.to_string())?;
    Ok((json, tokenizer))
}
