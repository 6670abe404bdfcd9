//! [`ChatTemplate`]: renders `tokenizer.chat_template` (a Jinja template written for Hugging Face
//! `transformers`) with minijinja, configured the way `transformers` configures Jinja
//! (`trim_blocks`, `lstrip_blocks`, loop controls) and with the helpers those templates call:
//! `raise_exception(msg)` and the common Python `str`/`dict` methods (`strip`, `startswith`,
//! `split`, `items`, ...). `strftime_now` is left undefined: rendering must not depend on the
//! clock, so a template that checks `strftime_now is defined` (Llama 3.x) takes its own fixed
//! date, and one that calls it anyway fails with an error.

use crate::{Error, Result, TextTokenizer};
use minijinja::value::{Value, ValueKind};
use minijinja::{Environment, ErrorKind, State};
use samebits_gguf::GgufFile;

const TEMPLATE_NAME: &str = "chat_template";

/// One message of a conversation (serialized as generation receipts and OpenAI requests write
/// it: `{"role": ..., "content": ...}`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// The most template instructions one render may execute: real chat templates over long
/// conversations use a few thousand; nested `range(99999)` loops would use billions.
pub const CHAT_TEMPLATE_FUEL: u64 = 5_000_000;

/// A compiled chat template with the special tokens it may refer to.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

impl ChatTemplate {
    /// Compiles `source`; `bos_token` and `eos_token` are the strings the template sees under
    /// those names.
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<ChatTemplate> {
        let mut env = Environment::new();
        // A template comes from the model file: bound its work (loops, calls) so that a hostile
        // one fails with an error instead of running for minutes (docs/security.md).
        env.set_fuel(Some(CHAT_TEMPLATE_FUEL));
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.add_function("raise_exception", |message: String| -> Result<Value, _> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
        });
        env.set_unknown_method_callback(python_method);
        env.add_template_owned(TEMPLATE_NAME, source.to_string())
            .map_err(|e| Error::ChatTemplate(e.to_string()))?;
        Ok(ChatTemplate {
            env,
            bos_token: bos_token.into(),
            eos_token: eos_token.into(),
        })
    }

    /// The template in `tokenizer.chat_template`, with BOS/EOS strings from the tokenizer.
    pub fn from_gguf(file: &GgufFile, tokenizer: &TextTokenizer) -> Result<ChatTemplate> {
        ChatTemplate::for_tokenizer(file.metadata().str("tokenizer.chat_template")?, tokenizer)
    }

    /// Compiles `source` with the BOS/EOS strings of `tokenizer` (empty when it has none).
    pub fn for_tokenizer(source: &str, tokenizer: &TextTokenizer) -> Result<ChatTemplate> {
        let token = |id: Option<u32>| {
            id.and_then(|id| tokenizer.id_to_token(id))
                .unwrap_or_default()
        };
        ChatTemplate::new(source, token(tokenizer.bos_id()), token(tokenizer.eos_id()))
    }

    /// The prompt text for `messages`; with `add_generation_prompt` the template appends the
    /// opening of the assistant's turn.
    pub fn render_chat(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String> {
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| {
                Value::from_iter([
                    ("role", Value::from(m.role.as_str())),
                    ("content", Value::from(m.content.as_str())),
                ])
            })
            .collect();
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| Error::ChatTemplate(e.to_string()))?;
        template
            .render(minijinja::context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos_token,
                eos_token => self.eos_token,
            })
            .map_err(|e| Error::ChatTemplate(e.to_string()))
    }
}

/// The Python `str` and `dict` methods that chat templates call on values.
fn python_method(
    _state: &State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, minijinja::Error> {
    let unknown = || {
        minijinja::Error::new(
            ErrorKind::UnknownMethod,
            format!("{} has no method named {method}", value.kind()),
        )
    };
    let str_arg = |i: usize| args.get(i).and_then(|a| a.as_str());
    if let Some(s) = value.as_str() {
        let chars: Option<Vec<char>> = str_arg(0).map(|c| c.chars().collect());
        let is_stripped = |c: char| {
            chars
                .as_ref()
                .map_or(c.is_whitespace(), |set| set.contains(&c))
        };
        return Ok(match method {
            "strip" => Value::from(s.trim_matches(is_stripped)),
            "lstrip" => Value::from(s.trim_start_matches(is_stripped)),
            "rstrip" => Value::from(s.trim_end_matches(is_stripped)),
            "startswith" => Value::from(s.starts_with(str_arg(0).ok_or_else(unknown)?)),
            "endswith" => Value::from(s.ends_with(str_arg(0).ok_or_else(unknown)?)),
            "upper" => Value::from(s.to_uppercase()),
            "lower" => Value::from(s.to_lowercase()),
            "replace" => Value::from(s.replace(
                str_arg(0).ok_or_else(unknown)?,
                str_arg(1).ok_or_else(unknown)?,
            )),
            "split" => match str_arg(0) {
                Some(sep) => Value::from_iter(s.split(sep).map(Value::from)),
                None => Value::from_iter(s.split_whitespace().map(Value::from)),
            },
            _ => return Err(unknown()),
        });
    }
    if value.kind() == ValueKind::Map {
        let keys = || value.try_iter().into_iter().flatten();
        return Ok(match method {
            "items" => Value::from_iter(keys().map(|k| {
                let v = value.get_item(&k).unwrap_or_default();
                Value::from(vec![k, v])
            })),
            "keys" => Value::from_iter(keys()),
            "values" => Value::from_iter(keys().map(|k| value.get_item(&k).unwrap_or_default())),
            "get" => {
                let found = args.first().and_then(|k| value.get_item(k).ok());
                match found {
                    Some(v) if !v.is_undefined() => v,
                    _ => args.get(1).cloned().unwrap_or(Value::from(())),
                }
            }
            _ => return Err(unknown()),
        });
    }
    Err(unknown())
}
