//! The OpenAI API's request and response bodies, as `/v1/completions` and
//! `/v1/chat/completions` take and give them: requests are read field by field so that every
//! refusal names its field (`param`, as OpenAI errors do), and options samebits cannot honour
//! (several choices, log-probabilities, penalties, tools) are refused rather than ignored.
//! Responses carry the generation's receipt as the top-level `samebits_receipt` object.

use axum::http::StatusCode;
use samebits_llm::SamplingOptions;
use samebits_tokenizer::ChatMessage;
use serde_json::{Map, Value, json};

/// A refused request: the status, a message, and the field it is about.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub param: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            param: None,
        }
    }

    /// A 400 about `field`.
    pub fn field(field: &str, message: impl std::fmt::Display) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: format!("`{field}`: {message}"),
            param: Some(field.into()),
        }
    }

    /// The OpenAI error body: `{"error": {"message", "type", "param", "code"}}`.
    pub fn body(&self) -> Value {
        let kind = match self.status {
            StatusCode::NOT_FOUND => "not_found_error",
            StatusCode::TOO_MANY_REQUESTS => "rate_limit_error",
            StatusCode::PAYLOAD_TOO_LARGE | StatusCode::BAD_REQUEST => "invalid_request_error",
            _ => "server_error",
        };
        json!({"error": {
            "message": self.message,
            "type": kind,
            "param": self.param,
            "code": Value::Null,
        }})
    }
}

/// What to generate from.
#[derive(Clone, Debug, PartialEq)]
pub enum Prompt {
    /// `/v1/completions`: raw text, continued as is.
    Text(String),
    /// `/v1/chat/completions`: a conversation rendered by the model's chat template.
    Chat(Vec<ChatMessage>),
}

/// A request, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerationRequest {
    pub prompt: Prompt,
    /// `None`: as many as the context holds.
    pub max_tokens: Option<usize>,
    pub sampling: SamplingOptions,
    pub stop: Vec<String>,
    pub stream: bool,
    /// `stream_options.include_usage`: a last chunk with the token counts.
    pub include_usage: bool,
}

/// Which endpoint a request came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Completions,
    ChatCompletions,
}

impl Endpoint {
    /// The prefix of response ids.
    pub fn id_prefix(self) -> &'static str {
        match self {
            Endpoint::Completions => "cmpl",
            Endpoint::ChatCompletions => "chatcmpl",
        }
    }
}

/// OpenAI's default `max_tokens` of `/v1/completions`.
const COMPLETIONS_DEFAULT_MAX_TOKENS: usize = 16;
/// OpenAI's limit on stop strings.
const MAX_STOPS: usize = 4;

/// Reads a request body for `endpoint` served as `model_id`.
pub fn parse_request(
    body: &[u8],
    endpoint: Endpoint,
    model_id: &str,
) -> Result<GenerationRequest, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("the request body is not JSON: {e}"),
        )
    })?;
    let Value::Object(fields) = value else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the request body must be a JSON object",
        ));
    };
    let f = Fields(&fields);
    let model = f.string("model")?.ok_or_else(|| required("model"))?;
    if model != model_id {
        return Err(ApiError {
            status: StatusCode::NOT_FOUND,
            message: format!("model `{model}` is not served here; this server has `{model_id}`"),
            param: Some("model".into()),
        });
    }
    let prompt = match endpoint {
        Endpoint::Completions => Prompt::Text(completion_prompt(&f)?),
        Endpoint::ChatCompletions => Prompt::Chat(chat_messages(&f)?),
    };
    f.refuse_unsupported()?;
    let max_tokens = match endpoint {
        Endpoint::Completions => Some(
            f.count("max_tokens")?
                .unwrap_or(COMPLETIONS_DEFAULT_MAX_TOKENS),
        ),
        Endpoint::ChatCompletions => match f.count("max_completion_tokens")? {
            Some(n) => Some(n),
            None => f.count("max_tokens")?,
        },
    };
    if max_tokens == Some(0) {
        return Err(ApiError::field("max_tokens", "must be at least 1"));
    }
    let temperature = f.number("temperature")?.unwrap_or(1.0);
    if !(0.0..=2.0).contains(&temperature) {
        return Err(ApiError::field(
            "temperature",
            format!("must lie in [0, 2], got {temperature}"),
        ));
    }
    let top_p = f.number("top_p")?.unwrap_or(1.0);
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(ApiError::field(
            "top_p",
            format!("must lie in (0, 1], got {top_p}"),
        ));
    }
    let sampling = SamplingOptions {
        temperature: temperature as f32,
        top_k: f.count("top_k")?.unwrap_or(0),
        top_p: top_p as f32,
        seed: f.unsigned("seed")?.unwrap_or(0),
    };
    let stream = f.boolean("stream")?.unwrap_or(false);
    let include_usage = match fields.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(Value::Object(o)) => Fields(o)
            .boolean("include_usage")
            .map_err(|e| ApiError::field("stream_options.include_usage", e.message))?
            .unwrap_or(false),
        Some(_) => return Err(ApiError::field("stream_options", "must be an object")),
    };
    Ok(GenerationRequest {
        prompt,
        max_tokens,
        sampling,
        stop: stops(&f)?,
        stream,
        include_usage,
    })
}

fn required(field: &str) -> ApiError {
    ApiError::field(field, "is required")
}

/// Typed access to a request's fields; absent and `null` read as `None`.
struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    fn string(&self, key: &str) -> Result<Option<String>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(ApiError::field(
                key,
                format!("must be a string, got {other}"),
            )),
        }
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(ApiError::field(
                key,
                format!("must be a boolean, got {other}"),
            )),
        }
    }

    fn number(&self, key: &str) -> Result<Option<f64>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(other) => Err(ApiError::field(
                key,
                format!("must be a number, got {other}"),
            )),
        }
    }

    fn unsigned(&self, key: &str) -> Result<Option<u64>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => n.as_u64().map(Some).ok_or_else(|| {
                ApiError::field(key, format!("must be a whole number >= 0, got {n}"))
            }),
            Some(other) => Err(ApiError::field(
                key,
                format!("must be a whole number >= 0, got {other}"),
            )),
        }
    }

    fn count(&self, key: &str) -> Result<Option<usize>, ApiError> {
        Ok(self
            .unsigned(key)?
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)))
    }

    /// Refuses options samebits does not implement, when set to anything but their no-op value.
    fn refuse_unsupported(&self) -> Result<(), ApiError> {
        for key in ["n", "best_of"] {
            if let Some(n) = self.unsigned(key)?
                && n != 1
            {
                return Err(ApiError::field(key, "only 1 is supported"));
            }
        }
        for key in ["presence_penalty", "frequency_penalty"] {
            if self.number(key)?.is_some_and(|p| p != 0.0) {
                return Err(ApiError::field(key, "only 0 is supported"));
            }
        }
        if self.boolean("echo")? == Some(true) {
            return Err(ApiError::field("echo", "is not supported"));
        }
        let unsupported = |v: &Value| match v {
            Value::Bool(b) => *b,
            Value::Number(n) => n.as_f64() != Some(0.0),
            Value::Object(o) => !o.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::String(s) => !s.is_empty(),
            Value::Null => false,
        };
        for key in [
            "logprobs",
            "top_logprobs",
            "logit_bias",
            "suffix",
            "tools",
            "functions",
        ] {
            if self.get(key).is_some_and(unsupported) {
                return Err(ApiError::field(key, "is not supported"));
            }
        }
        if let Some(format) = self.get("response_format")
            && format.get("type").and_then(Value::as_str) != Some("text")
        {
            return Err(ApiError::field(
                "response_format",
                "only {\"type\": \"text\"} is supported",
            ));
        }
        Ok(())
    }
}

/// `prompt`: a string, or an array holding one string.
fn completion_prompt(f: &Fields) -> Result<String, ApiError> {
    match f.get("prompt") {
        None => Err(required("prompt")),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(items)) => match items.as_slice() {
            [Value::String(s)] => Ok(s.clone()),
            _ => Err(ApiError::field(
                "prompt",
                "must be a string or an array of one string (send one request per prompt)",
            )),
        },
        Some(other) => Err(ApiError::field(
            "prompt",
            format!("must be a string, got {other}"),
        )),
    }
}

/// `messages`: `[{"role", "content"}]`, the content a string or an array of text parts.
fn chat_messages(f: &Fields) -> Result<Vec<ChatMessage>, ApiError> {
    let Some(Value::Array(items)) = f.get("messages") else {
        return Err(match f.get("messages") {
            None => required("messages"),
            Some(_) => ApiError::field("messages", "must be an array of messages"),
        });
    };
    if items.is_empty() {
        return Err(ApiError::field(
            "messages",
            "must hold at least one message",
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let field = |name: &str| format!("messages[{i}].{name}");
            let Value::Object(message) = item else {
                return Err(ApiError::field(
                    &format!("messages[{i}]"),
                    "must be an object",
                ));
            };
            let role = match message.get("role") {
                Some(Value::String(role)) => role.clone(),
                _ => return Err(ApiError::field(&field("role"), "must be a string")),
            };
            let content = match message.get("content") {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Array(parts)) => parts
                    .iter()
                    .map(|part| match (part.get("type"), part.get("text")) {
                        (Some(t), Some(Value::String(text))) if t == "text" => Ok(text.as_str()),
                        _ => Err(ApiError::field(
                            &field("content"),
                            "only text parts ({\"type\": \"text\", \"text\": ...}) are supported",
                        )),
                    })
                    .collect::<Result<String, _>>()?,
                Some(Value::Null) | None => String::new(),
                Some(_) => {
                    return Err(ApiError::field(
                        &field("content"),
                        "must be a string or an array of text parts",
                    ));
                }
            };
            Ok(ChatMessage { role, content })
        })
        .collect()
}

/// `stop`: a string or an array of up to four strings.
fn stops(f: &Fields) -> Result<Vec<String>, ApiError> {
    let stops = match f.get("stop") {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| ApiError::field("stop", "must hold only strings"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(ApiError::field("stop", "must be a string or an array")),
    };
    if stops.len() > MAX_STOPS {
        return Err(ApiError::field(
            "stop",
            format!("at most {MAX_STOPS} stop strings, got {}", stops.len()),
        ));
    }
    Ok(stops)
}

/// The `usage` object.
pub fn usage(prompt_tokens: usize, completion_tokens: usize) -> Value {
    json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(endpoint: Endpoint, body: Value) -> Result<GenerationRequest, ApiError> {
        parse_request(body.to_string().as_bytes(), endpoint, "m.gguf")
    }

    #[test]
    fn a_completion_request_takes_openai_defaults() {
        let r = parse(
            Endpoint::Completions,
            json!({"model": "m.gguf", "prompt": "Hi"}),
        )
        .unwrap();
        assert_eq!(r.prompt, Prompt::Text("Hi".into()));
        assert_eq!(r.max_tokens, Some(16));
        assert_eq!(r.sampling.temperature, 1.0);
        assert_eq!(r.sampling.top_p, 1.0);
        assert_eq!(r.sampling.seed, 0);
        assert!(!r.stream && r.stop.is_empty());
    }

    #[test]
    fn sampling_fields_are_read() {
        let r = parse(
            Endpoint::Completions,
            json!({"model": "m.gguf", "prompt": ["Hi"], "max_tokens": 5, "temperature": 0,
                   "top_p": 0.5, "top_k": 3, "seed": 42, "stop": ["\n", "."], "stream": true,
                   "stream_options": {"include_usage": true}, "n": 1, "user": "x"}),
        )
        .unwrap();
        assert_eq!(r.max_tokens, Some(5));
        assert_eq!(
            r.sampling,
            SamplingOptions {
                temperature: 0.0,
                top_k: 3,
                top_p: 0.5,
                seed: 42
            }
        );
        assert_eq!(r.stop, ["\n", "."]);
        assert!(r.stream && r.include_usage);
    }

    #[test]
    fn chat_messages_accept_text_parts() {
        let r = parse(
            Endpoint::ChatCompletions,
            json!({"model": "m.gguf", "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]}
            ], "max_completion_tokens": 9}),
        )
        .unwrap();
        assert_eq!(
            r.prompt,
            Prompt::Chat(vec![
                ChatMessage::new("system", "Be brief."),
                ChatMessage::new("user", "Hi there")
            ])
        );
        assert_eq!(r.max_tokens, Some(9));
    }

    #[test]
    fn refusals_name_their_field_and_status() {
        let cases = [
            (json!({"prompt": "x"}), StatusCode::BAD_REQUEST, "model"),
            (
                json!({"model": "other", "prompt": "x"}),
                StatusCode::NOT_FOUND,
                "model",
            ),
            (
                json!({"model": "m.gguf"}),
                StatusCode::BAD_REQUEST,
                "prompt",
            ),
            (
                json!({"model": "m.gguf", "prompt": ["a", "b"]}),
                StatusCode::BAD_REQUEST,
                "prompt",
            ),
            (
                json!({"model": "m.gguf", "prompt": "x", "temperature": 3}),
                StatusCode::BAD_REQUEST,
                "temperature",
            ),
            (
                json!({"model": "m.gguf", "prompt": "x", "temperature": "hot"}),
                StatusCode::BAD_REQUEST,
                "temperature",
            ),
            (
                json!({"model": "m.gguf", "prompt": "x", "top_p": 0}),
                StatusCode::BAD_REQUEST,
                "top_p",
            ),
            (
                json!({"model": "m.gguf", "prompt": "x", "max_tokens": -1}),
                StatusCode::BAD_REQUEST,
                "max_tokens",
            ),
            (
                json!({"model": "m.gguf", "prompt": "x", "max_tokens": 0}),
                StatusCode::BAD_REQUEST,
                "max_tokens",
            ),
            (
                json!({"model": "m.gguf", "prompt": "x", "seed": -3}),
                StatusCode::BAD_REQUEST,
                "seed",
            ),
            (
                json!({"model": "m.gguf", "prompt": "x", "n": 2}),
                StatusCode::BAD_REQUEST,
                "n",
            ),
            (
                json!({"model": "m.gguf", "prompt": "x", "logprobs": 2}),
                StatusCode::BAD_REQUEST,
                "logprobs",
            ),
            (
                json!({"model": "m.gguf", "prompt": "x", "stop": ["a","b","c","d","e"]}),
                StatusCode::BAD_REQUEST,
                "stop",
            ),
            (
                json!({"model": "m.gguf", "prompt": "x", "stream_options": {"include_usage": 1}}),
                StatusCode::BAD_REQUEST,
                "stream_options.include_usage",
            ),
        ];
        for (body, status, param) in cases {
            let e = parse(Endpoint::Completions, body.clone()).unwrap_err();
            assert_eq!(e.status, status, "{body}: {e}");
            assert_eq!(e.param.as_deref(), Some(param), "{body}: {e}");
            assert!(e.message.contains(param), "{body}: {e}");
        }
        let e = parse(
            Endpoint::ChatCompletions,
            json!({"model": "m.gguf", "messages": [{"role": "user", "content": 5}]}),
        )
        .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages[0].content"));
        let e = parse_request(b"{not json", Endpoint::Completions, "m.gguf").unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e.message.contains("not JSON"), "{e}");
    }

    #[test]
    fn error_bodies_have_the_openai_shape() {
        let body = ApiError::field("top_p", "must lie in (0, 1]").body();
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["param"], "top_p");
        assert!(body["error"]["message"].as_str().unwrap().contains("top_p"));
    }
}
