"""Reproducible ``matmul`` and ``linear`` for PyTorch: a training step with the same bits on the
CPU and the GPU.

Each product, forward and backward, is :func:`samebits.gemm`, the engine's canonical matrix
product (docs/contract.md, ``gemm``: every output a dot product in one fixed order that depends
only on its length, tiles of 64 ``fma`` terms in float32 folded left to right), so its bits do
not depend on the device, the batch size, a row's position or the thread count:

- ``linear(x, weight, bias)``: ``y = x @ weight.T + bias`` (the bias added once, rounded);
  ``dx = dy @ weight``, ``dweight = dy.T @ x`` (a dot product over the batch), and
  ``dbias[j]`` = the canonical sum over the batch of ``dy[:, j]``, computed as the canonical
  dot product of ``dy[:, j]`` with ones, which has the same bits (``fma(1, t, p) = p + t``);
- ``matmul(a, b)``: ``c = a @ b``; ``da = dc @ b.T``, ``db = a.T @ dc``.

A CPU tensor is computed by the CPU's kernels, a CUDA tensor by samebits' own CUDA kernels on
its GPU (a product compiled once per shapes and device, then reused). CUDA tensors are staged
through host memory (copied to the CPU, handed to the engine, which uploads them to the GPU,
and the result copied back to the tensor's device): results are tensors on the inputs' device,
but every call crosses the PCIe bus, so this is a correctness tool rather than a fast path.

float32 only; the functions are differentiable once (no double backward). Importing this module
imports PyTorch, which the ``samebits`` package does not otherwise need.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from . import gemm as _gemm

try:
    import torch
    from torch.autograd.function import once_differentiable
except ImportError as missing:  # pragma: no cover - exercised only where torch is absent
    raise ImportError(
        "samebits.torch needs PyTorch (`pip install torch`); the rest of samebits works without it"
    ) from missing

__all__ = ["linear", "matmul"]


def _engine_device(tensor: "torch.Tensor") -> str:
    """The engine's device name for a tensor's device (``cpu``, ``cuda:N``)."""
    if tensor.device.type == "cpu":
        return "cpu"
    if tensor.device.type == "cuda":
        index = tensor.device.index
        return f"cuda:{torch.cuda.current_device() if index is None else index}"
    raise ValueError(f"samebits.torch computes on cpu and cuda tensors, not {tensor.device}")


def _check(name: str, tensor: "torch.Tensor", like: Optional["torch.Tensor"] = None) -> None:
    """``TypeError`` unless ``tensor`` is a float32 tensor; ``ValueError`` unless on ``like``'s
    device."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, not {type(tensor).__name__}")
    if tensor.dtype != torch.float32:
        raise TypeError(f"{name} has dtype {tensor.dtype}; samebits.torch takes torch.float32 only")
    if like is not None and tensor.device != like.device:
        raise ValueError(f"{name} is on {tensor.device} and the input on {like.device}")
    _engine_device(tensor)


def _host(tensor: "torch.Tensor") -> np.ndarray:
    return tensor.detach().cpu().numpy()


def _product(
    a: "torch.Tensor",
    b: "torch.Tensor",
    c: Optional["torch.Tensor"] = None,
    trans_a: bool = False,
    trans_b: bool = False,
) -> "torch.Tensor":
    """``op(a) @ op(b) (+ c)`` by :func:`samebits.gemm` on ``a``'s device, as a tensor there."""
    out = _gemm(
        _host(a),
        _host(b),
        None if c is None else _host(c),
        trans_a=trans_a,
        trans_b=trans_b,
        device=_engine_device(a),
    )
    return torch.from_numpy(out).to(a.device)


def _column_sums(dy: "torch.Tensor") -> "torch.Tensor":
    """The canonical sum over the rows of ``dy`` ``[n, m]``: ``ones[1, n] @ dy``, shape ``[m]``."""
    ones = torch.ones((1, dy.shape[0]), dtype=torch.float32, device=dy.device)
    return _product(ones, dy).reshape(-1)


class _Linear(torch.autograd.Function):
    """``x @ weight.T + bias`` on 2-D ``x``, with the canonical products both ways."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return _product(x, weight, bias, trans_b=True)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        dy = dy.contiguous()
        dx = _product(dy, weight) if ctx.needs_input_grad[0] else None
        dweight = _product(dy, x, trans_a=True) if ctx.needs_input_grad[1] else None
        dbias = _column_sums(dy) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return dx, dweight, dbias


class _MatMul(torch.autograd.Function):
    """``a @ b`` on 2-D operands, with the canonical products both ways."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _product(a, b)

    @staticmethod
    @once_differentiable
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        dc = dc.contiguous()
        da = _product(dc, b, trans_b=True) if ctx.needs_input_grad[0] else None
        db = _product(a, dc, trans_a=True) if ctx.needs_input_grad[1] else None
        return da, db


def linear(
    input: "torch.Tensor", weight: "torch.Tensor", bias: Optional["torch.Tensor"] = None
) -> "torch.Tensor":
    """``input @ weight.T + bias`` as ``torch.nn.functional.linear`` computes it, with the
    canonical products forward and backward (module doc).

    ``input`` is ``[..., in_features]`` (its leading dims are the batch), ``weight``
    ``[out_features, in_features]``, ``bias`` ``[out_features]`` or ``None``; all float32
    (``TypeError`` otherwise) and on one device, ``cpu`` or ``cuda`` (``ValueError``
    otherwise). The result is ``[..., out_features]`` on that device.
    """
    _check("input", input)
    _check("weight", weight, input)
    if bias is not None:
        _check("bias", bias, input)
    if weight.dim() != 2 or input.dim() < 1 or input.shape[-1] != weight.shape[1]:
        raise ValueError(
            f"input has shape {list(input.shape)} and weight {list(weight.shape)}: linear needs "
            "input [..., in_features] and weight [out_features, in_features]"
        )
    if bias is not None and list(bias.shape) != [weight.shape[0]]:
        raise ValueError(
            f"bias has shape {list(bias.shape)}; a weight of {weight.shape[0]} output features "
            f"needs a bias of shape [{weight.shape[0]}]"
        )
    rows = input.reshape(-1, weight.shape[1])
    out = _Linear.apply(rows, weight, bias)
    return out.reshape(*input.shape[:-1], weight.shape[0])


def matmul(a: "torch.Tensor", b: "torch.Tensor") -> "torch.Tensor":
    """``a @ b`` of 2-D float32 tensors ``[m, k]`` and ``[k, n]`` on one device, with the
    canonical products forward and backward (module doc); ``TypeError`` / ``ValueError`` as
    :func:`linear`. Batched and 1-D operands are not taken: reshape them to 2-D, or use
    :func:`linear` for a batch of rows."""
    _check("a", a)
    _check("b", b, a)
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(
            f"a has shape {list(a.shape)} and b {list(b.shape)}: matmul takes 2-D tensors "
            "[m, k] and [k, n]"
        )
    return _MatMul.apply(a, b)
