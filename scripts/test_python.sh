#!/usr/bin/env bash
# The Python package's tests (scripts/test.sh runs them after the cargo tests): a virtual
# environment in target/py-venv with pinned maturin, pytest and NumPy (made again when the pins
# change), the `samebits` wheel built by maturin from crates/samebits-python and installed
# there, the `samebits` command (the tests compare the package with it), then pytest on
# crates/samebits-python/tests. PyTorch is not installed (its only wheels here are CUDA builds of
# several GB): the samebits.torch tests skip, and -rs prints why; the canonical products they use
# are tested on NumPy arrays (test_gemm.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PINS="maturin==1.16.0 pytest==9.2.0 numpy==2.4.6"
venv=target/py-venv
scripts/pinned_venv.sh "$venv" "$PINS"
# The command and the workspace's libraries (libsamebits_capi among them) in one build: the
# features scripts/setup.sh's `cargo build --release --bin samebits` resolves, so its artifacts
# are shared.
cargo build --release --quiet --workspace --lib --bin samebits
rm -rf target/py-wheels
"$venv/bin/maturin" build --release --quiet --interpreter "$venv/bin/python" \
    --manifest-path crates/samebits-python/Cargo.toml --out target/py-wheels
"$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps \
    target/py-wheels/samebits-*.whl
SAMEBITS_CLI="$PWD/target/release/samebits" "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider \
    crates/samebits-python/tests "$@"
