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
import pathlib
import subprocess
import sys
import tempfile
import time

import openai

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "scripts"))
import serve_load  # noqa: E402  (the shared load harness)

REFERENCE = " Paris.\n\nThe answer is: 201"


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


def load(client, model, clients, seconds, pid):
    """scripts/serve_load.py's load, each request sent through the openai package; the server's
    memory must not grow between the first sixth and the end."""

    def send(prompt, seed, max_tokens, stream, chat):
        args = dict(model=model, temperature=0.8, seed=seed, max_tokens=max_tokens)
        if chat:
            create, args["messages"] = client.chat.completions.create, [{"role": "user", "content": prompt}]
            piece = lambda choice: choice.delta.content
            whole = lambda choice: choice.message.content
        else:
            create, args["prompt"] = client.completions.create, prompt
            piece = whole = lambda choice: choice.text
        if not stream:
            r = create(**args)
            return whole(r.choices[0]), r.choices[0].finish_reason, receipt_of(r), []
        stamps, text, reason, receipt = [], "", None, None
        for chunk in create(stream=True, **args):
            if chunk.choices and piece(chunk.choices[0]):
                stamps.append(time.monotonic())
                text += piece(chunk.choices[0])
            if chunk.choices and chunk.choices[0].finish_reason:
                reason, receipt = chunk.choices[0].finish_reason, receipt_of(chunk)
        return text, reason, receipt, stamps

    (early, _), (late, _) = serve_load.run_load(send, clients, seconds, pid)
    # The highest RSS (MiB) of the first and of the last sixth of the run: allocator noise
    # aside, memory must not grow with the number of requests served.
    assert early is not None and late <= early * 1.05 + 16, (early, late)


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
