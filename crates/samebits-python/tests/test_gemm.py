"""`samebits.gemm`, the canonical matrix product behind `samebits.torch`, on NumPy arrays: close to
a float64 NumPy product (the independent reference), bit for bit the contract's canonical sum
where that can be written in NumPy (a product with a ones row, i.e. the bias gradient), and the
same bits whatever the batch, the row's position, the operand layout and the thread count.
DLPack tensors in device memory are staged through host memory (tested with a CPU stand-in)."""

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

import samebits
from conftest import canonical_column_sums

# Reduction lengths around the contract's tile of 64 terms (docs/contract.md, canonical-sum).
LENGTHS = [1, 63, 64, 65, 200]


def operands(m, k, n, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = rng.standard_normal(n, dtype=np.float32)
    return a, b, c


def error_bound(a, b, c):
    """A bound on the float32 rounding error of `a @ b + c` in any order of at most K + 1
    roundings per output: (K + 2) u (|a| |b| + |c|), u = 2^-24."""
    k = a.shape[1]
    return (k + 2) * 2.0**-24 * (np.abs(a).astype(np.float64) @ np.abs(b) + np.abs(c))


def sha256(array):
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


@pytest.mark.parametrize("k", LENGTHS)
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True)])
def test_products_are_close_to_float64_numpy(k, trans_a, trans_b):
    a, b, c = operands(9, k, 7, seed=k)
    reference = a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64)
    y = samebits.gemm(
        a.T.copy() if trans_a else a, b.T.copy() if trans_b else b, c, trans_a, trans_b
    )
    assert y.dtype == np.float32 and y.shape == (9, 7)
    error = np.abs(y.astype(np.float64) - reference)
    assert np.all(error <= error_bound(a, b, c)), error.max()
    assert np.any(y != 0)


@pytest.mark.parametrize("k", [*LENGTHS, 1000])
def test_a_product_with_ones_is_the_canonical_sum_bit_for_bit(k):
    """The bias gradient of samebits.torch.linear: `ones[1, K] @ dy` has the bits of the
    canonical sum over the batch (fma(1, t, p) rounds p + t once)."""
    dy = np.random.default_rng(k).standard_normal((k, 50), dtype=np.float32)
    sums = samebits.gemm(np.ones((1, k), np.float32), dy)[0]
    assert sha256(sums) == sha256(canonical_column_sums(dy))
    if k == 1000:
        # The tiles matter: a plain left-to-right float32 sum differs somewhere.
        plain = np.zeros(50, np.float32)
        for row in dy:
            plain = plain + row
        assert np.any(plain != sums)


def test_a_row_has_the_same_bits_alone_and_anywhere_in_a_batch():
    a, b, c = operands(37, 130, 19, seed=1)
    batch = samebits.gemm(a, b, c)
    for i in (0, 17, 36):
        assert sha256(samebits.gemm(a[i : i + 1], b, c)) == sha256(batch[i : i + 1])
    shuffled = np.random.default_rng(2).permutation(37)
    assert sha256(samebits.gemm(a[shuffled], b, c)) == sha256(batch[shuffled])
    # A transposed operand gives the bits of the same matrix stored transposed.
    assert sha256(samebits.gemm(a.T.copy(), b, c, trans_a=True)) == sha256(batch)
    assert sha256(samebits.gemm(a, b.T.copy(), c, trans_b=True)) == sha256(batch)


THREADS_SCRIPT = """
import hashlib, sys, numpy as np, samebits
rng = np.random.default_rng(3)
a = rng.standard_normal((257, 300), dtype=np.float32)
b = rng.standard_normal((300, 129), dtype=np.float32)
c = rng.standard_normal(129, dtype=np.float32)
print(hashlib.sha256(samebits.gemm(a, b, c).tobytes()).hexdigest())
"""


def test_results_do_not_depend_on_the_thread_count():
    """The CPU products run on rayon's pool, sized by RAYON_NUM_THREADS at process start."""
    digests = set()
    for threads in ("1", "3"):
        done = subprocess.run(
            [sys.executable, "-c", THREADS_SCRIPT],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "RAYON_NUM_THREADS": threads},
            check=True,
        )
        digests.add(done.stdout.strip())
    assert len(digests) == 1 and len(digests.pop()) == 64


def test_compiled_products_leave_no_temporary_folders(tmp_path):
    """A product is kept for the process, but its compiler artifacts are not: a process that
    ran products leaves nothing in its temporary folder."""
    subprocess.run(
        [sys.executable, "-c", THREADS_SCRIPT],
        capture_output=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        check=True,
    )
    assert list(tmp_path.iterdir()) == []


class DeviceTensor:
    """A stand-in for a CUDA tensor: its DLPack device is CUDA (2, 0), and it copies itself to
    host memory only when asked through DLPack 1.0's `dl_device` (unless `refuses`)."""

    def __init__(self, array, refuses=False):
        self._array = array
        self._refuses = refuses

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, *, dl_device=None, copy=None, **kwargs):
        if self._refuses or dl_device is None or tuple(dl_device) != (1, 0):
            raise BufferError("this tensor is in device memory")
        return self._array.copy().__dlpack__(**kwargs)


def test_dlpack_tensors_in_device_memory_are_staged_through_the_host():
    a, b, c = operands(5, 70, 3)
    expected = samebits.gemm(a, b, c)
    staged = samebits.gemm(DeviceTensor(a), DeviceTensor(b), DeviceTensor(c))
    assert sha256(staged) == sha256(expected)
    with pytest.raises(TypeError, match=r'input "b" is a DLPack tensor on device \(2, 0\)'):
        samebits.gemm(a, DeviceTensor(b, refuses=True))


def test_bad_operands_raise_value_errors_naming_them():
    a, b, c = operands(4, 6, 5)
    with pytest.raises(ValueError, match=r"op\(a\) is 4x6 and op\(b\) 4x6, their inner dims"):
        samebits.gemm(a, a)
    with pytest.raises(ValueError, match="b has dtype f64; gemm takes float32 only"):
        samebits.gemm(a, b.astype(np.float64))
    with pytest.raises(ValueError, match=r"c has shape \[4\]; the bias of a 4x5 product"):
        samebits.gemm(a, b, c[:4])
    with pytest.raises(ValueError, match=r"a has shape \[24\]; gemm takes 2-D matrices"):
        samebits.gemm(a.reshape(-1), b)
    with pytest.raises(ValueError, match="unknown device"):
        samebits.gemm(a, b, device="gpu")
