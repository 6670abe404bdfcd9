//! [`GgufTokenizer`]: the tokenizer stored in GGUF metadata (`tokenizer.ggml.*`), built with the
//! `tokenizers` crate, and [`IncrementalDecoder`] for streaming output.
//!
//! Supported: `tokenizer.ggml.model == "gpt2"`, the byte-level BPE of GPT-2 built from
//! `tokenizer.ggml.tokens` and `tokenizer.ggml.merges`, with the pre-tokenizer that
//! `tokenizer.ggml.pre` names: `default`/`gpt2` (the GPT-2 split) and `smollm`/`starcoder`/`refact`
//! (every digit split off on its own first, then the GPT-2 split), as the Hugging Face tokenizers of
//! those models do. Control and user-defined tokens (`tokenizer.ggml.token_type` 3 and 4) are added
//! tokens matched whole in the input text.
//!
//! Decoding maps each id to its bytes (byte-level tokens through the inverse of GPT-2's
//! byte-to-character table, added tokens as their UTF-8 text) and turns the concatenation into a
//! string, replacing invalid UTF-8 by U+FFFD.

use crate::{Error, GgufFile, Result};
use std::collections::HashMap;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, Tokenizer};

/// `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`).
const TOKEN_TYPE_CONTROL: i64 = 3;
const TOKEN_TYPE_USER_DEFINED: i64 = 4;

/// A tokenizer read from GGUF metadata.
pub struct GgufTokenizer {
    inner: Tokenizer,
    tokens: Vec<String>,
    token_bytes: Vec<Vec<u8>>,
    bos: Option<u32>,
    eos: Option<u32>,
    unk: Option<u32>,
    pad: Option<u32>,
    add_bos: bool,
    add_eos: bool,
}

impl GgufTokenizer {
    /// Builds the tokenizer described by the file's `tokenizer.ggml.*` metadata.
    pub fn from_gguf(file: &GgufFile) -> Result<GgufTokenizer> {
        let meta = file.metadata();
        let model = meta.str("tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(Error::Tokenizer(format!(
                "{}: tokenizer.ggml.model `{model}` is not supported (only gpt2)",
                file.name()
            )));
        }
        let tokens: Vec<String> = meta
            .str_array("tokenizer.ggml.tokens")?
            .into_iter()
            .map(String::from)
            .collect();
        let token_types = match meta.get("tokenizer.ggml.token_type") {
            Some(_) => meta.i64_array("tokenizer.ggml.token_type")?,
            None => vec![1; tokens.len()],
        };
        if token_types.len() != tokens.len() {
            return Err(Error::Tokenizer(format!(
                "{}: {} token types for {} tokens",
                file.name(),
                token_types.len(),
                tokens.len()
            )));
        }
        let merges = meta
            .str_array("tokenizer.ggml.merges")?
            .into_iter()
            .map(|m| {
                m.split_once(' ')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .ok_or_else(|| {
                        Error::Tokenizer(format!("{}: merge `{m}` has no space", file.name()))
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        let id_of = |key: &str| -> Result<Option<u32>> {
            match meta.get(key) {
                None => Ok(None),
                Some(_) => {
                    let id = meta.u64(key)?;
                    if id >= tokens.len() as u64 {
                        return Err(Error::Tokenizer(format!(
                            "{}: {key} = {id} is outside the vocabulary of {}",
                            file.name(),
                            tokens.len()
                        )));
                    }
                    Ok(Some(id as u32))
                }
            }
        };
        let flag =
            |key: &str| -> Result<bool> { meta.get(key).map_or(Ok(false), |_| meta.bool(key)) };
        let pre = match meta.get("tokenizer.ggml.pre") {
            Some(_) => meta.str("tokenizer.ggml.pre")?,
            None => "default",
        };
        let pre_tokenizer = gpt2_pre_tokenizer(pre).ok_or_else(|| {
            Error::Tokenizer(format!(
                "{}: tokenizer.ggml.pre `{pre}` is not supported",
                file.name()
            ))
        })?;

        let mut vocab = Vocab::with_capacity(tokens.len());
        for (id, token) in tokens.iter().enumerate() {
            vocab.entry(token.clone()).or_insert(id as u32);
        }
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| Error::Tokenizer(format!("{}: {e}", file.name())))?;
        let mut inner = Tokenizer::new(bpe);
        inner.with_pre_tokenizer(Some(pre_tokenizer));
        let added = |wanted: i64, special: bool| -> Vec<AddedToken> {
            tokens
                .iter()
                .zip(&token_types)
                .filter(|&(_, &t)| t == wanted)
                .map(|(token, _)| AddedToken::from(token.clone(), special))
                .collect()
        };
        let tokenizer_error =
            |e: tokenizers::Error| Error::Tokenizer(format!("{}: {e}", file.name()));
        inner
            .add_special_tokens(added(TOKEN_TYPE_CONTROL, true))
            .map_err(tokenizer_error)?;
        inner
            .add_tokens(added(TOKEN_TYPE_USER_DEFINED, false))
            .map_err(tokenizer_error)?;

        let byte_of_char = byte_level_decoding_table();
        let token_bytes = tokens
            .iter()
            .zip(&token_types)
            .map(|(token, &t)| {
                let added = t == TOKEN_TYPE_CONTROL || t == TOKEN_TYPE_USER_DEFINED;
                let bytes: Option<Vec<u8>> = (!added)
                    .then(|| {
                        token
                            .chars()
                            .map(|c| byte_of_char.get(&c).copied())
                            .collect()
                    })
                    .flatten();
                bytes.unwrap_or_else(|| token.as_bytes().to_vec())
            })
            .collect();
        Ok(GgufTokenizer {
            bos: id_of("tokenizer.ggml.bos_token_id")?,
            eos: id_of("tokenizer.ggml.eos_token_id")?,
            unk: id_of("tokenizer.ggml.unknown_token_id")?,
            pad: id_of("tokenizer.ggml.padding_token_id")?,
            add_bos: flag("tokenizer.ggml.add_bos_token")?,
            add_eos: flag("tokenizer.ggml.add_eos_token")?,
            inner,
            tokens,
            token_bytes,
        })
    }

    /// The ids of `text`. With `add_special`, BOS and EOS are added where the metadata asks for
    /// them (`tokenizer.ggml.add_bos_token`, `add_eos_token`). Control tokens written in the text
    /// (`<|im_start|>`) are matched whole.
    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>> {
        let encoding = self
            .inner
            .encode(text, false)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        let mut ids = Vec::with_capacity(encoding.get_ids().len() + 2);
        if add_special && self.add_bos {
            ids.extend(self.bos);
        }
        ids.extend_from_slice(encoding.get_ids());
        if add_special && self.add_eos {
            ids.extend(self.eos);
        }
        Ok(ids)
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

/// The pre-tokenizer of a byte-level BPE for a `tokenizer.ggml.pre` value.
fn gpt2_pre_tokenizer(pre: &str) -> Option<PreTokenizerWrapper> {
    let byte_level = PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true));
    match pre {
        "default" | "gpt2" => Some(byte_level),
        "smollm" | "starcoder" | "refact" => {
            Some(PreTokenizerWrapper::Sequence(Sequence::new(vec![
                PreTokenizerWrapper::Digits(Digits::new(true)),
                byte_level,
            ])))
        }
        _ => None,
    }
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
    tokenizer: &'a GgufTokenizer,
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
