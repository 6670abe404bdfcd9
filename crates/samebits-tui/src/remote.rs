//! Generation on a running `samebits serve` (docs/serve.md) instead of in this process, for a
//! run whose Server field is set: the prompt goes to the server as an OpenAI request, streamed
//! (`"stream": true`), its text comes back as server-sent events and is reported as the
//! in-process run reports it ([`WorkerEvent::Token`]), and the receipt that ends the stream
//! (`samebits_receipt`) is written into the receipts folder as the in-process run writes its own,
//! so Verify re-runs it on this machine.
//!
//! What is sent: the model the server serves (its `/v1/models` names it; a server has one), the
//! prompt (Chat template on: `/v1/chat/completions` with the prompt as one user message, which
//! the chat template renders exactly as the in-process run does; off: `/v1/completions` with the
//! raw prompt), `max_tokens`, `temperature`, `top_p`, `seed`. The operation set, device and
//! partitions are the server's own. The receipt records the model's path on the server; when
//! that path is not on this machine, the Model field's file (when there is one) is recorded
//! instead, so Verify re-runs with the local copy (it still checks the sha256).
//!
//! Every failure is one line naming the server: connection refused, an HTTP status with the
//! server's JSON error message, a malformed event, a stream cut off before its receipt.

use crate::form::RunRequest;
use crate::http::{self, ServerUrl, SseData};
use crate::worker::{Progress, RunOutcome, WorkerEvent};
use samebits_llm::receipt::{GenerationReceipt, RESPONSE_RECEIPT_KEY};
use samebits_runtime::hashing::sha256_file;
use samebits_runtime::receipt::portable_path;
use serde_json::{Value, json};
use std::io::BufReader;
use std::path::Path;
use std::time::Instant;

/// Largest error body read off a failed response.
const ERROR_BODY_LIMIT: u64 = 64 * 1024;
/// Largest `/v1/models` answer read.
const MODELS_LIMIT: u64 = 1024 * 1024;

/// Runs `request` on `server`, reporting as [`crate::worker`]'s in-process run does, and writes
/// the receipt at `receipt_path`.
pub fn generate(
    server: &ServerUrl,
    request: &RunRequest,
    receipt_path: &Path,
    send: &dyn Fn(WorkerEvent),
) -> Result<RunOutcome, String> {
    let fail = |what: String| format!("server {server}: {what}");
    let model = served_model(server).map_err(fail)?;
    let (path, body) = request_body(&model, request);
    send(WorkerEvent::Sent {
        server: server.to_string(),
    });
    let start = Instant::now();
    let response = http::request(server, "POST", path, Some(&body.to_string()))
        .map_err(|e| fail(format!("POST {path}: {e}")))?;
    if response.status != 200 {
        return Err(fail(status_error("POST", path, response)));
    }
    let content_type = response.header("content-type").unwrap_or("").to_string();
    if !content_type.starts_with("text/event-stream") {
        return Err(fail(format!(
            "POST {path}: expected a stream of server-sent events, got Content-Type {content_type:?}"
        )));
    }
    let mut stream = Stream::new(request.generate.chat, start);
    for data in SseData::new(BufReader::new(response.into_body())) {
        let data = data.map_err(|e| fail(format!("reading the stream of {path}: {e}")))?;
        if let Some(text) = stream.event(&data).map_err(fail)? {
            send(WorkerEvent::Token {
                text,
                progress: stream.progress,
            });
        }
        if stream.done {
            break;
        }
    }
    let receipt = stream.receipt.take().ok_or_else(|| {
        fail(format!(
            "the stream of {path} ended before its receipt ({RESPONSE_RECEIPT_KEY})"
        ))
    })?;
    let receipt_sha256 = write_receipt(receipt, &request.model, receipt_path).map_err(fail)?;
    // Read back as Verify will: the format and one logits hash per token are checked.
    let receipt = GenerationReceipt::read(receipt_path).map_err(|e| fail(e.to_string()))?;
    let end = Instant::now();
    let first = stream.first.unwrap_or(end);
    let last = stream.last.unwrap_or(end);
    let per_second = |tokens: usize, seconds: f64| tokens as f64 / seconds.max(1e-9);
    Ok(RunOutcome {
        text: stream.text,
        prompt_tokens: receipt.prompt_tokens.len(),
        generated_tokens: receipt.tokens.len(),
        prefill_tokens_per_second: per_second(
            receipt.prompt_tokens.len(),
            (first - start).as_secs_f64(),
        ),
        decode_tokens_per_second: per_second(
            receipt.tokens.len().saturating_sub(1),
            (last - first).as_secs_f64(),
        ),
        receipt: receipt_path.to_path_buf(),
        receipt_sha256,
        logits_digest: receipt.logits_digest,
    })
}

/// The id of the model `server` serves, from `GET /v1/models`.
pub fn served_model(server: &ServerUrl) -> Result<String, String> {
    let path = "/v1/models";
    let response =
        http::request(server, "GET", path, None).map_err(|e| format!("GET {path}: {e}"))?;
    if response.status != 200 {
        return Err(status_error("GET", path, response));
    }
    let text = response
        .text(MODELS_LIMIT)
        .map_err(|e| format!("GET {path}: {e}"))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| format!("GET {path}: not JSON ({e}): {:?}", http::head(&text, 80)))?;
    value["data"][0]["id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| {
            format!(
                "GET {path}: no model listed (data[0].id): {}",
                http::head(&text, 80)
            )
        })
}

/// The endpoint and JSON body of `request` for the model `model`.
pub fn request_body(model: &str, request: &RunRequest) -> (&'static str, Value) {
    let options = &request.generate;
    let sampling = &options.sampling;
    let mut body = json!({
        "model": model,
        "max_tokens": options.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "seed": sampling.seed,
        "stream": true,
    });
    if sampling.top_k != 0 {
        body["top_k"] = json!(sampling.top_k);
    }
    let path = if options.chat {
        body["messages"] = json!([{"role": "user", "content": request.prompt}]);
        "/v1/chat/completions"
    } else {
        body["prompt"] = json!(request.prompt);
        "/v1/completions"
    };
    (path, body)
}

/// `METHOD path: HTTP 404: <the server's message>` from a response that is not a 200.
fn status_error<R: std::io::BufRead>(
    method: &str,
    path: &str,
    response: http::Response<R>,
) -> String {
    let status = response.status;
    let text = response.text(ERROR_BODY_LIMIT).unwrap_or_default();
    format!("{method} {path}: HTTP {status}: {}", error_message(&text))
}

/// The message of an OpenAI error body (`{"error": {"message": ...}}`), else the body's start.
pub fn error_message(body: &str) -> String {
    let parsed = serde_json::from_str::<Value>(body).ok();
    match parsed.as_ref().and_then(|v| v["error"]["message"].as_str()) {
        Some(message) => message.to_string(),
        None if body.trim().is_empty() => "(no body)".into(),
        None => http::head(body.trim(), 200).replace(['\r', '\n'], " "),
    }
}

/// A streamed response as its events arrive.
struct Stream {
    chat: bool,
    start: Instant,
    text: String,
    progress: Progress,
    /// When the first and latest pieces of text arrived.
    first: Option<Instant>,
    last: Option<Instant>,
    receipt: Option<Value>,
    /// `[DONE]` arrived.
    done: bool,
}

impl Stream {
    fn new(chat: bool, start: Instant) -> Stream {
        Stream {
            chat,
            start,
            text: String::new(),
            progress: Progress::default(),
            first: None,
            last: None,
            receipt: None,
            done: false,
        }
    }

    /// Folds in one event's data; returns the text it brings, if any.
    fn event(&mut self, data: &str) -> Result<Option<String>, String> {
        if data == "[DONE]" {
            self.done = true;
            return Ok(None);
        }
        let malformed = |why: &str| format!("malformed event ({why}): {}", http::head(data, 80));
        let event: Value = serde_json::from_str(data).map_err(|e| malformed(&e.to_string()))?;
        if !event.is_object() {
            return Err(malformed("not a JSON object"));
        }
        if event.get("error").is_some() {
            return Err(format!(
                "the server ended the stream with an error: {}",
                error_message(data)
            ));
        }
        if let Some(receipt) = event.get(RESPONSE_RECEIPT_KEY) {
            self.receipt = Some(receipt.clone());
        }
        let Some(choices) = event.get("choices").and_then(Value::as_array) else {
            return Err(malformed("no choices"));
        };
        // The usage chunk has no choices; the others have one.
        let Some(choice) = choices.first() else {
            return Ok(None);
        };
        let text = match self.chat {
            true => &choice["delta"]["content"],
            false => &choice["text"],
        };
        let text = match text {
            Value::String(text) => text.as_str(),
            Value::Null => "",
            _ => return Err(malformed("the text is not a string")),
        };
        if text.is_empty() {
            return Ok(None);
        }
        let now = Instant::now();
        let first = *self.first.get_or_insert(now);
        self.last = Some(now);
        self.progress = Progress {
            prefill: first - self.start,
            tokens: self.progress.tokens + 1,
            decode: now - first,
        };
        self.text.push_str(text);
        Ok(Some(text.to_string()))
    }
}

/// Writes `receipt` (the server's) at `path` as the in-process run writes its own, the model's
/// path replaced by `local_model` when the server's path is not on this machine; returns the
/// file's sha256.
fn write_receipt(receipt: Value, local_model: &Path, path: &Path) -> Result<String, String> {
    let mut receipt: GenerationReceipt = serde_json::from_value(receipt)
        .map_err(|e| format!("malformed receipt ({RESPONSE_RECEIPT_KEY}): {e}"))?;
    let folder = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(folder).map_err(|e| {
        format!(
            "cannot create the receipts folder {}: {e}",
            folder.display()
        )
    })?;
    if !folder.join(&receipt.model.path).exists() && local_model.is_file() {
        receipt.model.path = portable_path(local_model, folder);
    }
    receipt.write(path).map_err(|e| e.to_string())?;
    sha256_file(path).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::form::Form;

    fn request(chat: bool) -> RunRequest {
        let mut form = Form::new("");
        form.server.set("http://127.0.0.1:1");
        form.prompt.set("The capital of France is");
        form.chat = chat;
        form.max_tokens.set("12");
        form.temperature.set("0.7");
        form.top_p.set("0.9");
        form.seed.set("42");
        form.request().unwrap()
    }

    #[test]
    fn form_fields_map_to_openai_fields() {
        let (path, body) = request_body("smollm2", &request(false));
        assert_eq!(path, "/v1/completions");
        assert_eq!(
            body,
            json!({"model": "smollm2", "prompt": "The capital of France is", "max_tokens": 12,
                   "temperature": 0.7f32, "top_p": 0.9f32, "seed": 42, "stream": true})
        );
        // f32 -> JSON -> f64 -> f32 gives the form's value back: the same sampling.
        assert_eq!(body["temperature"].as_f64().unwrap() as f32, 0.7f32);
        let (path, body) = request_body("smollm2", &request(true));
        assert_eq!(path, "/v1/chat/completions");
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": "The capital of France is"}])
        );
        assert!(body.get("prompt").is_none());
    }

    #[test]
    fn events_bring_text_then_the_receipt() {
        let mut stream = Stream::new(false, Instant::now());
        let chunk = |text: &str| {
            json!({"object": "text_completion", "choices": [{"index": 0, "text": text,
                   "finish_reason": null}]})
            .to_string()
        };
        assert_eq!(
            stream.event(&chunk(" Paris")).unwrap(),
            Some(" Paris".into())
        );
        assert_eq!(stream.event(&chunk("")).unwrap(), None);
        assert_eq!(stream.event(&chunk(".")).unwrap(), Some(".".into()));
        assert_eq!(stream.progress.tokens, 2);
        let last = json!({"choices": [{"index": 0, "text": "", "finish_reason": "length"}],
                          "samebits_receipt": {"format": "x"}});
        assert_eq!(stream.event(&last.to_string()).unwrap(), None);
        let usage = json!({"choices": [], "usage": {"prompt_tokens": 5}});
        assert_eq!(stream.event(&usage.to_string()).unwrap(), None);
        assert!(!stream.done);
        stream.event("[DONE]").unwrap();
        assert!(stream.done);
        assert_eq!(stream.text, " Paris.");
        assert_eq!(stream.receipt, Some(json!({"format": "x"})));

        let mut chat = Stream::new(true, Instant::now());
        let role = json!({"choices": [{"delta": {"role": "assistant", "content": ""}}]});
        assert_eq!(chat.event(&role.to_string()).unwrap(), None);
        let text = json!({"choices": [{"delta": {"content": "Hi"}}]});
        assert_eq!(chat.event(&text.to_string()).unwrap(), Some("Hi".into()));
        let end = json!({"choices": [{"delta": {}, "finish_reason": "stop"}]});
        assert_eq!(chat.event(&end.to_string()).unwrap(), None);
    }

    #[test]
    fn bad_events_are_one_line_errors() {
        let mut stream = Stream::new(false, Instant::now());
        for (data, says) in [
            ("{not json", "malformed event (key must be a string"),
            ("[1, 2]", "malformed event (not a JSON object): [1, 2]"),
            ("{\"id\": 1}", "malformed event (no choices)"),
            (
                "{\"choices\": [{\"text\": 7}]}",
                "malformed event (the text is not a string)",
            ),
            (
                "{\"error\": {\"message\": \"the engine stopped\", \"type\": \"server_error\"}}",
                "the server ended the stream with an error: the engine stopped",
            ),
        ] {
            let error = stream.event(data).unwrap_err();
            assert!(error.starts_with(says), "{data}: {error}");
            assert!(!error.contains('\n'));
        }
    }

    #[test]
    fn error_bodies_give_their_message() {
        let body = r#"{"error": {"message": "model `x` is not served here", "type": "not_found_error", "param": "model", "code": null}}"#;
        assert_eq!(error_message(body), "model `x` is not served here");
        assert_eq!(error_message("Bad\r\ngateway"), "Bad  gateway");
        assert_eq!(error_message(""), "(no body)");
    }

    #[test]
    fn a_server_path_not_here_is_replaced_by_the_local_copy() {
        let dir = tempfile::tempdir().unwrap();
        let local = dir.path().join("m.gguf");
        std::fs::write(&local, b"weights").unwrap();
        let receipt = |model_path: &str| {
            json!({"format": samebits_llm::receipt::FORMAT, "engine": "e", "device": "cpu",
                   "model": {"path": model_path, "sha256": "00"}, "prompt": "p", "chat": false,
                   "options": {"max_tokens": 1, "temperature": 0.0, "top_k": 0, "top_p": 1.0,
                               "seed": 0, "operation_set": "reproducible"},
                   "prompt_tokens": [1], "tokens": [2], "step_logits_sha256": ["aa"],
                   "logits_digest": "bb", "n_partitions": 1})
        };
        let path = dir.path().join("receipts/r.json");
        let written = |path: &Path| GenerationReceipt::read(path).unwrap().model.path;
        let sha = write_receipt(receipt("/on/the/server/m.gguf"), &local, &path).unwrap();
        assert_eq!(sha, sha256_file(&path).unwrap());
        assert_eq!(written(&path), local.to_str().unwrap());
        // A path that exists here is kept, as is the server's path without a local copy.
        let here = local.to_str().unwrap();
        write_receipt(receipt(here), Path::new("/none"), &path).unwrap();
        assert_eq!(written(&path), here);
        write_receipt(receipt("/on/the/server/m.gguf"), Path::new(""), &path).unwrap();
        assert_eq!(written(&path), "/on/the/server/m.gguf");
        let error = write_receipt(json!({"format": 1}), &local, &path).unwrap_err();
        assert!(
            error.starts_with("malformed receipt (samebits_receipt): "),
            "{error}"
        );
    }

    #[test]
    fn an_unreachable_server_is_named_in_one_line() {
        let (server, port) = crate::http::tests::closed_server();
        let dir = tempfile::tempdir().unwrap();
        let error = generate(
            &server,
            &request(false),
            &dir.path().join("r.json"),
            &|_| {},
        )
        .unwrap_err();
        assert_eq!(
            error,
            format!(
                "server http://127.0.0.1:{port}: GET /v1/models: connection refused \
                 (is `samebits serve` running there?)"
            )
        );
    }
}
