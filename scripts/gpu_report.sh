#!/usr/bin/env bash
# GPU report: run on a CUDA machine with release binaries built elsewhere; prints one markdown
# table (bits CPU vs GPU, speed against cuBLAS and copy bandwidth, SmolLM2 decode) and keeps the
# raw logs under $LOGS.
#
# Inputs (environment):
#   BIN    folder with samebits, gpu_check, gpu_exhaustive and gpu_models (release builds)
#   NODE   ONNX node test cases (onnx 1.22.0's onnx/backend/test/data/node)
#   MODEL  SmolLM2-135M-Instruct.Q4_1.gguf
#   LOGS   where the raw outputs go (default /tmp/gpu_report)
#   EXHAUSTIVE  samebits-math functions to check on all 2^32 inputs (default "exp tanh")
#   CUBLAS the PyTorch cuBLAS benchmark (default crates/samebits-cuda/bench/cublas_sgemm.py)
#   OCR    folder of the PP-OCR models (default ~/.cache/samebits/rapidocr/rapidocr_onnxruntime/models)
# Needs libcuda, libnvrtc (LD_LIBRARY_PATH=/usr/local/cuda/lib64) and, for the cuBLAS row,
# python3 with PyTorch.
set -uo pipefail
BIN=${BIN:?folder of release binaries}
NODE=${NODE:?ONNX node test folder}
MODEL=${MODEL:?SmolLM2 GGUF}
LOGS=${LOGS:-/tmp/gpu_report}
EXHAUSTIVE=${EXHAUSTIVE:-exp tanh}
HERE=$(cd "$(dirname "$0")/.." && pwd)
CUBLAS=${CUBLAS:-$HERE/crates/samebits-cuda/bench/cublas_sgemm.py}
OCR=${OCR:-${SAMEBITS_CACHE:-$HOME/.cache/samebits}/rapidocr/rapidocr_onnxruntime/models}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p "$LOGS"
SB="$BIN/samebits"
PROMPT="The capital of France is"
TOKENS=${TOKENS:-64}

row() { echo "| $1 | $2 | $3 |"; }
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)

# 1. ONNX node tests: CPU reference check, then each passing case on the GPU, bit for bit.
"$SB" conformance "$NODE" --device cuda --list-failures >"$LOGS/conformance.txt" 2>&1
total=$(grep -E '^TOTAL ' "$LOGS/conformance.txt")
summary=$(tail -1 "$LOGS/conformance.txt")
read -r _ identical differ failed gpu_steps cpu_steps <<<"$total"

# 2. Correctly rounded math, CPU vs GPU on all 2^32 inputs (a subset of the functions).
# shellcheck disable=SC2086
timeout 300 "$BIN/gpu_exhaustive" $EXHAUSTIVE >"$LOGS/exhaustive.txt" 2>&1
exhaustive=$(grep -E 'mismatches of' "$LOGS/exhaustive.txt" | sed -E 's/ GPU\/CPU mismatches of 4294967296,/ mismatches/; s/ NaN bit differences/ NaN diffs/' | paste -sd ';' -)

# 3. SmolLM2 greedy generation on CPU and GPU: the receipts' chained logits digests, and each
#    receipt verified on the other device.
gen() { # device set receipt
  "$SB" generate --model "$MODEL" --prompt "$PROMPT" --max-tokens "$TOKENS" \
    --device "$1" --operation-set "$2" --receipt "$3" >"$3.txt" 2>"$3.err"
}
digest() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["logits_digest"])' "$1"; }
toks() { grep -oE 'decode: [0-9]+ tokens in [0-9.]+ s \(([0-9.]+) tok/s' "$1" | grep -oE '[0-9.]+ tok/s' | cut -d' ' -f1; }
gen cpu reproducible "$LOGS/gen_cpu.json"
gen cuda reproducible "$LOGS/gen_cuda.json"
cpu_digest=$(digest "$LOGS/gen_cpu.json")
gpu_digest=$(digest "$LOGS/gen_cuda.json")
"$SB" verify "$LOGS/gen_cuda.json" --device cpu >"$LOGS/verify_gpu_on_cpu.txt" 2>&1
v1=$?
"$SB" verify "$LOGS/gen_cpu.json" --device cuda >"$LOGS/verify_cpu_on_gpu.txt" 2>&1
v2=$?

# 4. Decode speed, reproducible against default operation set on the GPU, alternating A B A B.
rep=() def=()
for i in 1 2 3; do
  gen cuda reproducible "$LOGS/rep_$i.json"; rep+=("$(toks "$LOGS/rep_$i.json.err")")
  gen cuda default "$LOGS/def_$i.json"; def+=("$(toks "$LOGS/def_$i.json.err")")
done
median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
rep_tok=$(median "${rep[@]}")
def_tok=$(median "${def[@]}")
cpu_tok=$(toks "$LOGS/gen_cpu.json.err")

# 5. Kernel speed: reproducible SGEMM and GEMVs (gpu_check), cuBLAS SGEMM and copy (PyTorch).
"$BIN/gpu_check" >"$LOGS/gpu_check.txt" 2>&1
python3 "$CUBLAS" >"$LOGS/cublas.txt" 2>&1
# 6. PP-OCR det on the GPU: bits against the CPU, fallback steps, reproducible against default
#    operation set alternating in one process (gpu_models, crates/samebits-runtime/examples).
"$BIN/gpu_models" "$OCR/ch_PP-OCRv4_det_infer.onnx=1,3,640,640" >"$LOGS/models.txt" 2>&1
IFS='|' read -r _ _ det_differ det_steps det_rep det_def det_overhead _ \
  <<<"$(grep -E '^\| ch_PP-OCRv4_det_infer' "$LOGS/models.txt" | head -1)"
det_blas=$(grep -oE 'default set products on .*' "$LOGS/models.txt" | head -1)

field() { grep -F "$1" "$2" | head -1 | awk -F'|' -v c="$3" '{gsub(/^ +| +$/, "", $c); print $c}'; }
sgemm_ms=$(field 'SGEMM 4096x4096x4096 Auto' "$LOGS/gpu_check.txt" 3)
cublas_ms=$(field 'cuBLAS SGEMM 4096x4096x4096' "$LOGS/cublas.txt" 3)
copy_gbs=$(field 'device-to-device copy' "$LOGS/gpu_check.txt" 4 | cut -d' ' -f1)
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
gemv_rows=$(grep -E '^\| GEMV .*one call' "$LOGS/gpu_check.txt" | awk -F'|' -v copy="$copy_gbs" '{
  gsub(/^ +| +$/, "", $2); sub(/^GEMV /, "", $2); sub(/, one call$/, "", $2); split($4, r, " ");
  printf "%s%s: %s GB/s = %.0f%%", sep, $2, r[1], 100 * r[1] / copy; sep = "; " }')
family_line='^\| [^|]+ \| [0-9]+ \| [0-9]+ \| [0-9]+ \| [0-9]+ \|$'
families=$(grep -cE "$family_line" "$LOGS/gpu_check.txt")
clean_families=$(grep -E "$family_line" "$LOGS/gpu_check.txt" | awk -F'|' '$5 + 0 == 0' | wc -l)

echo "GPU: $gpu"
echo
echo "| check | result | notes |"
echo "|---|---|---|"
row "ONNX node tests, GPU vs CPU bit for bit" "$identical identical, $differ differ, $failed GPU failures" "of the cases passing on the CPU ($summary); steps on GPU kernels $gpu_steps, fallen back to CPU $cpu_steps"
row "correctly rounded math, all 2^32 inputs" "$exhaustive" "crates/samebits-math/examples/gpu_exhaustive.rs"
row "kernel families, random cases (gpu_check)" "$clean_families of $families families with 0 differing cases" "NaN payloads may differ (NaN == NaN); see $LOGS/gpu_check.txt"
row "SmolLM2 logits chain digest, $TOKENS tokens" "CPU ${cpu_digest:0:16}…, GPU ${gpu_digest:0:16}… ($([ "$cpu_digest" = "$gpu_digest" ] && echo identical || echo DIFFERENT))" "GPU receipt verified on CPU: exit $v1; CPU receipt verified on GPU: exit $v2"
row "reproducible SGEMM 4096^3 vs cuBLAS (TF32 off)" "$sgemm_ms ms vs $cublas_ms ms = $(ratio "$cublas_ms" "$sgemm_ms")x cuBLAS" "target >= 0.9x"
row "GEMV decode shapes vs copy ($copy_gbs GB/s), one call" "$gemv_rows" "target >= 75% of copy"
row "PP-OCR det 1x3x640x640 ms, GPU reproducible vs default set" "${det_rep// /} vs ${det_def// /} = overhead ${det_overhead// /}" "medians of alternating runs; output elements differing from the CPU:${det_differ}; device / fallback steps:${det_steps}; $det_blas"
row "SmolLM2 decode tok/s, GPU reproducible vs default set" "$rep_tok vs $def_tok = overhead $(python3 -c "print(f'{($def_tok / $rep_tok - 1) * 100:.0f}%')")" "medians of 3 alternating runs; CPU reproducible on this machine: $cpu_tok tok/s"
