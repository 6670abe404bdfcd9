#!/usr/bin/env bash
# The test command (README, .ci/run): fetches the pinned test data into the cache if missing,
# then runs every test of the workspace in release mode. Tests that need a GPU or a missing
# file say SKIPPED loudly on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --data
cargo test --release --workspace "$@"
