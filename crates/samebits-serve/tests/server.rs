//! The server end to end over real sockets, on the CPU with the pinned SmolLM2 GGUF: batch
//! invariance (a request's tokens and per-step logits hashes alone and amid 31 concurrent
//! requests of mixed lengths started at different times, and the batched receipt verifying
//! alone), the limits (413, 429), a disconnect cancelling its sequence, and a graceful shutdown
//! letting an in-flight request finish. The HTTP client here is a minimal HTTP/1.1 one, so that
//! what goes over the wire is what the test reads.

use samebits_llm::Llm;
use samebits_llm::receipt::{GenerationReceipt, check};
use samebits_runtime::{Device, OperationSet};
use samebits_serve::engine::EngineOptions;
use samebits_serve::metrics::Outcome;
use samebits_serve::{ServeOptions, Server};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn model() -> Option<PathBuf> {
    let found = samebits_testdata::cached(samebits_testdata::SMOLLM2_GGUF);
    if found.is_none() {
        samebits_testdata::skip("the SmolLM2 GGUF is not cached (scripts/setup.sh --data)");
    }
    found
}

fn start(
    model: PathBuf,
    max_running: usize,
    max_queue: usize,
    batch_from: Option<usize>,
    partitions: usize,
) -> Server {
    Server::start(ServeOptions {
        engine: EngineOptions {
            model,
            operation_set: OperationSet::Reproducible,
            device: Device::Cpu,
            max_running,
            max_batch_tokens: 64,
            batch_from,
            partitions,
        },
        host: "127.0.0.1".into(),
        port: 0,
        model_name: Some("smollm2".into()),
        max_queue,
        max_body_bytes: 4096,
        receipts_kept: 100,
        shutdown_grace: Duration::from_secs(30),
    })
    .expect("the server starts")
}

/// An HTTP response as read off the socket (chunked bodies decoded).
struct Response {
    status: u16,
    body: String,
}

impl Response {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// The `data:` payloads of a server-sent event stream.
    fn events(&self) -> Vec<String> {
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(str::to_string)
            .collect()
    }
}

fn send(addr: SocketAddr, method: &str, path: &str, body: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    stream
}

fn read_response(stream: TcpStream) -> Response {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).expect("status line");
    let status: u16 = line.split(' ').nth(1).expect("a status").parse().unwrap();
    let mut chunked = false;
    loop {
        line.clear();
        reader.read_line(&mut line).expect("header");
        if line == "\r\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        chunked |= lower.starts_with("transfer-encoding:") && lower.contains("chunked");
    }
    let mut raw = Vec::new();
    if chunked {
        loop {
            line.clear();
            reader.read_line(&mut line).expect("chunk size");
            let size = usize::from_str_radix(line.trim(), 16).expect("a hex chunk size");
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).expect("chunk");
            if size == 0 {
                break;
            }
            raw.extend_from_slice(&chunk[..size]);
        }
    } else {
        reader.read_to_end(&mut raw).expect("body");
    }
    Response {
        status,
        body: String::from_utf8(raw).expect("UTF-8"),
    }
}

fn post(addr: SocketAddr, path: &str, body: &Value) -> Response {
    read_response(send(addr, "POST", path, &body.to_string()))
}

fn get(addr: SocketAddr, path: &str) -> Response {
    read_response(send(addr, "GET", path, ""))
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn running(addr: SocketAddr) -> u64 {
    let metrics = get(addr, "/metrics").body;
    let line = metrics
        .lines()
        .find(|l| l.starts_with("samebits_running_sequences "))
        .expect("the running gauge");
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

fn completion(prompt: &str, max_tokens: usize, seed: u64) -> Value {
    json!({"model": "smollm2", "prompt": prompt, "max_tokens": max_tokens,
           "temperature": 0.8, "top_k": 40, "seed": seed})
}

#[test]
fn a_request_gets_the_same_bits_alone_and_amid_31_others() {
    let Some(model) = model() else { return };
    // Every sequence in the batched pass; then the first five in their own passes (as a GPU
    // server runs sequences while few run) and the rest, the probe among them, batched; then
    // the decoder in two pipeline stages. Every server gives the probe the same digest.
    let digests: Vec<Value> = [(None, 1), (Some(6), 1), (None, 2)]
        .into_iter()
        .map(|(batch_from, partitions)| {
            probe_alone_and_amid_31_others(&model, batch_from, partitions)
        })
        .collect();
    assert!(digests.iter().all(|d| *d == digests[0]), "{digests:?}");
}

/// The probe's logits digest, checked alone and amid 31 others on a server of `batch_from` and
/// `partitions`.
fn probe_alone_and_amid_31_others(
    model: &Path,
    batch_from: Option<usize>,
    partitions: usize,
) -> Value {
    let server = start(model.to_path_buf(), 32, 64, batch_from, partitions);
    let addr = server.addr();
    let probe = completion("The capital of France is", 24, 5);
    let alone = post(addr, "/v1/completions", &probe);
    assert_eq!(alone.status, 200, "{}", alone.body);
    let alone = alone.json();

    // 31 others: prompts of 1 to ~90 tokens, budgets of 4 to 40 tokens, started 15 ms apart;
    // the probe starts among them, after the tenth.
    let others: Vec<Value> = (0..31)
        .map(|i| {
            let prompt = "Once upon a time there was a little robot who ".repeat(1 + i % 9);
            completion(
                &prompt[..prompt.len() - (i % 7)],
                4 + (i * 7) % 37,
                i as u64,
            )
        })
        .collect();
    let handles: Vec<_> = others
        .iter()
        .take(10)
        .chain(std::iter::once(&probe))
        .chain(others.iter().skip(10))
        .enumerate()
        .map(|(i, body)| {
            let body = body.clone();
            std::thread::sleep(Duration::from_millis(15));
            (
                i,
                std::thread::spawn(move || post(addr, "/v1/completions", &body)),
            )
        })
        .collect();
    let mut batched = None;
    for (i, handle) in handles {
        let response = handle.join().expect("a client thread");
        assert_eq!(response.status, 200, "request {i}: {}", response.body);
        if i == 10 {
            batched = Some(response.json());
        }
    }
    let batched = batched.expect("the probe's response");
    let (a, b) = (&alone["samebits_receipt"], &batched["samebits_receipt"]);
    assert_eq!(a["tokens"].as_array().unwrap().len(), 24);
    assert_eq!(a["tokens"], b["tokens"]);
    assert_eq!(a["step_logits_sha256"], b["step_logits_sha256"]);
    assert_eq!(a["logits_digest"], b["logits_digest"]);
    assert_eq!(alone["choices"][0]["text"], batched["choices"][0]["text"]);
    server.shutdown();

    // The batched run's receipt verifies alone: one prefill over prompt + tokens.
    let receipt: GenerationReceipt = serde_json::from_value(b.clone()).unwrap();
    let llm = Llm::load(model, OperationSet::Reproducible).unwrap();
    let checked = check(&receipt, &llm, &mut |tokens| {
        llm.forward(tokens, &mut llm.new_cache())
    })
    .unwrap();
    assert_eq!(checked.first_mismatch, None);
    assert_eq!(checked.steps_matched, 24);
    alone["samebits_receipt"]["logits_digest"].clone()
}

#[test]
fn limits_answer_413_and_429_with_json_errors() {
    let Some(model) = model() else { return };
    let server = start(model, 1, 1, None, 1);
    let addr = server.addr();
    let big = json!({"model": "smollm2", "prompt": "x".repeat(5000)});
    let response = post(addr, "/v1/completions", &big);
    assert_eq!(response.status, 413, "{}", response.body);
    assert!(response.json()["error"]["message"].is_string());

    // One request runs, one waits in the queue of one: the next is refused.
    let long = completion("Tell me a long story.", 200, 1);
    let first = send(addr, "POST", "/v1/completions", &long.to_string());
    wait_until("the first request runs", || running(addr) == 1);
    let second = send(addr, "POST", "/v1/completions", &long.to_string());
    wait_until("the second request waits", || {
        server.metrics().queue_depth() == 1
    });
    let third = post(addr, "/v1/completions", &long);
    assert_eq!(third.status, 429, "{}", third.body);
    assert_eq!(third.json()["error"]["type"], "rate_limit_error");
    assert_eq!(server.metrics().count(Outcome::Rejected), 1);
    drop((first, second));
    wait_until("both are cancelled", || {
        server.metrics().count(Outcome::Cancelled) == 2
    });
    server.shutdown();
}

#[test]
fn a_client_that_disconnects_cancels_its_sequence() {
    let Some(model) = model() else { return };
    let server = start(model, 4, 4, None, 1);
    let addr = server.addr();
    let mut body = completion("Count from one to a thousand:", 2000, 1);
    body["stream"] = json!(true);
    let stream = send(addr, "POST", "/v1/completions", &body.to_string());
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    while !line.starts_with("data: ") {
        line.clear();
        reader.read_line(&mut line).expect("the stream starts");
    }
    drop(reader);
    wait_until("the sequence is cancelled", || {
        server.metrics().count(Outcome::Cancelled) == 1
    });
    assert_eq!(running(addr), 0);
    assert_eq!(server.metrics().count(Outcome::Finished), 0);
    server.shutdown();
}

#[test]
fn a_stream_carries_the_text_and_the_receipt() {
    let Some(model) = model() else { return };
    let server = start(model, 4, 4, None, 1);
    let addr = server.addr();
    let mut body = completion("The capital of France is", 12, 0);
    body["temperature"] = json!(0);
    let whole = post(addr, "/v1/completions", &body).json();
    body["stream"] = json!(true);
    let streamed = post(addr, "/v1/completions", &body);
    assert_eq!(streamed.status, 200);
    let events = streamed.events();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let text: String = chunks
        .iter()
        .map(|c| c["choices"][0]["text"].as_str().unwrap())
        .collect();
    // The float64 reference forward continues this prompt so (shared/README.md).
    assert_eq!(text, " Paris.\n\nThe answer is: 201");
    assert_eq!(text, whole["choices"][0]["text"]);
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "length");
    assert_eq!(
        last["samebits_receipt"]["step_logits_sha256"],
        whole["samebits_receipt"]["step_logits_sha256"]
    );
    let id = last["id"].as_str().unwrap();
    let kept = get(addr, &format!("/v1/receipts/{id}"));
    assert_eq!(kept.json(), last["samebits_receipt"]);
    assert_eq!(get(addr, "/v1/receipts/nope").status, 404);
    server.shutdown();
}

#[test]
fn shutdown_lets_an_in_flight_request_finish() {
    let Some(model) = model() else { return };
    let server = start(model, 4, 4, None, 1);
    let addr = server.addr();
    let body = completion("Once upon a time", 40, 2);
    let client = std::thread::spawn(move || post(addr, "/v1/completions", &body));
    wait_until("the request runs", || running(addr) == 1);
    server.shutdown();
    let response = client.join().unwrap();
    assert_eq!(response.status, 200, "{}", response.body);
    let json = response.json();
    assert_eq!(
        json["samebits_receipt"]["tokens"].as_array().unwrap().len(),
        40
    );
    assert!(
        TcpStream::connect(addr).is_err(),
        "the server still listens"
    );
}
