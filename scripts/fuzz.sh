#!/usr/bin/env bash
# Coverage-guided fuzzing of every loader samebits runs on files an attacker may have written
# (docs/security.md, section "Fuzzing"): builds the cargo-fuzz targets in fuzz/ (release code
# with debug assertions, overflow checks and AddressSanitizer) and runs each for SECONDS
# (default 60) on its corpus, fuzz/corpus/<target> (written by fuzz/seed.py from the pinned files
# when missing). Fails when any target crashes, panics, runs one input longer than 10 s or goes
# past the memory limits; the input is saved under fuzz/artifacts/<target>/. Inputs that once
# failed (fuzz/regressions/<target>/, committed with their fix) are replayed first.
#
# CI (.ci/run) runs it with 60: scripts/fuzz.sh 60. It needs the nightly toolchain; cargo-fuzz
# (pinned below) is installed under target/tools when no cargo-fuzz is on the PATH.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail

SECONDS_PER_TARGET=${1:-60}
shift || true
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

ALL_TARGETS=(onnx_model tensor_files gguf hf_folder receipt serve_request)
TARGETS=("${@:-${ALL_TARGETS[@]}}")
declare -A DICTIONARY=(
  [onnx_model]=onnx.dict [tensor_files]=onnx.dict [gguf]=gguf.dict
  [hf_folder]=json.dict [receipt]=json.dict [serve_request]=json.dict
)

# -detect_leaks=0: libFuzzer runs LeakSanitizer after each input whose mallocs and frees
# differ, which the model-building targets (gguf, hf_folder) do on nearly every input; that
# made them ten times slower. Memory that really grows per input still meets -rss_limit_mb.
# A model's computed tensors are bounded well below the default 16 GiB here, so that one
# allocation past it (-malloc_limit_mb) is a size some check missed.
export SAMEBITS_MAX_TENSOR_BYTES=$((256 << 20))
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/samebits-fuzz.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
export SAMEBITS_FUZZ_SCRATCH=$SCRATCH

CARGO_FUZZ_VERSION=0.13.2
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  if [ ! -x target/tools/bin/cargo-fuzz ]; then
    cargo install --quiet --locked --root target/tools cargo-fuzz --version "$CARGO_FUZZ_VERSION"
  fi
  export PATH="$ROOT/target/tools/bin:$PATH"
fi

# A missing corpus is written by fuzz/seed.py, which needs NumPy and the gguf package: they are
# installed, pinned, into target/fuzz-venv (made again when the pins change).
SEED_PINS="numpy==2.4.6 gguf==0.19.0"
for target in "${TARGETS[@]}"; do
  if [ ! -d "fuzz/corpus/$target" ]; then
    scripts/pinned_venv.sh target/fuzz-venv "$SEED_PINS"
    target/fuzz-venv/bin/python fuzz/seed.py
    break
  fi
done

# The instrumented build needs several GB. A link that runs out of disk dies of SIGBUS ("ld
# terminated with signal 7", seen in CI), so say how much room there is, and when it is short,
# drop what the test run left that nothing here reads: the test executables (cargo relinks
# them when the tests run again) and clippy's check files.
FREE_GB=$(df -Pk fuzz | awk 'NR == 2 { print int($4 / 1048576) }')
echo "== disk: ${FREE_GB} GiB free for the fuzz build"
if [ "$FREE_GB" -lt 20 ] && [ -d target ]; then
  echo "== under 20 GiB: removing test executables under target/release/deps and target/debug"
  find target/release/deps -maxdepth 1 -type f -executable ! -name '*.so' -delete 2>/dev/null || true
  rm -rf target/debug
  df -h fuzz | tail -n 1
fi
cargo +nightly fuzz build --fuzz-dir fuzz

mkdir -p fuzz/logs
failed=()
# Inputs that once crashed a target (fuzz/regressions/<target>/, committed) run first, each
# alone: a fix that regresses fails here before any fuzzing.
for target in "${TARGETS[@]}"; do
  inputs=(fuzz/regressions/"$target"/*)
  [ -e "${inputs[0]}" ] || continue
  echo "== $target: replaying ${#inputs[@]} regression input(s)"
  if ! cargo +nightly fuzz run --fuzz-dir fuzz "$target" "${inputs[@]}" -- -detect_leaks=0 \
      -rss_limit_mb=4096 -malloc_limit_mb=2048 >"fuzz/logs/$target.replay.log" 2>&1; then
    tail -n 40 "fuzz/logs/$target.replay.log"
    failed+=("$target (regression input)")
  fi
done
for target in "${TARGETS[@]}"; do
  echo "== $target: ${SECONDS_PER_TARGET} s (log: fuzz/logs/$target.log)"
  status=0
  cargo +nightly fuzz run --fuzz-dir fuzz "$target" "fuzz/corpus/$target" -- \
    -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=4096 \
    -malloc_limit_mb=2048 -detect_leaks=0 -dict="fuzz/dict/${DICTIONARY[$target]}" \
    -print_final_stats=1 >"fuzz/logs/$target.log" 2>&1 || status=$?
  grep -E '^(stat::number_of_executed_units|stat::new_units_added|Done)' \
    "fuzz/logs/$target.log" || true
  if [ "$status" -ne 0 ]; then
    tail -n 40 "fuzz/logs/$target.log"
    failed+=("$target")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzzing failed: ${failed[*]} (inputs under fuzz/artifacts/)"
  exit 1
fi
echo "fuzzing passed: ${TARGETS[*]}, ${SECONDS_PER_TARGET} s each"
