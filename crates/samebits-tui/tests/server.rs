//! The TUI's engine thread driving a live `samebits serve` (started in this process on the CPU
//! with the pinned SmolLM2 GGUF, over a real socket): a Generate job with the Server set streams
//! the server's text, equal to what the server answers the same greedy request unstreamed and to
//! the in-process run's text and logits digest; the receipt it writes verifies through the Verify
//! job, raw prompt and chat template alike. Server errors (an unknown route, a refused field, a
//! closed port) come back as one line naming the server. Skipped, saying so on stderr, when the
//! GGUF is not cached.

use samebits_runtime::{Device, OperationSet};
use samebits_serve::engine::EngineOptions;
use samebits_serve::{ServeOptions, Server};
use samebits_tui::form::{Form, RunRequest};
use samebits_tui::http::{self, ServerUrl};
use samebits_tui::worker::{Job, RunOutcome, Verdict, Worker, WorkerEvent};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn model() -> Option<PathBuf> {
    let found = samebits_testdata::cached(samebits_testdata::SMOLLM2_GGUF);
    if found.is_none() {
        samebits_testdata::skip("the SmolLM2 GGUF is not cached (scripts/setup.sh --data)");
    }
    found
}

fn start(model: &Path) -> Server {
    Server::start(ServeOptions {
        engine: EngineOptions {
            model: model.to_path_buf(),
            operation_set: OperationSet::Reproducible,
            device: Device::Cpu,
            max_running: 4,
            max_batch_tokens: 64,
            batch_from: None,
            partitions: 1,
        },
        host: "127.0.0.1".into(),
        port: 0,
        // The default name (the file name): the TUI reads it from /v1/models.
        model_name: None,
        max_queue: 8,
        max_body_bytes: 64 * 1024,
        receipts_kept: 10,
        shutdown_grace: Duration::from_secs(5),
    })
    .expect("the server starts")
}

fn request(model: &Path, server: &str, prompt: &str, chat: bool, max_tokens: usize) -> RunRequest {
    let mut form = Form::new(model.to_str().unwrap());
    form.server.set(server);
    form.prompt.set(prompt);
    form.chat = chat;
    form.max_tokens.set(&max_tokens.to_string());
    form.request().unwrap()
}

fn next(worker: &Worker) -> WorkerEvent {
    worker
        .events
        .recv_timeout(Duration::from_secs(300))
        .expect("the worker answers")
}

/// Runs a Generate job: the events before the outcome, and the outcome (or the failure).
fn run(worker: &Worker, request: RunRequest) -> (Vec<WorkerEvent>, Result<RunOutcome, String>) {
    worker.submit(Job::Generate(request));
    let mut events = Vec::new();
    loop {
        match next(worker) {
            WorkerEvent::Generated(outcome) => return (events, Ok(outcome)),
            WorkerEvent::Failed(message) => return (events, Err(message)),
            event => events.push(event),
        }
    }
}

fn verify(worker: &Worker, receipt: &Path) -> Verdict {
    worker.submit(Job::Verify(receipt.to_path_buf()));
    assert_eq!(next(worker), WorkerEvent::Verifying);
    match next(worker) {
        WorkerEvent::Verified {
            receipt: r,
            verdict,
        } => {
            assert_eq!(r, receipt);
            verdict
        }
        other => panic!("expected a verdict, got {other:?}"),
    }
}

/// The server's whole (unstreamed) answer to `body` at `path`.
fn post(server: &ServerUrl, path: &str, body: &Value) -> Value {
    let response = http::request(server, "POST", path, Some(&body.to_string())).unwrap();
    assert_eq!(response.status, 200);
    serde_json::from_str(&response.text(1 << 24).unwrap()).unwrap()
}

#[test]
fn generate_on_a_server_streams_its_text_and_writes_a_receipt_that_verifies() {
    let Some(model) = model() else { return };
    let server = start(&model);
    let url = format!("http://{}", server.addr());
    let base = ServerUrl::parse(&url).unwrap();
    let receipts = tempfile::tempdir().unwrap();
    let worker = Worker::spawn(receipts.path().to_path_buf()).unwrap();

    // Raw prompt, greedy, 12 tokens: /v1/completions.
    let prompt = "The capital of France is";
    let (events, outcome) = run(&worker, request(&model, &url, prompt, false, 12));
    let remote = outcome.unwrap();
    assert_eq!(
        events[0],
        WorkerEvent::Sent {
            server: url.clone()
        }
    );
    let streamed: String = events[1..]
        .iter()
        .map(|e| match e {
            WorkerEvent::Token { text, .. } => text.as_str(),
            other => panic!("only tokens stream after Sent, got {other:?}"),
        })
        .collect();
    assert!(events.len() > 2, "the text came in pieces: {events:?}");
    let WorkerEvent::Token { progress, .. } = events.last().unwrap() else {
        unreachable!()
    };
    assert_eq!(progress.tokens, events.len() - 1);
    assert_eq!(streamed, remote.text);
    // The independent float64 reference's continuation (crates/samebits-cli/tests/tui.rs).
    assert_eq!(remote.text, " Paris.\n\nThe answer is: 201");

    // The server's own answer to the same greedy request, unstreamed: the same text and bits.
    let whole = post(
        &base,
        "/v1/completions",
        &json!({"model": server.model_id(), "prompt": prompt, "max_tokens": 12,
                "temperature": 0}),
    );
    assert_eq!(whole["choices"][0]["text"], remote.text.as_str());
    assert_eq!(
        whole["samebits_receipt"]["logits_digest"],
        remote.logits_digest.as_str()
    );

    // The receipt, written into the receipts folder as an in-process one.
    assert_eq!(remote.receipt.parent(), Some(receipts.path()));
    assert_eq!(remote.prompt_tokens, 5);
    assert_eq!(remote.generated_tokens, 12);
    assert!(remote.prefill_tokens_per_second > 0.0 && remote.decode_tokens_per_second > 0.0);
    assert_eq!(
        remote.receipt_sha256,
        samebits_runtime::hashing::sha256_file(&remote.receipt).unwrap()
    );
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(&remote.receipt).unwrap()).unwrap();
    assert_eq!(recorded["format"], "samebits-generation-receipt/1");
    assert_eq!(recorded["prompt"], prompt);
    assert_eq!(recorded["options"]["max_tokens"], 12);
    assert_eq!(recorded["options"]["temperature"], 0.0);
    assert_eq!(recorded["logits_digest"], remote.logits_digest.as_str());
    assert_eq!(
        verify(&worker, &remote.receipt),
        Verdict::Match { steps: 12 }
    );

    // The same run in this process: the same text and logits digest.
    let (_, here) = run(&worker, request(&model, "", prompt, false, 12));
    let here = here.unwrap();
    assert_eq!(here.text, remote.text);
    assert_eq!(here.logits_digest, remote.logits_digest);

    // Chat template on: /v1/chat/completions with one user message, the same bits as here.
    let question = "What is the capital of France?";
    let (_, chat) = run(&worker, request(&model, &url, question, true, 8));
    let chat = chat.unwrap();
    let (_, chat_here) = run(&worker, request(&model, "", question, true, 8));
    let chat_here = chat_here.unwrap();
    assert!(!chat.text.is_empty());
    assert_eq!(chat.text, chat_here.text);
    assert_eq!(chat.logits_digest, chat_here.logits_digest);
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(&chat.receipt).unwrap()).unwrap();
    assert_eq!(
        recorded["messages"],
        json!([{"role": "user", "content": question}])
    );
    assert_eq!(verify(&worker, &chat.receipt), Verdict::Match { steps: 8 });

    // Errors: one line naming the server, with the status and the server's message.
    let (events, failed) = run(
        &worker,
        request(&model, &format!("{url}/nope"), prompt, false, 4),
    );
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(
        failed.unwrap_err(),
        format!("server {url}/nope: GET /v1/models: HTTP 404: no route /nope/v1/models")
    );
    let mut hot = request(&model, &url, prompt, false, 4);
    hot.generate.sampling.temperature = 3.0;
    let (_, failed) = run(&worker, hot);
    assert_eq!(
        failed.unwrap_err(),
        format!(
            "server {url}: POST /v1/completions: HTTP 400: `temperature`: must lie in [0, 2], got 3"
        )
    );
    server.shutdown();
    let (_, failed) = run(&worker, request(&model, &url, prompt, false, 4));
    let message = failed.unwrap_err();
    assert!(
        message.starts_with(&format!("server {url}: GET /v1/models: connection refused")),
        "{message}"
    );
    assert!(!message.contains('\n'));
}
