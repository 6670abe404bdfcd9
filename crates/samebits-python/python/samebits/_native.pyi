"""Type stubs of the extension module `samebits._native` (crates/samebits-python/src); the
package `samebits` wraps it and is what to import."""

from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

ENGINE: str

class ReproducibilityError(RuntimeError):
    """The options ask for a reproducibility promise samebits cannot keep with them."""

_Dim = Union[int, str]
_TensorDescription = Tuple[str, Optional[str], Optional[List[_Dim]]]

class Model:
    @property
    def path(self) -> Path: ...
    @property
    def operation_set(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def inputs(self) -> List[_TensorDescription]: ...
    @property
    def outputs(self) -> List[_TensorDescription]: ...
    def run(
        self, inputs: Dict[str, bytes], receipt: Optional[str] = None
    ) -> List[Tuple[str, bytes]]: ...

class Generation:
    """A finished generation."""

    text: str
    tokens: List[int]
    prompt_tokens: List[int]
    receipt_json: str
    receipt_path: Optional[Path]
    prefill_seconds: float
    decode_seconds: float
    @property
    def receipt(self) -> Dict[str, object]: ...

class GenerationStream:
    """An iterator of text pieces; `result` is the Generation once it is exhausted."""

    def __iter__(self) -> "GenerationStream": ...
    def __next__(self) -> str: ...
    @property
    def result(self) -> Optional[Generation]: ...

class Verification:
    """The outcome of re-running a receipt."""

    status: str
    kind: str
    message: str
    step: Optional[int]
    steps_matched: Optional[int]
    output: Optional[str]
    outputs: List[Tuple[str, str, Optional[str]]]
    def __bool__(self) -> bool: ...

def compile(
    path: str,
    artifacts_dir: Optional[str] = None,
    colocate_tensors: bool = False,
    requires_reproducibility: bool = True,
    operation_set: Optional[str] = None,
    device: str = "cpu",
) -> Model: ...
def generate(
    model_path: str,
    prompt: str,
    max_tokens: int = 128,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int = 0,
    chat: bool = False,
    device: str = "cpu",
    operation_set: str = "reproducible",
    receipt: Optional[str] = None,
) -> Generation: ...
def generate_stream(
    model_path: str,
    prompt: str,
    max_tokens: int = 128,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int = 0,
    chat: bool = False,
    device: str = "cpu",
    operation_set: str = "reproducible",
    receipt: Optional[str] = None,
) -> GenerationStream: ...
def verify(receipt_path: str, device: str = "cpu") -> Verification: ...
def embed(
    model_path: str,
    texts: List[str],
    normalize: Optional[bool] = None,
    operation_set: str = "reproducible",
    receipt: Optional[str] = None,
) -> bytes: ...
def gemm(
    a: bytes,
    b: bytes,
    c: Optional[bytes] = None,
    trans_a: bool = False,
    trans_b: bool = False,
    device: str = "cpu",
) -> bytes: ...
