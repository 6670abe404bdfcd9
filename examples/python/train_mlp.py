"""Trains a small MLP with samebits.torch and prints the sha256 of its final weights: the same
hash with ``--device cpu`` and ``--device cuda`` (issue #20's deterministic training triad).

    python examples/python/train_mlp.py --device cpu
    python examples/python/train_mlp.py --device cuda

The model is 16 -> 64 -> 64 -> 4 with ReLU, trained with a mean squared error and plain SGD for
100 steps (``--steps``) on one fixed batch. The whole step is bit-identical across devices
because every operation in it is:

- the data and the initial weights are made on the CPU by NumPy from a fixed seed, so their bits
  do not depend on the device, then moved to it;
- every product, forward and backward (dX, dW and the bias gradient, a sum over the batch), is
  ``samebits.torch.linear``: samebits' canonical order, on the CPU's or the GPU's kernels;
- ReLU and its gradient select values without arithmetic, so they are exact everywhere;
- the loss gradient ``(out - y) * (2 / n)`` and the update ``w - lr * g`` are written as
  separately rounded elementwise float32 ops (``mul``, then ``sub_``), each one correctly rounded
  IEEE operation on every device, with the constants as float32 tensors. A fused form such as
  ``w.add_(g, alpha=-lr)`` is one ``fma`` on one device and a rounded product then a sum on
  another: the bits would differ;
- no torch reduction reaches the weights: each weight is used once per step, so autograd never
  sums gradients, and the bias gradient is samebits' sum. The loss value is summed by torch only
  to be printed.

The hash covers every parameter, in layer order (weight, then bias), as little-endian float32
bytes.
"""

import argparse
import hashlib

import numpy as np
import torch

import samebits.torch as st

SIZES = [16, 64, 64, 4]
BATCH = 128


def make_data(seed: int):
    """Inputs, targets and initial parameters, all float32, made by NumPy on the CPU."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, SIZES[0]), dtype=np.float32)
    # A smooth target of the inputs, computed in float64 and rounded once.
    mix = rng.standard_normal((SIZES[0], SIZES[-1]))
    y = np.tanh(x.astype(np.float64) @ mix / 4.0).astype(np.float32)
    params = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        bound = 1.0 / np.sqrt(fan_in)
        params.append(rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32))
        params.append(rng.uniform(-bound, bound, fan_out).astype(np.float32))
    return x, y, params


def forward(x, params):
    h = x
    layers = len(params) // 2
    for i in range(layers):
        h = st.linear(h, params[2 * i], params[2 * i + 1])
        if i < layers - 1:
            h = torch.relu(h)
    return h


def train(device: str, steps: int, lr: float = 0.05, seed: int = 0, log_every: int = 0):
    """Trains on ``device`` and returns the final parameters (tensors on that device)."""
    x_np, y_np, params_np = make_data(seed)
    x = torch.from_numpy(x_np).to(device)
    y = torch.from_numpy(y_np).to(device)
    params = [torch.from_numpy(p).to(device).requires_grad_() for p in params_np]
    # Constants as float32 tensors: each op below is one float32 operation on every device.
    grad_scale = torch.tensor(2.0 / y.numel(), dtype=torch.float32, device=device)
    step_size = torch.tensor(lr, dtype=torch.float32, device=device)
    for step in range(steps):
        out = forward(x, params)
        diff = out.detach() - y
        if log_every and step % log_every == 0:
            print(f"step {step:3d}  loss {(diff * diff).mean().item():.6f}")  # printing only
        out.backward(diff * grad_scale)  # d(mean((out - y)^2)) / d out
        with torch.no_grad():
            for p in params:
                update = step_size * p.grad
                p.sub_(update)
                p.grad = None
    return params


def weights_sha256(params) -> str:
    digest = hashlib.sha256()
    for p in params:
        digest.update(p.detach().cpu().numpy().astype("<f4").tobytes())
    return digest.hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--log-every", type=int, default=20)
    args = parser.parse_args()
    params = train(args.device, args.steps, log_every=args.log_every)
    print(f"final weights sha256 ({args.device}, {args.steps} steps): {weights_sha256(params)}")


if __name__ == "__main__":
    main()
