#!/usr/bin/env python3
"""Float64 reference logits for the tiny random Llama-layout checkpoints of
tests/hf_checkpoint.rs, computed the way Hugging Face `transformers` defines the model
(LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM: RMSNorm (Qwen3 also over each head's
query and key features, before the rotary embedding), rotate_half rotary embedding on the
*unpermuted* Q/K rows, grouped-query causal attention, SiLU-gated MLP), independently of
samebits. Needs only numpy.

The weights are not stored: both sides generate them from the same rule, so the fixture holds
only logits. Tensor number `n` (in the order of `tensor_names`) is filled, element after element
in row-major order, from the SplitMix64 stream seeded with `n + 1` (state += 0x9E3779B97F4A7C15,
then the usual mix), each 64-bit output `z` giving `k = z >> 56` (0..255):
  matrices and biases: (k - 128) / 128 * scale (scale: embeddings 1, others 1/4),
  norm scales: 0.5 + (k >> 1) / 256.
All of these are exact in f32, f16 and bf16, so the BF16 variant holds the same values.

Usage: python3 tools/reference_tiny_llama.py > tests/fixtures/tiny_llama_logits.json
"""
import json
import sys

import numpy as np

MASK = (1 << 64) - 1

VARIANTS = {
    # untied Llama, no biases
    "llama": dict(model_type="llama", vocab=48, hidden=32, heads=4, kv_heads=2, inter=40,
                  layers=2, eps=1e-5, theta=10000.0, tie=False, qkv_bias=False),
    # Qwen2: Q/K/V biases, tied embeddings, another rope base
    "qwen2": dict(model_type="qwen2", vocab=48, hidden=32, heads=4, kv_heads=1, inter=40,
                  layers=2, eps=1e-6, theta=500000.0, tie=True, qkv_bias=True),
    # Llama 3.1 rope scaling (rope_type llama3): one pair of each kind (kept, smoothed, divided)
    "llama3": dict(model_type="llama", vocab=48, hidden=32, heads=2, kv_heads=1, inter=40,
                   layers=2, eps=1e-5, theta=10000.0, tie=True, qkv_bias=False,
                   rope_scaling=dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                     original_max_position_embeddings=64)),
    # Phi-3: Q, K, V fused into qkv_proj, gate and up into gate_up_proj (the same model)
    "phi3": dict(model_type="phi3", vocab=48, hidden=32, heads=4, kv_heads=2, inter=40,
                 layers=2, eps=1e-5, theta=10000.0, tie=False, qkv_bias=False, fused=True),
    # Gemma 3: embeddings times sqrt(hidden), RMSNorm scales 1 + w, sandwich norms, a GELU (tanh)
    # gate, per-head Q / K norms, five local layers (rotary base 10000) then a global one (base
    # 1e6, linear rope scaling), a sliding window longer than the tokens
    "gemma3": dict(model_type="gemma3_text", vocab=48, hidden=32, heads=2, kv_heads=1, inter=40,
                   layers=6, eps=1e-6, theta=1000000.0, tie=True, qkv_bias=False, head_dim=16,
                   qk_norm=True, gemma=True, local_base=10000.0, pattern=6, linear_factor=8.0),
    # Gemma 2: Gemma 3's parts without head norms, local and global layers alternating with one
    # rotary base, attention scores and logits soft-capped (small caps, so that they act)
    "gemma2": dict(model_type="gemma2", vocab=48, hidden=32, heads=2, kv_heads=1, inter=40,
                   layers=4, eps=1e-6, theta=10000.0, tie=True, qkv_bias=False, head_dim=16,
                   gemma=True, local_base=10000.0, pattern=2, attn_softcap=5.0,
                   final_softcap=3.0),
    # Qwen3: per-head Q / K RMSNorm, a head size other than hidden / heads, no biases
    "qwen3": dict(model_type="qwen3", vocab=48, hidden=32, heads=4, kv_heads=2, inter=40,
                  layers=2, eps=1e-6, theta=1000000.0, tie=True, qkv_bias=False, head_dim=16,
                  qk_norm=True),
}
TOKENS = [3, 17, 42, 8, 8, 30, 1]


def stream(seed):
    state = seed
    while True:
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        yield (z ^ (z >> 31)) >> 56


def tensor_names(v):
    """(name, shape, kind) in generation order; kind is 'matrix', 'embedding' or 'norm'."""
    h, d = v["hidden"], head_dim(v)
    q, kv = v["heads"] * d, v["kv_heads"] * d
    names = [("model.embed_tokens.weight", (v["vocab"], h), "embedding")]
    for i in range(v["layers"]):
        p = f"model.layers.{i}."
        names.append((p + "input_layernorm.weight", (h,), "norm"))
        if v.get("fused"):
            names.append((p + "self_attn.qkv_proj.weight", (q + 2 * kv, h), "matrix"))
        else:
            names += [
                (p + "self_attn.q_proj.weight", (q, h), "matrix"),
                (p + "self_attn.k_proj.weight", (kv, h), "matrix"),
                (p + "self_attn.v_proj.weight", (kv, h), "matrix"),
            ]
        if v["qkv_bias"]:
            names += [
                (p + "self_attn.q_proj.bias", (q,), "matrix"),
                (p + "self_attn.k_proj.bias", (kv,), "matrix"),
                (p + "self_attn.v_proj.bias", (kv,), "matrix"),
            ]
        if v.get("qk_norm"):
            names += [
                (p + "self_attn.q_norm.weight", (d,), "norm"),
                (p + "self_attn.k_norm.weight", (d,), "norm"),
            ]
        names += [
            (p + "self_attn.o_proj.weight", (h, q), "matrix"),
            (p + "post_attention_layernorm.weight", (h,), "norm"),
        ]
        if v.get("gemma"):
            names += [
                (p + "pre_feedforward_layernorm.weight", (h,), "norm"),
                (p + "post_feedforward_layernorm.weight", (h,), "norm"),
            ]
        if v.get("fused"):
            names.append((p + "mlp.gate_up_proj.weight", (2 * v["inter"], h), "matrix"))
        else:
            names += [
                (p + "mlp.gate_proj.weight", (v["inter"], h), "matrix"),
                (p + "mlp.up_proj.weight", (v["inter"], h), "matrix"),
            ]
        names.append((p + "mlp.down_proj.weight", (h, v["inter"]), "matrix"))
    names.append(("model.norm.weight", (h,), "norm"))
    if not v["tie"]:
        names.append(("lm_head.weight", (v["vocab"], h), "matrix"))
    return names


def head_dim(v):
    return v.get("head_dim", v["hidden"] // v["heads"])


def weights(v):
    out = {}
    for n, (name, shape, kind) in enumerate(tensor_names(v)):
        gen = stream(n + 1)
        k = np.array([next(gen) for _ in range(int(np.prod(shape)))], dtype=np.float64)
        if kind == "norm":
            values = 0.5 + np.floor(k / 2) / 256
        else:
            values = (k - 128) / 128 * (1.0 if kind == "embedding" else 0.25)
        out[name] = values.reshape(shape)
    return out


def rms_norm(x, w, eps, gemma=False):
    """RMSNorm; Gemma's multiplies by 1 + w."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (1 + w if gemma else w)


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def llama3_inv_freq(inv_freq, scaling):
    """transformers' `_compute_llama3_parameters`, in float64."""
    factor, old = scaling["factor"], scaling["original_max_position_embeddings"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    wavelen = 2 * np.pi / inv_freq
    scaled = np.where(wavelen > old / low, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old / high) & ~(wavelen > old / low)
    return np.where(medium, smoothed, scaled)


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def rotary(v, d, s, base, scaling=None, linear_factor=None):
    """cos, sin [s, 1, d] of rotate_half rotary embedding with `base`."""
    inv_freq = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    if scaling:
        inv_freq = llama3_inv_freq(inv_freq, scaling)
    if linear_factor:
        inv_freq = inv_freq / linear_factor
    freqs = np.outer(np.arange(s, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]


def forward(v, w, tokens):
    h, heads, kvh = v["hidden"], v["heads"], v["kv_heads"]
    d = head_dim(v)
    s = len(tokens)
    gemma = v.get("gemma", False)
    x = w["model.embed_tokens.weight"][tokens]
    if gemma:
        x = x * np.sqrt(h)
    tables = rotary(v, d, s, v["theta"], v.get("rope_scaling"), v.get("linear_factor"))
    if gemma:
        local_tables = rotary(v, d, s, v["local_base"])
    causal = np.triu(np.full((s, s), -np.inf), k=1)

    def norm(t, name):
        return rms_norm(t, w[name], v["eps"], gemma)

    for i in range(v["layers"]):
        p = f"model.layers.{i}."
        a = norm(x, p + "input_layernorm.weight")
        proj = {}
        if v.get("fused"):
            qkv = a @ w[p + "self_attn.qkv_proj.weight"].T
            nq, nkv = heads * d, kvh * d
            proj = dict(q=qkv[:, :nq], k=qkv[:, nq:nq + nkv], v=qkv[:, nq + nkv:])
        for n in "qkv" if not v.get("fused") else "":
            y = a @ w[p + f"self_attn.{n}_proj.weight"].T
            if v["qkv_bias"]:
                y = y + w[p + f"self_attn.{n}_proj.bias"]
            proj[n] = y
        q = proj["q"].reshape(s, heads, d)
        k = proj["k"].reshape(s, kvh, d)
        val = proj["v"].reshape(s, kvh, d)
        if v.get("qk_norm"):
            q = norm(q, p + "self_attn.q_norm.weight")
            k = norm(k, p + "self_attn.k_norm.weight")
        local = gemma and (i + 1) % v["pattern"] != 0
        cos, sin = local_tables if local else tables
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        group = heads // kvh
        out = np.zeros((s, heads, d))
        for hh in range(heads):
            scores = q[:, hh, :] @ k[:, hh // group, :].T / np.sqrt(d)
            if v.get("attn_softcap"):
                scores = np.tanh(scores / v["attn_softcap"]) * v["attn_softcap"]
            scores = scores + causal
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs = scores / scores.sum(axis=-1, keepdims=True)
            out[:, hh, :] = probs @ val[:, hh // group, :]
        o = out.reshape(s, heads * d) @ w[p + "self_attn.o_proj.weight"].T
        if gemma:
            o = norm(o, p + "post_attention_layernorm.weight")
            m = norm(x + o, p + "pre_feedforward_layernorm.weight")
        else:
            m = norm(x + o, p + "post_attention_layernorm.weight")
        x = x + o
        if v.get("fused"):
            gate, up = np.split(m @ w[p + "mlp.gate_up_proj.weight"].T, 2, axis=-1)
        else:
            gate = m @ w[p + "mlp.gate_proj.weight"].T
            up = m @ w[p + "mlp.up_proj.weight"].T
        act = gelu_tanh(gate) if gemma else gate / (1 + np.exp(-gate))
        down = (act * up) @ w[p + "mlp.down_proj.weight"].T
        if gemma:
            down = norm(down, p + "post_feedforward_layernorm.weight")
        x = x + down
    x = norm(x, "model.norm.weight")
    head = w["model.embed_tokens.weight"] if v["tie"] else w["lm_head.weight"]
    logits = x @ head.T
    if v.get("final_softcap"):
        logits = np.tanh(logits / v["final_softcap"]) * v["final_softcap"]
    return logits


def main():
    result = {"tokens": TOKENS, "variants": {}}
    for name, v in VARIANTS.items():
        logits = forward(v, weights(v), TOKENS)
        result["variants"][name] = [[float(f"{x:.12g}") for x in row] for row in logits]
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
