#!/usr/bin/env bash
# Builds, here, everything scripts/gpu_check_all.sh runs on a CUDA machine, stripped and packed
# into DEST/bin.tar.gz (release binaries, the CUDA test binaries, and BASE as the baseline
# binary for the decode-speed comparison when given).
#
#   scripts/gpu_bundle.sh DEST [BASE]
#
# The test data travels separately (it is larger than one device call carries): see
# gpu_check_all.sh for the cache layout it expects.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:?destination folder}
BASE=${2:-}
stage=$(mktemp -d)
mkdir -p "$stage/bin/tests" "$DEST"
cargo build --release --quiet --bin samebits
cargo build --release --quiet -p samebits-cuda --example gpu_check
cargo build --release --quiet -p samebits-runtime --example gpu_models
cargo build --release --quiet -p samebits-math --features cuda --example gpu_exhaustive
cp target/release/samebits target/release/examples/{gpu_check,gpu_models,gpu_exhaustive} "$stage/bin/"
[[ -n "$BASE" ]] && cp "$BASE" "$stage/bin/samebits-base"
# The test binaries that run kernels on a GPU (they print SKIPPED without one).
for spec in "samebits-cuda" "samebits-llm --test gpu"; do
  # shellcheck disable=SC2086
  cargo test --release --quiet -p $spec --no-run --message-format json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])' |
    while read -r exe; do
      name=$(basename "$exe" | sed -E 's/-[0-9a-f]{16}$//')
      cp "$exe" "$stage/bin/tests/$name"
    done
done
strip "$stage"/bin/* "$stage"/bin/tests/* 2>/dev/null || true
tar czf "$DEST/bin.tar.gz" -C "$stage" bin
rm -rf "$stage"
ls -la "$DEST/bin.tar.gz"
