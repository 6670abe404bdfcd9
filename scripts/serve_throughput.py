#!/usr/bin/env python3
"""Throughput and batch invariance of an OpenAI-compatible completions server at several
concurrency levels, for `samebits serve` and llama.cpp's `llama-server` alike (standard library
only, so it runs on GPU hosts without network access).

    scripts/serve_throughput.py --url http://127.0.0.1:8000 --model NAME --clients 1,8,32,64

For each level C: C client threads send greedy (temperature 0) `/v1/completions` requests of
MAX_TOKENS tokens over four prompts, back to back, for SECONDS; the row gives the completion
tokens per second of all clients together (the servers' own `usage.completion_tokens`), the
requests and the failures. Then the batch-invariance probe: one greedy request alone, and the
same request sent together with C - 1 others; "same" when the two texts are equal. (An engine
whose numerics depend on the batch may still give the same greedy text on a short probe: "same"
is necessary, not sufficient; samebits' receipts compare logits, scripts/serve_load.py --probe.)
Prints one line per level, and with --json writes them as a list.
"""

import argparse
import json
import threading
import time

from serve_load import Server

PROMPTS = [
    "The capital of France is",
    "Once upon a time there was a little robot who",
    "List three fruits and their colours:",
    "In 1969, the first humans",
]
PROBE = "Write a short story about a lighthouse keeper who finds a message in a bottle."


def completion(server, prompt, max_tokens):
    """(text, completion tokens) of a greedy completion; raises on a status other than 200."""
    body = {"model": server.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    status, got, _ = server.post("/v1/completions", body)
    if status != 200:
        raise RuntimeError(f"status {status}: {str(got)[:200]}")
    return got["choices"][0]["text"], got["usage"]["completion_tokens"]


def level(args, clients):
    """Completion tokens per second of `clients` back-to-back clients, requests, failures."""
    lock = threading.Lock()
    totals = {"tokens": 0, "requests": 0, "failed": 0}
    deadline = time.monotonic() + args.seconds

    def worker(i):
        n = 0
        while time.monotonic() < deadline:
            try:
                _, tokens = completion(args.server, PROMPTS[(i + n) % len(PROMPTS)], args.max_tokens)
                with lock:
                    totals["tokens"] += tokens
                    totals["requests"] += 1
            except Exception:  # counted
                with lock:
                    totals["failed"] += 1
            n += 1

    begin = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - begin
    return totals["tokens"] / elapsed, totals["requests"], totals["failed"]


def invariant(args, clients):
    """Whether the probe's greedy text is the same alone and among `clients - 1` others."""
    alone, _ = completion(args.server, PROBE, args.probe_tokens)
    results = {}

    def send(i):
        prompt = PROBE if i == 0 else PROMPTS[i % len(PROMPTS)]
        results[i] = completion(args.server, prompt, args.probe_tokens)[0]

    threads = [threading.Thread(target=send, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results.get(0) == alone


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True, help="the model name the server answers to")
    parser.add_argument("--clients", default="1,8,32,64", help="concurrency levels, comma separated")
    parser.add_argument("--seconds", type=int, default=30, help="per level")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--probe-tokens", type=int, default=48)
    parser.add_argument("--label", default="server", help="the engine's name in the output")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    args.server = Server(args.url, args.model)
    rows = []
    completion(args.server, PROMPTS[0], 4)  # warm-up (first-use packing, CUDA modules)
    for clients in [int(c) for c in args.clients.split(",")]:
        tps, requests, failed = level(args, clients)
        same = invariant(args, clients)
        row = {"engine": args.label, "clients": clients, "tokens_per_s": round(tps, 1),
               "requests": requests, "failed": failed, "probe_same_as_alone": same}
        rows.append(row)
        print(f"{args.label}: {clients} clients, {tps:.1f} completion tok/s, {requests} requests, "
              f"{failed} failed, probe alone vs batch of {clients}: {'same' if same else 'DIFFERS'}",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
