"""Real clients against a live `samebits serve` (issue #18), run by scripts/test_serve_clients.sh.

With the `openai` Python package (pinned in that script), streamed and not:
- greedy completion of "The capital of France is" gives the float64 reference forward's text
  (shared/README.md), and its receipt verifies with the `samebits` CLI;
- a streamed chat equals the non-streamed one, and its last chunk carries the receipt;
- bad requests raise the documented errors (404 unknown model, 400 bad field);
then a load: N clients for S seconds of mixed requests (completions and chat, streamed and not,
several seeds and lengths). Every response must be complete and well formed, every repeat of
the same request must give the same text and logits digest (whatever else ran beside it), and
the server's resident memory must not grow between the first and the last part of the load.
Prints p50 / p99 time to first token and inter-token latency, measured by the clients.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time

import openai

REFERENCE = " Paris.\n\nThe answer is: 201"


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def receipt_of(response):
    extra = response.model_extra or {}
    receipt = extra.get("samebits_receipt")
    assert receipt and receipt["format"] == "samebits-generation-receipt/1", extra
    return receipt


def verify(cli, receipt):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(receipt, f)
    done = subprocess.run([cli, "verify", f.name], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def functional(client, model, cli):
    response = client.completions.create(
        model=model, prompt="The capital of France is", temperature=0, max_tokens=12
    )
    assert response.choices[0].text == REFERENCE, response.choices[0].text
    assert response.choices[0].finish_reason == "length"
    assert response.usage.completion_tokens == 12
    print("completion:", repr(response.choices[0].text), "|", verify(cli, receipt_of(response)))

    messages = [{"role": "user", "content": "What is the capital of France?"}]
    whole = client.chat.completions.create(
        model=model, messages=messages, temperature=0.7, seed=11, max_tokens=20
    )
    pieces, last = [], None
    for chunk in client.chat.completions.create(
        model=model, messages=messages, temperature=0.7, seed=11, max_tokens=20, stream=True
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        last = chunk
    assert "".join(pieces) == whole.choices[0].message.content, (pieces, whole)
    streamed = receipt_of(last)
    assert streamed["logits_digest"] == receipt_of(whole)["logits_digest"]
    assert streamed["messages"] == messages
    print("chat:", repr(whole.choices[0].message.content), "|", verify(cli, streamed))

    try:
        client.completions.create(model="no-such-model", prompt="x")
        raise AssertionError("an unknown model was served")
    except openai.NotFoundError as e:
        assert "no-such-model" in str(e), e
    try:
        client.completions.create(model=model, prompt="x", temperature=5)
        raise AssertionError("temperature 5 was accepted")
    except openai.BadRequestError as e:
        assert "temperature" in str(e), e
    print("errors: 404 unknown model, 400 temperature")


PROMPTS = [
    "The capital of France is",
    "Once upon a time there was a little robot who",
    "List three fruits:",
    "In 1969, the first humans",
]


def load(client, model, clients, seconds, pid):
    failures, first_seen, repeats = [], {}, [0]
    ttft, itl = [], []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    rss = {"start": None}

    def one(i, n):
        prompt = PROMPTS[(i + n) % len(PROMPTS)]
        seed, max_tokens = (i * 7 + n) % 5, 4 + (i + 3 * n) % 21
        stream, chat = n % 2 == 0, (i + n) % 3 == 0
        key = (prompt, seed, max_tokens, chat)
        args = dict(model=model, temperature=0.8, seed=seed, max_tokens=max_tokens)
        start = time.monotonic()
        stamps, text, receipt, reason = [], "", None, None
        if chat:
            messages = [{"role": "user", "content": prompt}]
            if stream:
                for chunk in client.chat.completions.create(messages=messages, stream=True, **args):
                    if chunk.choices and chunk.choices[0].delta.content:
                        stamps.append(time.monotonic())
                        text += chunk.choices[0].delta.content
                    if chunk.choices and chunk.choices[0].finish_reason:
                        reason, receipt = chunk.choices[0].finish_reason, receipt_of(chunk)
            else:
                r = client.chat.completions.create(messages=messages, **args)
                text, reason, receipt = r.choices[0].message.content, r.choices[0].finish_reason, receipt_of(r)
        else:
            if stream:
                for chunk in client.completions.create(prompt=prompt, stream=True, **args):
                    if chunk.choices and chunk.choices[0].text:
                        stamps.append(time.monotonic())
                        text += chunk.choices[0].text
                    if chunk.choices and chunk.choices[0].finish_reason:
                        reason, receipt = chunk.choices[0].finish_reason, receipt_of(chunk)
            else:
                r = client.completions.create(prompt=prompt, **args)
                text, reason, receipt = r.choices[0].text, r.choices[0].finish_reason, receipt_of(r)
        assert reason in ("stop", "length"), reason
        assert isinstance(text, str)
        assert len(receipt["tokens"]) == len(receipt["step_logits_sha256"]) <= max_tokens
        with lock:
            repeats[0] += key in first_seen
            seen = first_seen.setdefault(key, (text, receipt["logits_digest"]))
            assert seen == (text, receipt["logits_digest"]), (key, seen, text)
            if stamps:
                ttft.append(stamps[0] - start)
                itl.extend(b - a for a, b in zip(stamps, stamps[1:]))

    def worker(i):
        n = 0
        while time.monotonic() < deadline:
            try:
                one(i, n)
            except Exception as e:  # every failure is reported below
                with lock:
                    failures.append(f"client {i} request {n}: {e!r}")
            n += 1
            if i == 0 and rss["start"] is None and time.monotonic() > deadline - seconds * 5 / 6:
                rss["start"] = rss_kib(pid)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    end_rss = rss_kib(pid)

    def pct(values, p):
        values = sorted(values)
        return values[min(len(values) - 1, int(p / 100 * len(values)))] if values else float("nan")

    print(
        f"load: {clients} clients for {seconds} s, {len(failures)} failed, "
        f"{len(first_seen) + repeats[0]} requests, {repeats[0]} of them repeats of an earlier one "
        f"with identical text and logits digest; "
        f"TTFT p50 {pct(ttft, 50) * 1e3:.0f} ms p99 {pct(ttft, 99) * 1e3:.0f} ms; "
        f"inter-token p50 {pct(itl, 50) * 1e3:.1f} ms p99 {pct(itl, 99) * 1e3:.1f} ms; "
        f"server RSS {rss['start']} KiB after the first sixth, {end_rss} KiB at the end"
    )
    assert not failures, "\n".join(failures[:10])
    # Allocator noise aside, memory must not grow with the number of requests served.
    assert end_rss <= rss["start"] * 1.05 + 16 * 1024, (rss["start"], end_rss)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--cli", required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=int, default=60)
    args = parser.parse_args()
    client = openai.OpenAI(base_url=args.base_url + "/v1", api_key="unused", max_retries=0, timeout=600)
    functional(client, args.model, args.cli)
    load(client, args.model, args.clients, args.seconds, args.pid)
    print(f"clients: all checks passed (openai {openai.__version__})")


if __name__ == "__main__":
    sys.exit(main())
