"""`samebits.compile` and `Model.run` on PP-OCRv4 det against the `samebits` command: the same
input gives the same output bits through NumPy and through `samebits run`, receipts made on one
side verify on the other, a tampered receipt differs, and bad arguments raise the documented
exceptions."""

import hashlib
import json

import numpy as np
import pytest

import samebits

# A small image keeps the test fast; the det model takes any height and width.
SHAPE = (1, 3, 64, 96)


def det_input() -> np.ndarray:
    return np.random.default_rng(20).standard_normal(SHAPE, dtype=np.float32)


def sha256(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


@pytest.fixture(scope="module")
def det(det_model):
    return samebits.compile(det_model)


def test_inputs_and_outputs_describe_the_model(det):
    (x,) = det.inputs
    assert x.name == "x" and x.dtype == "f32"
    assert len(x.shape) == 4 and x.shape[1] == 3 and isinstance(x.shape[0], str)
    (y,) = det.outputs
    assert y.name == "sigmoid_0.tmp_0" and y.dtype == "f32"
    assert det.operation_set == "reproducible" and det.device == "cpu"


def test_numpy_run_equals_the_cli_run_and_receipts_cross(det, det_model, run_cli, tmp_path):
    x = det_input()
    np.save(tmp_path / "x.npy", x)
    run_cli("run", det_model, "--input", f"x={tmp_path / 'x.npy'}", "--out", tmp_path / "cli",
            "--receipt", tmp_path / "cli.json")
    cli_out = np.load(tmp_path / "cli" / "sigmoid_0.tmp_0.npy")
    cli_receipt = json.loads((tmp_path / "cli.json").read_text())

    out = det.run({"x": x}, receipt=tmp_path / "py.json")
    (name,) = out
    y = out[name]
    assert y.dtype == np.float32 and y.shape == (1, 1, 64, 96)
    assert sha256(y) == sha256(cli_out)
    assert 0.0 <= y.min() and y.max() <= 1.0  # a sigmoid's range: real values, not zeros
    assert y.std() > 0

    py_receipt = json.loads((tmp_path / "py.json").read_text())
    assert py_receipt["outputs"] == cli_receipt["outputs"]
    assert py_receipt["model"]["sha256"] == cli_receipt["model"]["sha256"]
    assert [i["sha256"] for i in py_receipt["inputs"]] == [
        i["sha256"] for i in cli_receipt["inputs"]
    ]
    # The Python receipt verifies with the command, the command's with the package.
    done = run_cli("verify", tmp_path / "py.json")
    assert "verified: all 1 outputs are bit-identical" in done.stdout
    verification = samebits.verify(tmp_path / "cli.json")
    assert verification.status == "match" and verification.kind == "run"
    assert verification
    assert verification.outputs == [
        (name, cli_receipt["outputs"][0]["sha256"], cli_receipt["outputs"][0]["sha256"])
    ]


def test_a_tampered_run_receipt_differs_on_both_sides(det, run_cli, tmp_path):
    det.run({"x": det_input()}, receipt=tmp_path / "run.json")
    receipt = json.loads((tmp_path / "run.json").read_text())
    receipt["outputs"][0]["sha256"] = "0" * 64
    (tmp_path / "run.json").write_text(json.dumps(receipt))
    verification = samebits.verify(tmp_path / "run.json")
    assert verification.status == "differ"
    assert verification.output == "sigmoid_0.tmp_0"
    assert not verification
    assert run_cli("verify", tmp_path / "run.json", check=False).returncode == 1


def test_a_receipt_whose_input_changed_is_unusable(det, run_cli, tmp_path):
    det.run({"x": det_input()}, receipt=tmp_path / "run.json")
    np.save(tmp_path / "run.inputs" / "0.npy", det_input() + 1)
    verification = samebits.verify(tmp_path / "run.json")
    assert verification.status == "unusable"
    assert "input \"x\" sha256 is" in verification.message
    assert run_cli("verify", tmp_path / "run.json", check=False).returncode == 2


def test_dlpack_and_array_like_inputs_give_the_same_bits(det):
    x = det_input()
    expected = sha256(det.run({"x": x})["sigmoid_0.tmp_0"])

    class DLPackOnly:
        """A producer with only the DLPack protocol (as a CPU tensor of another library)."""

        def __init__(self, array):
            self._array = array

        def __dlpack__(self, **kwargs):
            return self._array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self._array.__dlpack_device__()

    class ArrayOnly:
        def __init__(self, array):
            self._array = array

        def __array__(self, dtype=None, copy=None):
            return self._array

    assert sha256(det.run({"x": DLPackOnly(x)})["sigmoid_0.tmp_0"]) == expected
    assert sha256(det.run({"x": ArrayOnly(x)})["sigmoid_0.tmp_0"]) == expected
    # A non-contiguous view is read in its logical order.
    wide = np.zeros((1, 3, 64, 192), np.float32)
    wide[..., ::2] = x
    assert sha256(det.run({"x": wide[..., ::2]})["sigmoid_0.tmp_0"]) == expected


def test_bad_inputs_raise_value_errors_naming_them(det):
    x = det_input()
    with pytest.raises(ValueError, match='no input named "image"'):
        det.run({"image": x})
    with pytest.raises(ValueError, match='missing input "x"'):
        det.run({})
    with pytest.raises(ValueError, match=r'input "x" has shape \[1, 4, 64, 96\]'):
        det.run({"x": np.zeros((1, 4, 64, 96), np.float32)})
    with pytest.raises(ValueError, match='input "x" has dtype f64'):
        det.run({"x": x.astype(np.float64)})


def test_bad_arguments_raise_the_documented_exceptions(det_model, tmp_path):
    missing = tmp_path / "missing.onnx"
    with pytest.raises(FileNotFoundError) as raised:
        samebits.compile(missing)
    assert raised.value.filename == str(missing)
    with pytest.raises(samebits.ReproducibilityError, match="does not keep the reproducibility"):
        samebits.compile(det_model, operation_set="default")
    assert issubclass(samebits.ReproducibilityError, RuntimeError)
    with pytest.raises(ValueError, match="unknown operation set"):
        samebits.compile(det_model, requires_reproducibility=False, operation_set="fast")
    with pytest.raises(ValueError, match="unknown device"):
        samebits.compile(det_model, device="gpu")
    with pytest.raises(FileNotFoundError):
        samebits.verify(tmp_path / "no-receipt.json")
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(RuntimeError, match="junk.onnx"):
        samebits.compile(tmp_path / "junk.onnx")


def test_the_default_operation_set_is_chosen_without_the_promise(det_model):
    model = samebits.compile(det_model, requires_reproducibility=False)
    assert model.operation_set == "default"
    y = model.run({"x": det_input()})["sigmoid_0.tmp_0"]
    assert y.shape == (1, 1, 64, 96)


def test_artifacts_are_kept_where_asked(det_model, tmp_path):
    samebits.compile(det_model, artifacts_dir=tmp_path / "build")
    plan = json.loads((tmp_path / "build" / "plan.json").read_text())
    assert plan["operation_set"] == "reproducible"
    assert plan["inputs"][0]["name"] == "x"


def test_the_gil_is_released_while_the_model_runs(det):
    """A Python thread keeps running while another thread's model runs: the longest pause of
    its loop stays far below the length of one run (it would be the whole run if the GIL were
    held)."""
    import threading
    import time

    x = np.random.default_rng(1).standard_normal((1, 3, 640, 640), dtype=np.float32)
    start = time.perf_counter()
    det.run({"x": x})
    one_run = time.perf_counter() - start
    worker = threading.Thread(target=lambda: [det.run({"x": x}) for _ in range(3)])
    longest_pause, last = 0.0, time.perf_counter()
    worker.start()
    while worker.is_alive():
        now = time.perf_counter()
        longest_pause, last = max(longest_pause, now - last), now
    worker.join()
    assert longest_pause < one_run / 2, (longest_pause, one_run)
