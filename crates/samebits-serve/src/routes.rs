//! The HTTP routes: `/v1/completions` and `/v1/chat/completions` (JSON, or server-sent events
//! with `stream`), `/v1/models`, `/v1/receipts/{id}`, `/health` and `/metrics`. Every refusal is
//! an OpenAI-style JSON error with its status: 400 bad fields, 404 unknown model or route, 413 a
//! body over the limit, 429 a full queue, 503 while shutting down.

use crate::api::{ApiError, Endpoint, parse_request};
use crate::engine::{Event, Finished, Job, ModelInfo};
use crate::metrics::{Metrics, Outcome};
use crate::receipts::ReceiptStore;
use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::Stream;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc::UnboundedReceiver;

/// What the handlers share.
pub struct AppState {
    pub model_id: String,
    pub info: ModelInfo,
    pub queue: SyncSender<Job>,
    pub max_queue: usize,
    pub metrics: Arc<Metrics>,
    pub receipts: Arc<ReceiptStore>,
    /// Set on shutdown: requests still arriving on open connections get 503.
    pub shutting_down: AtomicBool,
    /// Unix time the server started (`created` of `/v1/models`).
    pub started: u64,
    next_id: AtomicU64,
}

impl AppState {
    pub fn new(
        model_id: String,
        info: ModelInfo,
        queue: SyncSender<Job>,
        max_queue: usize,
        metrics: Arc<Metrics>,
        receipts: Arc<ReceiptStore>,
    ) -> AppState {
        AppState {
            model_id,
            info,
            queue,
            max_queue,
            metrics,
            receipts,
            shutting_down: AtomicBool::new(false),
            started: unix_now(),
            next_id: AtomicU64::new(0),
        }
    }

    /// A response id unique to this server run: the endpoint's prefix, the start time and a
    /// counter.
    fn id(&self, endpoint: Endpoint) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        format!("{}-{:x}{n:06}", endpoint.id_prefix(), self.started)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

/// The router over `state`, refusing bodies over `max_body_bytes`.
pub fn router(state: Arc<AppState>, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/v1/models", get(models))
        .route("/v1/models/{id}", get(model))
        .route("/v1/receipts/{id}", get(receipt))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .fallback(no_route)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state)
}

async fn health(State(state): State<Arc<AppState>>) -> Response {
    if state.shutting_down.load(Ordering::Relaxed) {
        return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response();
    }
    Json(json!({"status": "ok", "model": state.model_id, "device": state.info.device}))
        .into_response()
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}

fn model_object(state: &AppState) -> Value {
    json!({
        "id": state.model_id,
        "object": "model",
        "created": state.started,
        "owned_by": "samebits",
        "context_length": state.info.context_length,
        "sha256": state.info.record.sha256,
        "device": state.info.device,
    })
}

async fn models(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({"object": "list", "data": [model_object(&state)]}))
}

async fn model(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Response {
    match id == state.model_id {
        true => Json(model_object(&state)).into_response(),
        false => ApiError::new(
            StatusCode::NOT_FOUND,
            format!("model `{id}` is not served here"),
        )
        .into_response(),
    }
}

async fn receipt(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Response {
    match state.receipts.get(&id) {
        Some(receipt) => Json(receipt.as_ref().clone()).into_response(),
        None => ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no receipt `{id}` (unknown, or older than the receipts kept)"),
        )
        .into_response(),
    }
}

async fn no_route(uri: Uri) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, format!("no route {}", uri.path()))
}

async fn completions(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    generate(state, Endpoint::Completions, body)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn chat_completions(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    generate(state, Endpoint::ChatCompletions, body)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// Queues a request, waits until its prompt is processed (so that a prompt the model refuses
/// gets its 400 even when streamed), then answers with the whole response or a stream.
async fn generate(
    state: Arc<AppState>,
    endpoint: Endpoint,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|r| ApiError::new(r.status(), r.body_text()))?;
    if state.shutting_down.load(Ordering::Relaxed) {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is shutting down",
        ));
    }
    let request = parse_request(&body, endpoint, &state.model_id)?;
    let (stream, include_usage) = (request.stream, request.include_usage);
    let (events, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let id = state.id(endpoint);
    let job = Job {
        id: id.clone(),
        request,
        events,
        received: Instant::now(),
    };
    state.metrics.enqueued();
    if let Err(e) = state.queue.try_send(job) {
        state.metrics.dequeued();
        state.metrics.ended(Outcome::Rejected);
        return Err(match e {
            TrySendError::Full(_) => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "the queue is full ({} requests wait); retry later",
                    state.max_queue
                ),
            ),
            TrySendError::Disconnected(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the engine has stopped")
            }
        });
    }
    match rx.recv().await {
        Some(Event::Started { .. }) => {}
        Some(Event::Failed(e)) => return Err(e),
        _ => return Err(engine_stopped()),
    }
    let reply = Reply {
        id,
        created: unix_now(),
        model: state.model_id.clone(),
        endpoint,
    };
    if stream {
        return Ok(Sse::new(reply.stream(rx, include_usage))
            .keep_alive(KeepAlive::default())
            .into_response());
    }
    loop {
        match rx.recv().await {
            Some(Event::Done(finished)) => return Ok(Json(reply.whole(*finished)).into_response()),
            Some(Event::Failed(e)) => return Err(e),
            Some(Event::Text(_) | Event::Started { .. }) => {}
            None => return Err(engine_stopped()),
        }
    }
}

fn engine_stopped() -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "the engine stopped before the request finished",
    )
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The fields every response and chunk of one request share.
#[derive(Clone)]
struct Reply {
    id: String,
    created: u64,
    model: String,
    endpoint: Endpoint,
}

/// What a streamed chunk carries.
enum Delta<'a> {
    /// The chat stream's first chunk: the assistant's role.
    Role,
    Text(&'a str),
    /// The last chunk, with the finish reason.
    End(&'a str),
}

impl Reply {
    fn head(&self, object: &str) -> serde_json::Map<String, Value> {
        let head = json!({
            "id": self.id,
            "object": object,
            "created": self.created,
            "model": self.model,
        });
        match head {
            Value::Object(map) => map,
            _ => unreachable!("a JSON object literal"),
        }
    }

    /// The non-streamed response.
    fn whole(&self, finished: Finished) -> Value {
        let choice = match self.endpoint {
            Endpoint::Completions => json!({
                "index": 0,
                "text": finished.text,
                "logprobs": null,
                "finish_reason": finished.finish_reason,
            }),
            Endpoint::ChatCompletions => json!({
                "index": 0,
                "message": {"role": "assistant", "content": finished.text},
                "logprobs": null,
                "finish_reason": finished.finish_reason,
            }),
        };
        let object = match self.endpoint {
            Endpoint::Completions => "text_completion",
            Endpoint::ChatCompletions => "chat.completion",
        };
        let mut body = self.head(object);
        body.insert("choices".into(), json!([choice]));
        body.insert("usage".into(), finished.usage);
        body.insert(
            samebits_llm::receipt::RESPONSE_RECEIPT_KEY.into(),
            finished.receipt,
        );
        Value::Object(body)
    }

    fn chunk(&self, delta: Delta) -> serde_json::Map<String, Value> {
        let finish_reason = match delta {
            Delta::End(reason) => json!(reason),
            _ => Value::Null,
        };
        let (object, choice) = match self.endpoint {
            Endpoint::Completions => {
                let text = match delta {
                    Delta::Text(text) => text,
                    _ => "",
                };
                (
                    "text_completion",
                    json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish_reason}),
                )
            }
            Endpoint::ChatCompletions => {
                let delta = match delta {
                    Delta::Role => json!({"role": "assistant", "content": ""}),
                    Delta::Text(text) => json!({"content": text}),
                    Delta::End(_) => json!({}),
                };
                (
                    "chat.completion.chunk",
                    json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}),
                )
            }
        };
        let mut chunk = self.head(object);
        chunk.insert("choices".into(), json!([choice]));
        chunk
    }

    /// The server-sent events of a streamed response: one chunk per piece of text, a last
    /// chunk with the finish reason and the receipt, the usage chunk if asked for, `[DONE]`.
    fn stream(
        self,
        rx: UnboundedReceiver<Event>,
        include_usage: bool,
    ) -> impl Stream<Item = Result<SseEvent, Infallible>> {
        let mut pending = VecDeque::new();
        if self.endpoint == Endpoint::ChatCompletions {
            pending.push_back(Value::Object(self.chunk(Delta::Role)).to_string());
        }
        futures_util::stream::unfold(
            (rx, pending, false),
            move |(mut rx, mut pending, mut ended)| {
                let reply = self.clone();
                async move {
                    loop {
                        if let Some(data) = pending.pop_front() {
                            let event = SseEvent::default().data(data);
                            return Some((Ok(event), (rx, pending, ended)));
                        }
                        if ended {
                            return None;
                        }
                        match rx.recv().await {
                            Some(Event::Text(text)) => pending.push_back(
                                Value::Object(reply.chunk(Delta::Text(&text))).to_string(),
                            ),
                            Some(Event::Done(finished)) => {
                                let mut last = reply.chunk(Delta::End(finished.finish_reason));
                                last.insert(
                                    samebits_llm::receipt::RESPONSE_RECEIPT_KEY.into(),
                                    finished.receipt,
                                );
                                pending.push_back(Value::Object(last).to_string());
                                if include_usage {
                                    let mut usage_chunk = reply.chunk(Delta::Text(""));
                                    usage_chunk.insert("choices".into(), json!([]));
                                    usage_chunk.insert("usage".into(), finished.usage);
                                    pending.push_back(Value::Object(usage_chunk).to_string());
                                }
                                pending.push_back("[DONE]".into());
                                ended = true;
                            }
                            Some(Event::Failed(e)) => {
                                pending.push_back(e.body().to_string());
                                ended = true;
                            }
                            Some(Event::Started { .. }) => {}
                            None => {
                                pending.push_back(engine_stopped().body().to_string());
                                ended = true;
                            }
                        }
                    }
                }
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::usage;

    fn reply(endpoint: Endpoint) -> Reply {
        Reply {
            id: "x-1".into(),
            created: 7,
            model: "m.gguf".into(),
            endpoint,
        }
    }

    #[test]
    fn whole_responses_have_the_openai_shape() {
        let finished = || Finished {
            text: "Paris.".into(),
            finish_reason: "stop",
            usage: usage(5, 3),
            receipt: json!({"format": "samebits-generation-receipt/1"}),
        };
        let body = reply(Endpoint::Completions).whole(finished());
        assert_eq!(body["object"], "text_completion");
        assert_eq!(body["choices"][0]["text"], "Paris.");
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
        assert_eq!(body["usage"]["total_tokens"], 8);
        assert_eq!(
            body["samebits_receipt"]["format"],
            "samebits-generation-receipt/1"
        );
        let body = reply(Endpoint::ChatCompletions).whole(finished());
        assert_eq!(body["object"], "chat.completion");
        assert_eq!(body["choices"][0]["message"]["role"], "assistant");
        assert_eq!(body["choices"][0]["message"]["content"], "Paris.");
    }

    #[test]
    fn chunks_have_the_openai_shape() {
        let chat = reply(Endpoint::ChatCompletions);
        let first = Value::Object(chat.chunk(Delta::Role));
        assert_eq!(first["object"], "chat.completion.chunk");
        assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
        let text = Value::Object(chat.chunk(Delta::Text("Hi")));
        assert_eq!(text["choices"][0]["delta"]["content"], "Hi");
        assert!(text["choices"][0]["finish_reason"].is_null());
        let end = Value::Object(chat.chunk(Delta::End("length")));
        assert_eq!(end["choices"][0]["finish_reason"], "length");
        let text = Value::Object(reply(Endpoint::Completions).chunk(Delta::Text("Hi")));
        assert_eq!(text["object"], "text_completion");
        assert_eq!(text["choices"][0]["text"], "Hi");
    }
}
