#!/usr/bin/env bash
# Full verification pipeline for the named functions (default: all implemented ones):
#   1. enumerate the hard cases of every input (examples/hard_cases.rs -> tools/hard_cases/),
#   2. regenerate the exception tables of csrc/sb_math.h with mpmath (tools/gen_exceptions.py),
#   3. rebuild and run the exhaustive comparison with core-math (examples/exhaustive.rs).
# After a pass, move the function from UnaryFn::PENDING to UnaryFn::ALL (src/lib.rs) and record
# the printed line in docs/math.md. Needs python3 with mpmath. Usage: tools/verify.sh [FUNCS...]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p samebits-math --example hard_cases --example exhaustive
../../target/release/examples/hard_cases "$@"
python3 tools/gen_exceptions.py
cargo build --release -p samebits-math --example exhaustive
../../target/release/examples/exhaustive "$@"
