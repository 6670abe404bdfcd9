"""samebits: run ML models so that the same model and input give the same bits on any CPU or GPU.

Every run can write a *receipt* (hashes of the model, inputs, options and outputs) that
:func:`verify` (or ``samebits verify`` on the command line) re-runs anywhere, bit for bit.

>>> import numpy as np, samebits
>>> model = samebits.compile("det.onnx")
>>> outputs = model.run({"x": np.zeros((1, 3, 64, 64), np.float32)}, receipt="run.json")
>>> samebits.verify("run.json").status
'match'

Tensors go in as NumPy arrays, as anything NumPy can read without copying through DLPack
(``__dlpack__``, CPU tensors) or ``__array__``, or as DLPack tensors in GPU memory (a PyTorch
CUDA tensor), which are copied to host memory first; they come out as NumPy arrays.
:func:`gemm` is the engine's canonical matrix product on NumPy arrays, and ``samebits.torch``
(imported on its own; it needs PyTorch) makes it a reproducible ``matmul`` and ``linear`` for
PyTorch training, forward and backward, on the CPU and the GPU. Errors are
``FileNotFoundError`` (a missing file), ``ValueError`` (bad arguments or inputs),
:class:`ReproducibilityError` (options that break the reproducibility promise) and
``RuntimeError`` (anything else the engine refuses), each with the command line's message.
"""

from __future__ import annotations

import io
import os
import sys
from typing import Any, List, Mapping, NamedTuple, Optional, Sequence, Union

import numpy as np

from . import _native
from ._native import ENGINE, Generation, GenerationStream, ReproducibilityError, Verification

__all__ = [
    "ENGINE",
    "Generation",
    "GenerationStream",
    "Model",
    "ReproducibilityError",
    "TensorInfo",
    "Verification",
    "compile",
    "embed",
    "gemm",
    "generate",
    "generate_stream",
    "verify",
]

PathLike = Union[str, "os.PathLike[str]"]


class TensorInfo(NamedTuple):
    """A model input or output as the model declares it.

    ``dtype`` is samebits' name (``"f32"``, ``"i64"``, ...; receipts use the same names), or
    ``None`` when undeclared; ``shape`` holds ints for known dims and strings for symbolic ones,
    or is ``None`` when even the rank is unknown.
    """

    name: str
    dtype: Optional[str]
    shape: Optional[List[Union[int, str]]]


# DLPack device types (dlpack.h, DLDeviceType) whose memory the CPU reads directly.
_DLPACK_HOST_DEVICES = (1, 3)  # kDLCPU, kDLCUDAHost


def _host_copy(value: Any, name: str) -> np.ndarray:
    """A NumPy copy, in host memory, of a DLPack tensor held in device memory (a CUDA tensor).

    This is a staged path, not zero-copy: the producer copies the tensor to the CPU, through
    DLPack 1.0's ``__dlpack__(dl_device=(kDLCPU, 0), copy=True)`` (NumPy >= 2.1 asks for it),
    or, for a PyTorch tensor whose DLPack predates that, ``Tensor.cpu()``. A model compiled for
    ``cuda`` then uploads the host copy like any other input.
    """
    try:
        return np.from_dlpack(value, device="cpu", copy=True)
    except (BufferError, RuntimeError, TypeError, ValueError, NotImplementedError):
        pass
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    device = value.__dlpack_device__()
    raise TypeError(
        f'input "{name}" is a DLPack tensor on device {tuple(device)} that does not copy '
        "itself to host memory (__dlpack__(dl_device=(1, 0), copy=True)); copy it to the CPU "
        "first"
    )


def _as_array(value: Any, name: str) -> np.ndarray:
    """A C-contiguous little-endian NumPy array of input ``name``: a DLPack tensor in host
    memory is viewed without copying, one in device memory copied (:func:`_host_copy`); other
    values go through ``__array__``."""
    if not isinstance(value, np.ndarray) and hasattr(value, "__dlpack__"):
        device = getattr(value, "__dlpack_device__", lambda: (1, 0))()
        if device[0] not in _DLPACK_HOST_DEVICES:
            value = _host_copy(value, name)
        else:
            try:
                value = np.from_dlpack(value)
            except (BufferError, RuntimeError, TypeError):
                pass  # Not a tensor NumPy can view; fall back to its __array__.
    array = np.asarray(value)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    return np.ascontiguousarray(array)


def _to_npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _from_npy(data: bytes) -> np.ndarray:
    return np.load(io.BytesIO(data), allow_pickle=False)


class Model:
    """An ONNX model compiled for one device and operation set; made by :func:`compile`."""

    def __init__(self, native: _native.Model) -> None:
        self._native = native

    @property
    def path(self) -> str:
        """The model file."""
        return str(self._native.path)

    @property
    def operation_set(self) -> str:
        """``"reproducible"``, ``"reproducible-int8"``, ``"deterministic"`` or ``"default"``."""
        return self._native.operation_set

    @property
    def device(self) -> str:
        """Where the model runs, as receipts record it (``cpu``, ``cuda:0 (<GPU name>)``)."""
        return self._native.device

    @property
    def inputs(self) -> List[TensorInfo]:
        """The inputs a run needs, in order."""
        return [TensorInfo(*i) for i in self._native.inputs]

    @property
    def outputs(self) -> List[TensorInfo]:
        """The outputs a run returns, in order."""
        return [TensorInfo(*o) for o in self._native.outputs]

    def run(
        self, inputs: Mapping[str, Any], receipt: Optional[PathLike] = None
    ) -> "dict[str, np.ndarray]":
        """Runs the model on ``{input name: array}`` and returns ``{output name: array}``.

        Every model input must be given exactly once, with the declared dtype and shape (else
        ``ValueError`` naming the input). The GIL is released while the model runs. With
        ``receipt``, the run's receipt is written there, as ``samebits run --receipt`` writes
        it, and each input beside it as ``<receipt stem>.inputs/<i>.npy`` (a run receipt names
        the file of every input); ``verify(receipt)`` and ``samebits verify`` re-run it.
        A CUDA tensor (DLPack device memory) is copied to host memory before the run, whatever
        the model's device, and the outputs are NumPy arrays in host memory.
        """
        encoded = {name: _to_npy(_as_array(value, name)) for name, value in inputs.items()}
        receipt_path = None if receipt is None else os.fspath(receipt)
        outputs = self._native.run(encoded, receipt_path)
        return {name: _from_npy(data) for name, data in outputs}

    def __repr__(self) -> str:
        return repr(self._native)


def compile(
    path: PathLike,
    artifacts_dir: Optional[PathLike] = None,
    colocate_tensors: bool = False,
    requires_reproducibility: bool = True,
    operation_set: Optional[str] = None,
    device: str = "cpu",
) -> Model:
    """Imports, optimises and plans the ONNX model at ``path``; returns a runnable :class:`Model`.

    ``artifacts_dir`` keeps the compiler's artifacts (the IR after each pass, ``plan.json``;
    a temporary folder otherwise); ``colocate_tensors`` copies external tensor files there
    instead of linking them. ``requires_reproducibility`` (the default) demands the
    ``reproducible`` operation set, the same bits on every machine: asking for another
    ``operation_set`` with it raises :class:`ReproducibilityError`. Without it the operation set
    defaults to ``default`` (fastest, no promise); ``deterministic`` gives the same bits run to
    run on one machine. ``device`` is ``cpu``, ``cuda`` or ``cuda:N``.
    """
    native = _native.compile(
        os.fspath(path),
        None if artifacts_dir is None else os.fspath(artifacts_dir),
        colocate_tensors,
        requires_reproducibility,
        operation_set,
        device,
    )
    return Model(native)


def generate(
    model_path: PathLike,
    prompt: str,
    max_tokens: int = 128,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int = 0,
    chat: bool = False,
    device: str = "cpu",
    receipt: Optional[PathLike] = None,
    operation_set: str = "reproducible",
) -> Generation:
    """Generates text from ``prompt`` with a llama-family model (a GGUF file or a Hugging Face
    checkpoint folder), as ``samebits generate`` does.

    ``temperature`` 0 (the default) is greedy; above 0 the logits are divided by it, cut to the
    ``top_k`` most likely tokens (0: all) and to the fewest whose probabilities reach ``top_p``,
    and one token is drawn with a random number that depends only on ``seed`` and the step: the
    same arguments give the same text on every machine. ``chat`` wraps the prompt as one user
    turn of the model's chat template. The result's ``receipt`` is the generation receipt (a
    dict); with ``receipt`` it is also written to that path for :func:`verify`. The GIL is
    released while the model loads and runs.
    """
    return _native.generate(
        os.fspath(model_path),
        prompt,
        max_tokens,
        temperature,
        top_k,
        top_p,
        seed,
        chat,
        device,
        operation_set,
        None if receipt is None else os.fspath(receipt),
    )


def generate_stream(
    model_path: PathLike,
    prompt: str,
    max_tokens: int = 128,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int = 0,
    chat: bool = False,
    device: str = "cpu",
    receipt: Optional[PathLike] = None,
    operation_set: str = "reproducible",
) -> GenerationStream:
    """:func:`generate` as an iterator of text pieces, yielded as the model produces them.

    The model is loaded (and the arguments checked) before this returns; the generation then
    runs on a thread of its own. Once the iterator is exhausted, its ``result`` is the
    :class:`Generation` (and the receipt, if asked for, is written).
    """
    return _native.generate_stream(
        os.fspath(model_path),
        prompt,
        max_tokens,
        temperature,
        top_k,
        top_p,
        seed,
        chat,
        device,
        operation_set,
        None if receipt is None else os.fspath(receipt),
    )


def verify(receipt_path: PathLike, device: str = "cpu") -> Verification:
    """Re-runs a receipt (of a run, a generation or an embedding) here and compares bit for bit.

    Returns a :class:`Verification` whose ``status`` is ``"match"``, ``"differ"`` (``step`` or
    ``output`` names the first difference) or ``"unusable"`` (the receipt, the model or an
    input is corrupt or has another hash; ``message`` says why), as ``samebits verify`` exits
    0, 1 or 2. A receipt file that does not exist raises ``FileNotFoundError``.
    """
    return _native.verify(os.fspath(receipt_path), device)


def embed(
    model_path: PathLike,
    texts: Sequence[str],
    normalize: Optional[bool] = None,
    receipt: Optional[PathLike] = None,
    operation_set: str = "reproducible",
) -> np.ndarray:
    """Sentence embeddings ``[len(texts), dim]`` float32 with a BERT encoder folder
    (sentence-transformers layout, e.g. all-MiniLM-L6-v2), as ``samebits embed`` computes them.

    Whether embeddings are L2-normalised is the folder's choice (its ``modules.json``);
    ``normalize`` states the expectation and raises ``ValueError`` when the folder disagrees.
    ``receipt`` writes an embedding receipt for :func:`verify`.
    """
    if isinstance(texts, str):
        raise ValueError("texts must be a sequence of strings, not one string")
    data = _native.embed(
        os.fspath(model_path),
        list(texts),
        normalize,
        operation_set,
        None if receipt is None else os.fspath(receipt),
    )
    return _from_npy(data)



def gemm(
    a: Any,
    b: Any,
    c: Any = None,
    trans_a: bool = False,
    trans_b: bool = False,
    device: str = "cpu",
) -> np.ndarray:
    """The canonical matrix product ``op(a) @ op(b) (+ c)`` of float32 matrices, on ``device``.

    ``op`` transposes its operand when ``trans_a`` / ``trans_b`` is set; ``c``, when given, is a
    bias row of ``n`` values added to every row of the ``[m, n]`` product. Every output is the
    canonical dot product of docs/contract.md (section ``gemm``: tiles of 64 terms, each
    accumulated with ``fma`` in float32 from ``+0.0``, then folded left to right) and the bias
    is added once, rounded (``gemm-epilogue``): its bits depend only on the operand values and
    the reduction length, not on ``m``, the row's position, the thread count or the device.
    The product is an ONNX Gemm compiled for ``device`` (``cpu``, ``cuda``, ``cuda:N``) in the
    reproducible operation set, once per shapes and device for the process. Operands may be
    anything :meth:`Model.run` takes; float32 only (``ValueError`` otherwise).
    """
    data = _native.gemm(
        _to_npy(_as_array(a, "a")),
        _to_npy(_as_array(b, "b")),
        None if c is None else _to_npy(_as_array(c, "c")),
        trans_a,
        trans_b,
        device,
    )
    return _from_npy(data)
