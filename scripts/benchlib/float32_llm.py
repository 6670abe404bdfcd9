#!/usr/bin/env python3
"""A plain float32 implementation of a llama-family GGUF model (SmolLM2), the "PyTorch float32"
peer of scripts/bench.py: weights dequantized once to float32 by the `gguf` package, then an
eager PyTorch forward (CPU or CUDA) with a KV cache.

The model follows the GGUF metadata: RMSNorm, rotary embedding on adjacent pairs (GGUF stores Q/K
rows permuted for it), grouped-query causal attention, SiLU-gated MLP, tied output projection;
the speed test ppN computes the last position's logits only (as llama-bench and `samebits
bench` do), the bits probes every position's.

    float32_llm.py --gguf M.gguf --threads 2 speed --prompt-tokens 128,512 --gen-tokens 128 --runs 2
    float32_llm.py --gguf M.gguf --device cuda bits

`speed` prints `{"tests": [{"test": "pp128", "tokens": 128, "seconds": [...]}, ...]}`; `bits`
prints the sha256 of the logits of a fixed prompt computed four ways (one prefill pass; token by
token; as row 0 of a batch of 8 different prompts; alone as a batch of 1) for the caller to
compare across thread counts and devices. --threads sets PyTorch's intra-op threads.
"""
import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np


def import_gguf():
    """The `gguf` package, or the copy inside the llama.cpp source named by LLAMA_GGUF_PY."""
    try:
        import gguf  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.environ["LLAMA_GGUF_PY"])
    from gguf import GGUFReader
    from gguf.quants import dequantize
    return GGUFReader, dequantize


class TorchBackend:

    def __init__(self, device):
        import torch

        self.torch = torch
        self.exp, self.stack, self.cat = torch.exp, torch.stack, torch.cat
        self.device = device
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    def array(self, values):
        return self.torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).to(self.device)

    def softmax(self, x):
        return self.torch.softmax(x, -1)

    def repeat_heads(self, x, group):
        return x.repeat_interleave(group, dim=1)

    def to_numpy(self, x):
        return x.cpu().numpy()

    def sync(self):
        if self.device != "cpu":
            self.torch.cuda.synchronize()


class Float32Llama:
    def __init__(self, path, backend):
        GGUFReader, dequantize = import_gguf()
        reader = GGUFReader(path)

        def scalar(key):
            field = reader.fields[key]
            return field.parts[field.data[0]][0]

        self.b = backend
        self.layers = int(scalar("llama.block_count"))
        self.heads = int(scalar("llama.attention.head_count"))
        self.kv_heads = int(scalar("llama.attention.head_count_kv"))
        self.dim = int(scalar("llama.embedding_length"))
        self.eps = float(scalar("llama.attention.layer_norm_rms_epsilon"))
        self.base = float(scalar("llama.rope.freq_base"))
        self.head_dim = self.dim // self.heads
        self.w = {}
        for t in reader.tensors:
            values = dequantize(t.data, t.tensor_type).astype(np.float32)
            self.w[t.name] = values.reshape(-1, int(t.shape[0]))
        self.vocab = self.w["token_embd.weight"].shape[0]
        self.embedding_rows = self.w["token_embd.weight"]  # gathered on the host
        self.w = {name: backend.array(v) for name, v in self.w.items()}
        self.output = self.w.get("output.weight", self.w["token_embd.weight"])

    def rotary(self, positions):
        """cos, sin [S, 1, D/2] for angle = pos * base^(-2i/D) (float64, rounded once)."""
        d = self.head_dim
        inv_freq = self.base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        angle = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
        return self.b.array(np.cos(angle)[:, None, :]), self.b.array(np.sin(angle)[:, None, :])

    def norm(self, x, name):
        w = self.w[name][0]
        return x / ((x * x).mean(-1)[..., None] + self.eps) ** 0.5 * w

    def rotate(self, x, cos, sin):
        # x [B, S, H, D]; pairs (2i, 2i+1).
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return self.b.stack([cos * x1 - sin * x2, sin * x1 + cos * x2], -1).reshape(x.shape)

    def new_cache(self):
        return [None] * (2 * self.layers)

    def forward(self, ids, cache, last_only=False):
        """Logits [B, S, vocab] of token ids [B, S] after the cached positions ([B, 1, vocab]:
        the last position's, with `last_only`)."""
        ids = np.asarray(ids)
        batch, s = ids.shape
        past = 0 if cache[0] is None else cache[0].shape[2]
        cos, sin = self.rotary(range(past, past + s))
        allowed = np.arange(past + s)[None, :] <= (past + np.arange(s))[:, None]
        mask = self.b.array(np.where(allowed, 0.0, -np.inf))
        x = self.b.array(self.embedding_rows[ids])
        group = self.heads // self.kv_heads
        scale = 1.0 / float(np.sqrt(self.head_dim))
        for layer in range(self.layers):
            w = lambda n: self.w[f"blk.{layer}.{n}.weight"]  # noqa: E731
            h = self.norm(x, f"blk.{layer}.attn_norm.weight")
            q = self.rotate((h @ w("attn_q").T).reshape(batch, s, self.heads, self.head_dim), cos, sin)
            k = self.rotate((h @ w("attn_k").T).reshape(batch, s, self.kv_heads, self.head_dim), cos, sin)
            v = (h @ w("attn_v").T).reshape(batch, s, self.kv_heads, self.head_dim)
            k, v = k.swapaxes(1, 2), v.swapaxes(1, 2)
            if cache[2 * layer] is not None:
                k = self.b.cat((cache[2 * layer], k), 2)
                v = self.b.cat((cache[2 * layer + 1], v), 2)
            cache[2 * layer], cache[2 * layer + 1] = k, v
            scores = q.swapaxes(1, 2) @ self.b.repeat_heads(k, group).swapaxes(-1, -2) * scale + mask
            attended = self.b.softmax(scores) @ self.b.repeat_heads(v, group)
            x = x + attended.swapaxes(1, 2).reshape(batch, s, self.dim) @ w("attn_output").T
            h = self.norm(x, f"blk.{layer}.ffn_norm.weight")
            gate = h @ w("ffn_gate").T
            silu = gate / (1.0 + self.b.exp(-gate))
            x = x + (silu * (h @ w("ffn_up").T)) @ w("ffn_down").T
        if last_only:
            x = x[:, -1:]
        return self.norm(x, "output_norm.weight") @ self.output.T


def fixed_tokens(n, vocab, seed=0x5EED):
    """The token ids of samebits bench: Knuth's MMIX linear congruential sequence, mod vocab."""
    state, out = seed, []
    for _ in range(n):
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append((state >> 33) % vocab)
    return out


def speed(model, args):
    b = model.b
    tokens = np.asarray(fixed_tokens(max(args.prompt_tokens + [args.gen_tokens]), model.vocab))
    tests = [("pp", n) for n in args.prompt_tokens] + ([("tg", args.gen_tokens)] if args.gen_tokens else [])
    results = []
    for kind, n in tests:
        seconds = []
        for run in range(args.warmup + args.runs):
            cache = model.new_cache()
            b.sync()
            start = time.perf_counter()
            if kind == "pp":
                model.forward(tokens[None, :n], cache, last_only=True)
            else:
                for i in range(n):
                    model.forward(tokens[None, i:i + 1], cache)
            b.sync()
            if run >= args.warmup:
                seconds.append(time.perf_counter() - start)
        results.append({"test": f"{kind}{n}", "tokens": n, "seconds": seconds})
    return {"tests": results}


def sha(logits):
    return hashlib.sha256(np.ascontiguousarray(logits, dtype=np.float32).tobytes()).hexdigest()


def bits(model, args):
    n = args.bits_tokens
    prompts = np.asarray([fixed_tokens(n, model.vocab, seed=0x5EED + row) for row in range(8)])
    to_np = model.b.to_numpy
    one_pass = to_np(model.forward(prompts[:1], model.new_cache()))[0]
    cache = model.new_cache()
    stepwise = np.concatenate([to_np(model.forward(prompts[:1, i:i + 1], cache))[0] for i in range(n)])
    batch8 = to_np(model.forward(prompts, model.new_cache()))[0]
    return {"tokens": n, "prefill": sha(one_pass), "decode": sha(stepwise), "batch1": sha(one_pass),
            "batch8": sha(batch8),
            "max_abs_diff": {"prefill_vs_decode": float(np.abs(one_pass - stepwise).max()),
                             "batch1_vs_batch8": float(np.abs(one_pass - batch8).max())}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int)
    sub = ap.add_subparsers(dest="command", required=True)
    sp = sub.add_parser("speed")
    sp.add_argument("--prompt-tokens", type=lambda s: [int(v) for v in s.split(",")], default=[128, 512])
    sp.add_argument("--gen-tokens", type=int, default=128)
    sp.add_argument("--runs", type=int, default=3)
    sp.add_argument("--warmup", type=int, default=1)
    bp = sub.add_parser("bits")
    bp.add_argument("--bits-tokens", type=int, default=32)
    args = ap.parse_args()
    backend = TorchBackend(args.device)
    if args.threads:
        backend.torch.set_num_threads(args.threads)
    model = Float32Llama(args.gguf, backend)
    with backend.torch.inference_mode():
        result = speed(model, args) if args.command == "speed" else bits(model, args)
    result.update({"torch": backend.torch.__version__, "device": args.device, "threads": args.threads})
    print(json.dumps(result))


if __name__ == "__main__":
    main()
