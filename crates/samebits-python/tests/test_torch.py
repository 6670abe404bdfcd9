"""`samebits.torch`: `linear` and `matmul` forward and backward against float64 PyTorch (the
independent reference, within float32 rounding bounds), the bias gradient bit for bit the
contract's canonical sum, batch invariance, the documented errors, and the training example
(examples/python/train_mlp.py) for a few steps. PyTorch is not a dependency of the package and
CI does not install it: without it these tests are skipped, saying so, and only the import
error is checked. With a CUDA GPU, the CPU and the GPU give the same bits."""

import hashlib
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO, canonical_column_sums

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(
    torch is None, reason="SKIPPED: PyTorch is not installed (pip install torch to run these)"
)
EXAMPLE = REPO / "examples" / "python" / "train_mlp.py"


def sha256(tensor):
    return hashlib.sha256(tensor.detach().cpu().numpy().tobytes()).hexdigest()


def float64_leaves(*tensors):
    return [t.detach().double().requires_grad_() for t in tensors]


def assert_close(actual, reference, bound):
    error = (actual.double() - reference).abs()
    assert bool((error <= bound).all()), float(error.max())


def linear_bound(x, w, b, k):
    """(K + 2) u (|x| |w|^T + |b|): a float32 rounding bound of one linear output."""
    return (k + 2) * 2.0**-24 * (x.double().abs() @ w.double().abs().T + b.double().abs())


@pytest.mark.skipif(torch is not None, reason="PyTorch is installed: the import works")
def test_without_torch_the_import_error_says_what_to_install():
    with pytest.raises(ImportError, match=r"samebits.torch needs PyTorch \(`pip install torch`\)"):
        import samebits.torch  # noqa: F401


@needs_torch
@pytest.mark.parametrize("k", [5, 64, 130])
def test_linear_forward_and_backward_are_close_to_float64_torch(k):
    import samebits.torch as st

    gen = torch.Generator().manual_seed(k)
    x = torch.randn(2, 9, k, generator=gen, requires_grad=True)
    w = torch.randn(6, k, generator=gen, requires_grad=True)
    b = torch.randn(6, generator=gen, requires_grad=True)
    dy = torch.randn(2, 9, 6, generator=gen)
    y = st.linear(x, w, b)
    y.backward(dy)
    xd, wd, bd = float64_leaves(x, w, b)
    yd = torch.nn.functional.linear(xd, wd, bd)
    yd.backward(dy.double())

    assert y.dtype == torch.float32 and y.shape == (2, 9, 6)
    assert_close(y, yd, linear_bound(x.reshape(-1, k), w, b, k).reshape(2, 9, 6))
    u = 2.0**-24
    dy2 = dy.reshape(-1, 6).double().abs()
    assert_close(x.grad, xd.grad, (6 + 2) * u * (dy2 @ w.double().abs()).reshape(2, 9, k))
    assert_close(w.grad, wd.grad, (18 + 2) * u * (dy2.T @ x.reshape(-1, k).double().abs()))
    assert_close(b.grad, bd.grad, (18 + 2) * u * dy2.sum(0))
    # The bias gradient is the canonical sum over the batch, bit for bit.
    expected = canonical_column_sums(dy.reshape(-1, 6).numpy())
    assert b.grad.numpy().tobytes() == expected.tobytes()


@needs_torch
def test_linear_without_bias_and_matmul_backward():
    import samebits.torch as st

    gen = torch.Generator().manual_seed(1)
    x = torch.randn(7, 70, generator=gen, requires_grad=True)
    w = torch.randn(3, 70, generator=gen, requires_grad=True)
    st.linear(x, w).sum().backward()
    xd, wd = float64_leaves(x, w)
    torch.nn.functional.linear(xd, wd).sum().backward()
    assert_close(x.grad, xd.grad, 5 * 2.0**-24 * wd.abs().sum(0).expand(7, 70))
    assert_close(w.grad, wd.grad, 9 * 2.0**-24 * xd.abs().sum(0).expand(3, 70))

    a = torch.randn(5, 80, generator=gen, requires_grad=True)
    c = torch.randn(80, 4, generator=gen, requires_grad=True)
    dout = torch.randn(5, 4, generator=gen)
    out = st.matmul(a, c)
    out.backward(dout)
    ad, cd = float64_leaves(a, c)
    (ad @ cd).backward(dout.double())
    u = 2.0**-24
    assert_close(out, ad @ cd, 82 * u * (ad.abs() @ cd.abs()))
    assert_close(a.grad, ad.grad, 6 * u * (dout.double().abs() @ cd.abs().T))
    assert_close(c.grad, cd.grad, 7 * u * (ad.abs().T @ dout.double().abs()))


@needs_torch
def test_a_row_has_the_same_bits_alone_and_in_a_batch():
    import samebits.torch as st

    gen = torch.Generator().manual_seed(2)
    x = torch.randn(33, 100, generator=gen)
    w = torch.randn(8, 100, generator=gen)
    b = torch.randn(8, generator=gen)
    batch = st.linear(x, w, b)
    for i in (0, 20, 32):
        assert sha256(st.linear(x[i : i + 1], w, b)) == sha256(batch[i : i + 1])


@needs_torch
def test_bad_tensors_raise_the_documented_errors():
    import samebits.torch as st

    x, w = torch.zeros(4, 3), torch.zeros(2, 3)
    with pytest.raises(TypeError, match="input has dtype torch.float64; samebits.torch takes"):
        st.linear(x.double(), w)
    with pytest.raises(TypeError, match="weight must be a torch.Tensor, not ndarray"):
        st.linear(x, w.numpy())
    with pytest.raises(ValueError, match=r"input has shape \[4, 3\] and weight \[3, 2\]"):
        st.linear(x, w.T)
    with pytest.raises(ValueError, match=r"bias has shape \[3\]; a weight of 2 output features"):
        st.linear(x, w, torch.zeros(3))
    with pytest.raises(ValueError, match=r"a has shape \[4, 3\] and b \[2, 3\]"):
        st.matmul(x, w)
    with pytest.raises(ValueError, match="computes on cpu and cuda tensors, not meta"):
        st.matmul(x.to("meta"), w.T.to("meta"))


def load_example():
    spec = importlib.util.spec_from_file_location("train_mlp", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs_torch
def test_the_training_example_learns_and_keeps_its_bits_across_thread_counts():
    example = load_example()
    x, y, initial = example.make_data(0)
    params = example.train("cpu", steps=5)
    assert [tuple(p.shape) for p in params] == [p.shape for p in initial]
    assert all(not np.array_equal(p.detach().numpy(), q) for p, q in zip(params, initial))

    def loss(ps):
        with torch.no_grad():
            diff = example.forward(torch.from_numpy(x), ps) - torch.from_numpy(y)
            return float((diff * diff).mean())

    start = [torch.from_numpy(p) for p in initial]
    assert loss(params) < loss(start)
    digest = example.weights_sha256(params)
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--device", "cpu", "--steps", "5", "--log-every", "0"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "RAYON_NUM_THREADS": "1"},
        check=True,
    )
    assert done.stdout.strip() == f"final weights sha256 (cpu, 5 steps): {digest}"


@needs_torch
@pytest.mark.skipif(
    torch is None or not torch.cuda.is_available(),
    reason="SKIPPED: needs PyTorch with a CUDA GPU",
)
def test_the_gpu_gives_the_cpu_bits():
    example = load_example()
    cpu = example.weights_sha256(example.train("cpu", steps=10))
    cuda = example.train("cuda", steps=10)
    assert all(p.device.type == "cuda" for p in cuda)
    assert example.weights_sha256(cuda) == cpu
