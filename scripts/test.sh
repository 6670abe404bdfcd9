#!/usr/bin/env bash
# The test command (README, .ci/run): fetches the pinned test data into the cache if missing,
# then runs every test of the workspace in release mode, then the Python package's tests
# (scripts/test_python.sh), the C API's (scripts/test_capi.sh), and real HTTP clients and a load
# against a live `samebits serve` (scripts/test_serve_clients.sh). NVRTC (fetched too) compiles
# every CUDA kernel for sm_90 even without a GPU; tests that need a GPU or a missing file say
# SKIPPED loudly on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --data
# NVRTC from the cache: the CUDA kernels are compiled for sm_90 even on machines without a GPU.
export LD_LIBRARY_PATH="${SAMEBITS_CACHE:-$HOME/.cache/samebits}/nvrtc/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cargo test --release --workspace "$@"
# The Python package's tests, the C API's, then real HTTP clients (curl, the openai package) and
# a load against a live `samebits serve`; only for the whole suite (with cargo test arguments,
# only those tests run).
if [ $# -eq 0 ]; then
    scripts/test_python.sh
    scripts/test_capi.sh
    scripts/test_serve_clients.sh
fi
