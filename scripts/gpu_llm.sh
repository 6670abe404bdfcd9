#!/usr/bin/env bash
# GPU LLM check: run on a CUDA machine with release binaries built elsewhere. Runs the device
# tests of samebits-cuda and samebits-llm (GPU bits against the CPU ops, KV cache, GatherGguf,
# end-to-end logits) and the gpu_llm example (a random-weight SmolLM2-shaped model: GPU vs CPU
# logits, GPU prefill vs decode, decode and prefill tok/s in the reproducible and default
# operation sets, with CUDA graphs and without, with the attention's fused product and without),
# and, where ncu is installed, the GPU time of each kernel of a prefill and a decode step.
# Prints the tables; raw logs go to $LOGS.
#
# Inputs (environment):
#   BIN   folder with the test binaries (cuda_lib, cuda_attention, cuda_executor,
#         cuda_reproducible, llm_gpu), the gpu_llm example and, optionally, samebits (then
#         `samebits generate` runs on the random model on CPU and GPU, receipts cross-verified)
#   LOGS  where the raw outputs go (default /tmp/gpu_llm)
#   RUNS  timed runs per speed test (default 5)
set -uo pipefail
status=0
BIN=${BIN:?folder of release binaries}
LOGS=${LOGS:-/tmp/gpu_llm}
RUNS=${RUNS:-5}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} RUST_BACKTRACE=1
mkdir -p "$LOGS"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1

echo
echo "## gpu_llm, CUDA graphs on"
timeout 110 "$BIN/gpu_llm" --runs "$RUNS" 2>&1 | tee "$LOGS/gpu_llm_graphs.txt" | tail -12
echo
echo "## gpu_llm, the attention's fused product on (SAMEBITS_CUDA_FUSE=all)"
SAMEBITS_CUDA_FUSE=all timeout 40 "$BIN/gpu_llm" --runs 3 --quick 2>&1 | tee "$LOGS/gpu_llm_attprod.txt" | tail -6
echo
echo "## gpu_llm, CUDA graphs off (SAMEBITS_CUDA_GRAPHS=0)"
SAMEBITS_CUDA_GRAPHS=0 timeout 40 "$BIN/gpu_llm" --runs 3 --quick 2>&1 | tee "$LOGS/gpu_llm_eager.txt" | tail -8

MODEL=/tmp/samebits_random_llama.gguf
if [ -x "$BIN/samebits" ] && [ -f "$MODEL" ]; then
  echo
  echo "## samebits generate on the random model (64 tokens), CPU vs GPU"
  for d in cpu cuda; do
    "$BIN/samebits" generate --model "$MODEL" --prompt "ABC" --max-tokens 64 --device $d \
      --receipt "$LOGS/gen_$d.json" >"$LOGS/gen_$d.txt" 2>"$LOGS/gen_$d.err"
    echo "$d: exit $?, $(grep -oE 'decode: [^)]*\)' "$LOGS/gen_$d.err"), digest $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["logits_digest"][:16])' "$LOGS/gen_$d.json" 2>/dev/null)"
  done
  "$BIN/samebits" verify "$LOGS/gen_cuda.json" --device cpu >"$LOGS/verify_gpu_on_cpu.txt" 2>&1
  echo "GPU receipt verified on the CPU: exit $?"
  "$BIN/samebits" verify "$LOGS/gen_cpu.json" --device cuda >"$LOGS/verify_cpu_on_gpu.txt" 2>&1
  echo "CPU receipt verified on the GPU: exit $?"
fi

echo
echo "## device tests"
for t in cuda_attention cuda_executor llm_gpu cuda_lib cuda_reproducible; do
  [ -x "$BIN/$t" ] || { echo "| $t | missing |"; continue; }
  start=$(date +%s.%N)
  timeout 60 "$BIN/$t" --test-threads 1 >"$LOGS/$t.txt" 2>&1
  rc=$?
  [ $rc -eq 0 ] || status=1
  took=$(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')")
  summary=$(grep -E '^test result' "$LOGS/$t.txt" | tail -1)
  skipped=$(grep -c SKIPPED "$LOGS/$t.txt")
  echo "| $t | exit $rc, $summary, $skipped skipped, ${took} s |"
  [ $rc -eq 0 ] || grep -E 'panicked|FAILED|differs|error' "$LOGS/$t.txt" | head -20
done

# Where a decode step's time goes: per-kernel GPU time (ncu, kernels serialized, graphs off) of a
# 100-token prefill and two decode steps, summarized per forward call (scripts/ncu_kernels.py).
if command -v ncu >/dev/null; then
  echo
  echo "## ncu: GPU kernels of gpu_llm --profile 100 2 (graphs off)"
  SAMEBITS_CUDA_GRAPHS=0 timeout 60 ncu --metrics gpu__time_duration.sum --csv --page raw \
    --print-units base --clock-control none --cache-control none --log-file "$LOGS/ncu.csv" \
    "$BIN/gpu_llm" --profile 100 2 >"$LOGS/ncu_run.txt" 2>&1
  python3 "$(dirname "$0")/ncu_kernels.py" "$LOGS/ncu.csv" --last 1
fi
exit $status
