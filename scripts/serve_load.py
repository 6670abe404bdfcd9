#!/usr/bin/env python3
"""Load and batch-invariance checks against a running `samebits serve`, with Python's standard
library only (so it runs on GPU hosts without network access).

    scripts/serve_load.py --url http://127.0.0.1:8000 --model NAME --probe
    scripts/serve_load.py --url ... --model NAME --clients 64 --seconds 600 --pid PID

--probe: one request alone, then the same request started amid 31 concurrent requests of mixed
lengths (15 ms apart); prints both logits digests and fails unless the tokens and every step's
logits hash are equal. Writes the batched response to --receipt-out when given.

Load: CLIENTS threads send mixed requests (completions and chat, streamed and not, four
prompts, five seeds, 4 to 24 tokens) for SECONDS. Fails on any error, malformed response, or a
repeat of a request whose text or logits digest differs from its first answer. Prints requests,
generated tokens per second, p50 / p99 time to first token and inter-token latency (streams),
and the server's RSS (with --pid) and GPU memory (nvidia-smi, when present): read every 5 s
(every 60th of a run shorter than five minutes) and reported as the highest reading of each
minute (each sixth of a run shorter than six minutes), so that growth between the first and the
last minute and any plateau show. One reading alone says little: a server's resident size moves
by tens of megabytes within seconds as the batch changes shape.
"""

import argparse
import http.client
import json
import subprocess
import sys
import threading
import time
import urllib.parse

PROMPTS = [
    "The capital of France is",
    "Once upon a time there was a little robot who",
    "List three fruits:",
    "In 1969, the first humans",
]


class Server:
    def __init__(self, url, model):
        parsed = urllib.parse.urlparse(url)
        self.host, self.port, self.model = parsed.hostname, parsed.port, model

    def post(self, path, body):
        """(status, JSON body) of a whole response, or (status, events, stamps) of a stream."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=900)
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        if not body.get("stream"):
            data = response.read()
            conn.close()
            return response.status, json.loads(data), []
        events, stamps = [], []
        for raw in response:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("data: "):
                events.append(line[6:])
                stamps.append(time.monotonic())
        conn.close()
        return response.status, events, stamps


def completion(model, prompt, max_tokens, seed):
    return {"model": model, "prompt": prompt, "max_tokens": max_tokens,
            "temperature": 0.8, "top_k": 40, "seed": seed}


def probe(server, receipt_out):
    body = completion(server.model, "The capital of France is", 24, 5)
    status, alone, _ = server.post("/v1/completions", body)
    assert status == 200, alone
    others = []
    for i in range(31):
        prompt = "Once upon a time there was a little robot who " * (1 + i % 9)
        others.append(completion(server.model, prompt[: len(prompt) - i % 7], 4 + (i * 7) % 37, i))
    order = others[:10] + [body] + others[10:]
    results = [None] * len(order)

    def send(i):
        results[i] = server.post("/v1/completions", order[i])

    threads = []
    for i in range(len(order)):
        t = threading.Thread(target=send, args=(i,))
        t.start()
        threads.append(t)
        time.sleep(0.015)
    for t in threads:
        t.join()
    for i, (status, response, _) in enumerate(results):
        assert status == 200, (i, response)
    batched = results[10][1]
    a, b = alone["samebits_receipt"], batched["samebits_receipt"]
    print(f"probe alone:   digest {a['logits_digest']} tokens {a['tokens']}")
    print(f"probe batched: digest {b['logits_digest']} device {b['device']}")
    assert a["tokens"] == b["tokens"] and a["step_logits_sha256"] == b["step_logits_sha256"]
    print("probe: identical alone and amid 31 concurrent requests")
    if receipt_out:
        with open(receipt_out, "w") as f:
            json.dump(batched, f)


def memory(pid):
    """(RSS in KiB, GPU memory in MiB) of process `pid`; None where unknown."""
    rss = None
    if pid:
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    gpu = None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10).stdout
        gpu = sum(int(l.split(",")[1]) for l in out.splitlines() if pid and l.split(",")[0].strip() == str(pid))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        pass
    return rss, gpu


def watch_memory(pid, every, step, stop):
    """Reads `memory(pid)` every `step` seconds until `stop` is set; returns the readings
    grouped by windows of `every` seconds, as lists of (RSS KiB, GPU MiB)."""
    windows = []
    begin = time.monotonic()
    while not stop.wait(step):
        w = int((time.monotonic() - begin) // every)
        while len(windows) <= w:
            windows.append([])
        windows[w].append(memory(pid))
    return windows


def highest(window):
    """(RSS MiB, GPU MiB) highest in a window of readings; None where unknown."""
    rss = [r for r, _ in window if r is not None]
    gpu = [g for _, g in window if g is not None]
    return (max(rss) // 1024 if rss else None, max(gpu) if gpu else None)


def request_mix(i, n):
    """Request `n` of client `i`: (prompt, seed, max_tokens, stream, chat)."""
    return (PROMPTS[(i + n) % len(PROMPTS)], (i * 7 + n) % 5, 4 + (i + 3 * n) % 21,
            n % 2 == 0, (i + n) % 3 == 0)


def run_load(send, clients, seconds, pid):
    """`clients` threads send the `request_mix` for `seconds`, each request through
    `send(prompt, seed, max_tokens, stream, chat)`, which returns (text, finish_reason, receipt,
    arrival times of the streamed pieces that carried text). Checks every response (finish
    reason, receipt lengths, and that a repeat of a request gives its first text and logits
    digest); prints the counts, latency percentiles and memory readings, and returns the highest
    (RSS MiB, GPU MiB) of the first and of the last window (a minute, or a sixth of a shorter
    run). Fails on any failed request."""
    lock = threading.Lock()
    failures, first, repeats, tokens = [], {}, [0], [0]
    ttft, itl = [], []
    deadline = time.monotonic() + seconds
    every = min(60.0, seconds / 6)
    step = min(5.0, max(seconds / 60, 0.5))
    stop = threading.Event()
    watched = []
    watcher = threading.Thread(target=lambda: watched.extend(watch_memory(pid, every, step, stop)))
    watcher.start()

    def one(i, n):
        prompt, seed, max_tokens, stream, chat = request_mix(i, n)
        start = time.monotonic()
        text, reason, receipt, stamps = send(prompt, seed, max_tokens, stream, chat)
        assert reason in ("stop", "length"), reason
        assert isinstance(text, str)
        assert len(receipt["tokens"]) == len(receipt["step_logits_sha256"]) <= max_tokens
        key = (prompt, seed, max_tokens, chat)
        with lock:
            tokens[0] += len(receipt["tokens"])
            repeats[0] += key in first
            seen = first.setdefault(key, (text, receipt["logits_digest"]))
            assert seen == (text, receipt["logits_digest"]), (key, seen, text)
            if stamps:
                ttft.append(stamps[0] - start)
                itl.extend(b - a for a, b in zip(stamps, stamps[1:]))

    def worker(i):
        n = 0
        while time.monotonic() < deadline:
            try:
                one(i, n)
            except Exception as e:  # reported below
                with lock:
                    failures.append(f"client {i} request {n}: {e!r}")
            n += 1

    begin = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - begin
    stop.set()
    watcher.join()
    windows = [highest(w) for w in watched if w] or [(None, None)]

    def pct(values, p):
        values = sorted(values)
        return values[min(len(values) - 1, int(p / 100 * len(values)))] * 1e3 if values else float("nan")

    print(f"load: {clients} clients, {elapsed:.0f} s, {len(first) + repeats[0]} requests "
          f"({repeats[0]} repeats, all identical), {len(failures)} failed, "
          f"{tokens[0] / elapsed:.1f} generated tok/s")
    print(f"TTFT p50 {pct(ttft, 50):.0f} ms p99 {pct(ttft, 99):.0f} ms; "
          f"inter-token p50 {pct(itl, 50):.1f} ms p99 {pct(itl, 99):.1f} ms")
    series = ", ".join(f"{r} / {g}" for r, g in windows)
    print(f"memory, highest of each {every:.0f} s read every {step:g} s (RSS MiB / GPU MiB): {series}")
    print(f"first window: RSS {windows[0][0]} MiB, GPU {windows[0][1]} MiB; "
          f"last window: RSS {windows[-1][0]} MiB, GPU {windows[-1][1]} MiB")
    assert not failures, "\n".join(failures[:10])
    return windows[0], windows[-1]


def load(server, clients, seconds, pid):
    """`run_load` over this module's standard-library client."""

    def send(prompt, seed, max_tokens, stream, chat):
        body = {"model": server.model, "temperature": 0.8, "seed": seed,
                "max_tokens": max_tokens, "stream": stream}
        if chat:
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        status, got, stamps = server.post("/v1/chat/completions" if chat else "/v1/completions", body)
        assert status == 200, (status, got)
        if not stream:
            choice = got["choices"][0]
            text = choice["message"]["content"] if chat else choice["text"]
            return text, choice["finish_reason"], got["samebits_receipt"], []
        assert got[-1] == "[DONE]", got[-3:]
        chunks = [(s, json.loads(e)) for s, e in zip(stamps, got[:-1])]
        pieces = [(s, (c["choices"][0].get("delta", {}).get("content") or "") if chat
                   else c["choices"][0]["text"]) for s, c in chunks if c["choices"]]
        last = [c for _, c in chunks if c["choices"] and c["choices"][0]["finish_reason"]][-1]
        return ("".join(p for _, p in pieces), last["choices"][0]["finish_reason"],
                last["samebits_receipt"], [s for s, p in pieces if p])

    run_load(send, clients, seconds, pid)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--receipt-out")
    parser.add_argument("--clients", type=int, default=0)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--pid", type=int)
    args = parser.parse_args()
    server = Server(args.url, args.model)
    if args.probe:
        probe(server, args.receipt_out)
    if args.clients:
        load(server, args.clients, args.seconds, args.pid)


if __name__ == "__main__":
    sys.exit(main())
