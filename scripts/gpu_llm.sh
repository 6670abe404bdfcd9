#!/usr/bin/env bash
# GPU LLM check: run on a CUDA machine with release binaries built elsewhere. Runs the device
# tests of samebits-cuda and samebits-llm (GPU bits against the CPU ops, KV cache, GatherGguf,
# end-to-end logits) and the gpu_llm example (a random-weight SmolLM2-shaped model: GPU vs CPU
# logits, GPU prefill vs decode, decode and prefill tok/s in the reproducible and default
# operation sets, with CUDA graphs and without). Prints the tables; raw logs go to $LOGS.
#
# Inputs (environment):
#   BIN   folder with the test binaries (cuda_lib, cuda_attention, cuda_executor,
#         cuda_reproducible, llm_gpu) and the gpu_llm example
#   LOGS  where the raw outputs go (default /tmp/gpu_llm)
#   RUNS  timed runs per speed test (default 5)
set -uo pipefail
BIN=${BIN:?folder of release binaries}
LOGS=${LOGS:-/tmp/gpu_llm}
RUNS=${RUNS:-5}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p "$LOGS"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1

status=0
for t in cuda_lib cuda_attention cuda_executor cuda_reproducible llm_gpu; do
  [ -x "$BIN/$t" ] || { echo "| $t | missing |"; continue; }
  start=$(date +%s.%N)
  "$BIN/$t" --test-threads 1 >"$LOGS/$t.txt" 2>&1
  rc=$?
  [ $rc -eq 0 ] || status=1
  took=$(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')")
  summary=$(grep -E '^test result' "$LOGS/$t.txt" | tail -1)
  skipped=$(grep -c SKIPPED "$LOGS/$t.txt")
  echo "| $t | exit $rc, $summary, $skipped skipped, ${took} s |"
  [ $rc -eq 0 ] || grep -E 'panicked|FAILED|differs|error' "$LOGS/$t.txt" | head -20
done

echo
echo "## gpu_llm, CUDA graphs on"
"$BIN/gpu_llm" --runs "$RUNS" 2>&1 | tee "$LOGS/gpu_llm_graphs.txt" | tail -12
echo
echo "## gpu_llm, CUDA graphs off (SAMEBITS_CUDA_GRAPHS=0)"
SAMEBITS_CUDA_GRAPHS=0 "$BIN/gpu_llm" --runs 3 --quick 2>&1 | tee "$LOGS/gpu_llm_eager.txt" | tail -8
exit $status
