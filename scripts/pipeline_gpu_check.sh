#!/usr/bin/env bash
# Pipeline parallelism on GPUs (issue #7, docs/pipeline.md): for N = 1, 2 (and 4 when 4 GPUs are
# visible) runs SmolLM2 greedy generation and PP-OCR det with --device cuda --n-partitions N and
# prints, per N, the logits chain digest / output hash and the throughput next to the CPU
# reproducible hashes, with "identical" or "DIFFERENT". On one GPU it runs N = 1 through the
# pipeline's NCCL transport (one rank sending to itself, SAMEBITS_FORCE_PIPELINE=1) besides the
# plain single-GPU path. Raw logs stay under $LOGS.
#
# Inputs (environment):
#   BIN    folder with the samebits release binary (built elsewhere, stripped)
#   MODEL  SmolLM2-135M-Instruct.Q4_1.gguf
#   DET    ch_PP-OCRv4_det_infer.onnx
#   LOGS   where the raw outputs go (default /tmp/pipeline_gpu_check)
#   TOKENS tokens to generate (default 32); SIDE det input side (default 640); RUNS (default 20)
#   NCCL_LIB a folder holding libnccl.so or libnccl.so.2 (default: found in Python's nvidia-nccl
#          package, ldconfig, or the CUDA folders)
# Exit status: 0 when every hash is identical to the CPU's, 1 otherwise.
set -uo pipefail
BIN=${BIN:?folder with the samebits binary}
MODEL=${MODEL:?SmolLM2 GGUF}
DET=${DET:?PP-OCRv4 det ONNX}
LOGS=${LOGS:-/tmp/pipeline_gpu_check}
TOKENS=${TOKENS:-32}
SIDE=${SIDE:-640}
RUNS=${RUNS:-20}
SB="$BIN/samebits"
mkdir -p "$LOGS"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}

# cudarc loads libnccl.so; NCCL packages ship libnccl.so.2: link it in a folder of our own.
find_nccl() {
  [ -n "${NCCL_LIB:-}" ] && { ls "$NCCL_LIB"/libnccl.so* 2>/dev/null | head -1; return; }
  python3 -c 'import nvidia.nccl, os; d = os.path.join(list(nvidia.nccl.__path__)[0], "lib"); print(os.path.join(d, sorted(f for f in os.listdir(d) if f.startswith("libnccl.so"))[0]))' 2>/dev/null && return
  ldconfig -p 2>/dev/null | awk '/libnccl\.so/ {print $NF; exit}' | grep . && return
  ls /usr/local/cuda/lib64/libnccl.so* /usr/lib/x86_64-linux-gnu/libnccl.so* 2>/dev/null | head -1
}
nccl=$(find_nccl || true)
if [ -n "$nccl" ]; then
  mkdir -p "$LOGS/nccl"
  ln -sf "$nccl" "$LOGS/nccl/libnccl.so"
  export LD_LIBRARY_PATH="$LOGS/nccl:$LD_LIBRARY_PATH"
  echo "NCCL: $nccl"
else
  echo "NCCL: not found (the pipeline rows will show the error)"
fi

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
echo "GPUs: $gpus x $gpu_name"
ns="1"
[ "$gpus" -ge 2 ] && ns="$ns 2"
[ "$gpus" -ge 4 ] && ns="$ns 4"

# The det input: 1x3xSIDExSIDE float32, a fixed pattern, as .npy (no NumPy needed).
python3 - "$LOGS/x.npy" "$SIDE" <<'EOF'
import array, struct, sys
path, side = sys.argv[1], int(sys.argv[2])
n = 3 * side * side
data = array.array('f', (((i * 7919) % 2000) / 1000.0 - 1.0 for i in range(n)))
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, %d, %d), }" % (side, side)
header += ' ' * ((64 - (10 + len(header) + 1) % 64) % 64) + '\n'
with open(path, 'wb') as f:
    f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)) + header.encode() + data.tobytes())
EOF

json() { python3 -c 'import json,sys; r = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
PROMPT="The capital of France is"
PROMPTS=(--prompt "$PROMPT" --prompt "Once upon a time" --prompt "def fibonacci(n):" --prompt "The three primary colors are")

# measure TAG VAR=VALUE ARGS...: with the environment variable and the device / partition
# ARGS, runs (1) greedy generation of one prompt, (2) four prompts at once, (3) PP-OCR det with
# a receipt, (4) the det bench. Sets digest, tps, digests, overall, hash, ms, rps.
measure() {
  local tag=$1 var=$2; shift 2
  env "$var" "$SB" generate --model "$MODEL" --prompt "$PROMPT" --max-tokens "$TOKENS" "$@" \
    --receipt "$LOGS/gen_$tag.json" >"$LOGS/gen_$tag.txt" 2>"$LOGS/gen_$tag.err"
  digest=$(json "$LOGS/gen_$tag.json" 'r["logits_digest"]')
  tps=$(grep -oE 'decode: [0-9]+ tokens in [0-9.]+ s \([0-9.]+ tok/s' "$LOGS/gen_$tag.err" | grep -oE '[0-9.]+ tok/s' | cut -d' ' -f1)
  env "$var" "$SB" generate --model "$MODEL" "${PROMPTS[@]}" --max-tokens "$TOKENS" "$@" \
    --receipt "$LOGS/many_$tag.json" >"$LOGS/many_$tag.txt" 2>"$LOGS/many_$tag.err"
  overall=$(grep -oE '\([0-9.]+ tok/s overall' "$LOGS/many_$tag.err" | grep -oE '[0-9.]+')
  digests=$(for i in 0 1 2 3; do json "$LOGS/many_$tag.$i.json" 'r["logits_digest"][:8]'; done | paste -sd, -)
  env "$var" "$SB" run "$DET" --input "x=$LOGS/x.npy" --out "$LOGS/det_$tag" "$@" \
    --receipt "$LOGS/det_$tag.json" >"$LOGS/det_$tag.txt" 2>&1
  hash=$(json "$LOGS/det_$tag.json" 'r["outputs"][0]["sha256"]')
  env "$var" "$SB" bench "$DET" --input "x=$LOGS/x.npy" --runs "$RUNS" --warmup 2 "$@" \
    >"$LOGS/bench_$tag.txt" 2>&1
  ms=$(grep -oE 'median [0-9.]+ ms' "$LOGS/bench_$tag.txt" | grep -oE '[0-9.]+')
  rps=$(grep -oE 'throughput [0-9.]+ runs/s' "$LOGS/bench_$tag.txt" | grep -oE '[0-9.]+')
  [ -z "$rps" ] && [ -n "$ms" ] && rps="$(python3 -c "print(f'{1000 / $ms:.2f}')") (1/median)"
}
same() { [ -n "$1" ] && [ "$1" = "$2" ] && echo identical || echo DIFFERENT; }
status=0
row() { # N path
  local a b c
  a=$(same "$digest" "$cpu_digest"); b=$(same "$digests" "$cpu_digests"); c=$(same "$hash" "$cpu_hash")
  for x in "$a" "$b" "$c"; do [ "$x" = identical ] || status=1; done
  echo "| $1 | $2 | ${digest:0:16}… | $a | ${tps:-error} | $digests | $b | ${overall:-n/a} | ${hash:0:16}… | $c | ${ms:-error} | ${rps:-error} |"
}

measure cpu X=1 --device cpu
cpu_digest=$digest cpu_digests=$digests cpu_hash=$hash
echo "CPU reproducible: SmolLM2 logits chain digest $cpu_digest; 4 prompts $cpu_digests; PP-OCR det output sha256 $cpu_hash"
echo
echo "| N | path | SmolLM2 digest ($TOKENS tokens) | vs CPU | decode tok/s | 4 prompts at once: digests | vs CPU | tok/s overall | det sha256 (1x3x${SIDE}x${SIDE}) | vs CPU | det median ms | det runs/s ($RUNS in flight) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
row - "CPU, $(nproc) threads"
measure sim2 X=1 --device cpu --n-partitions 2
row 2 "CPU, 2 simulated stages"
measure gpu1 X=1 --device cuda
row 1 "one GPU, no pipeline"
for n in $ns; do
  force=X=1
  [ "$n" = 1 ] && force=SAMEBITS_FORCE_PIPELINE=1
  measure "n$n" "$force" --device cuda --n-partitions "$n"
  row "$n" "pipeline over NCCL, $n process(es)"
done
echo

# Receipts cross-checked: a GPU pipeline receipt on the CPU, the CPU receipt through the pipeline.
last=${ns##* }
force=X=1; [ "$last" = 1 ] && force=SAMEBITS_FORCE_PIPELINE=1
"$SB" verify "$LOGS/gen_n$last.json" --device cpu >"$LOGS/verify_gen_cpu.txt" 2>&1; v1=$?
env "$force" "$SB" verify "$LOGS/gen_cpu.json" --device cuda --n-partitions "$last" >"$LOGS/verify_gen_n.txt" 2>&1; v2=$?
"$SB" verify "$LOGS/det_n$last.json" --device cpu >"$LOGS/verify_det_cpu.txt" 2>&1; v3=$?
env "$force" "$SB" verify "$LOGS/det_cpu.json" --device cuda --n-partitions "$last" >"$LOGS/verify_det_n.txt" 2>&1; v4=$?
echo "verify (exit 0 = bit-identical): N=$last GPU generation receipt on the CPU: $v1; the CPU's through N=$last GPUs: $v2; N=$last det receipt on the CPU: $v3; the CPU's through N=$last GPUs: $v4"
[ "$v1$v2$v3$v4" = 0000 ] || status=1
for n in $ns; do
  grep -E '^stage [0-9]+:' "$LOGS/bench_n$n.txt" | sed "s/^/N=$n det /"
  grep -hE 'pipeline: ' "$LOGS/gen_n$n.err" | sed "s/^/N=$n SmolLM2 /"
  grep -hE '^error' "$LOGS"/*_n"$n".err "$LOGS"/*_n"$n".txt 2>/dev/null | sort -u | sed "s/^/N=$n: /"
done
exit $status
