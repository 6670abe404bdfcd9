#!/usr/bin/env bash
# The test command (README, .ci/run): fetches the pinned test data into the cache if missing,
# then runs every test of the workspace in release mode, then the Python package's tests
# (scripts/test_python.sh) and the C API's (scripts/test_capi.sh). NVRTC (fetched too) compiles every CUDA kernel for sm_90 even
# without a GPU; tests that need a GPU or a missing file say SKIPPED loudly on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --data
# NVRTC from the cache: the CUDA kernels are compiled for sm_90 even on machines without a GPU.
export LD_LIBRARY_PATH="${SAMEBITS_CACHE:-$HOME/.cache/samebits}/nvrtc/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cargo test --release --workspace "$@"
scripts/test_python.sh
scripts/test_capi.sh
