#!/usr/bin/env python3
"""Float64 reference sentence embeddings for a BERT sentence-transformers folder
(all-MiniLM-L6-v2), independent of samebits: the safetensors file is parsed by hand, the text
tokenized by the Hugging Face `tokenizers` package (tokenizer.json, its truncation and padding
switched off, truncated at sentence_bert_config.json's max_seq_length), and the encoder computed
in numpy float64 as `transformers`' BertModel defines it (embeddings sum + LayerNorm, post-LN
layers, exact erf GELU, attention softmax(q k^T / sqrt(d))), then sentence-transformers' mean
pooling over the tokens and, when modules.json lists Normalize, L2 normalisation. Each text is
run alone (no padding). Needs numpy and tokenizers.

Usage: python3 tools/reference_embed.py MODEL_DIR > tests/fixtures/minilm_embeddings.json
"""
import json
import math
import struct
import sys
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

TEXTS = [
    "The cat sits on the mat.",
    "A kitten is resting on a rug.",
    "The stock market fell sharply today.",
    "Investors lost money as shares dropped.",
    "Héllo wörld! naïve café, 12345 😀",
]

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None}


def load_safetensors(path):
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] not in ("F32", "F16"):
            continue
        begin, end = info["data_offsets"]
        raw = np.frombuffer(data[8 + n + begin : 8 + n + end], dtype=DTYPES[info["dtype"]])
        tensors[name] = raw.astype(np.float64).reshape(info["shape"])
    return tensors


def erf(x):
    return np.vectorize(math.erf)(x)


def layer_norm(x, w, b, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def encode(w, config, ids):
    prefix = "" if "embeddings.word_embeddings.weight" in w else "bert."
    t = lambda name: w[prefix + name]
    s = len(ids)
    eps = config["layer_norm_eps"]
    x = t("embeddings.word_embeddings.weight")[ids] + t("embeddings.token_type_embeddings.weight")[0]
    x = x + t("embeddings.position_embeddings.weight")[:s]
    x = layer_norm(x, t("embeddings.LayerNorm.weight"), t("embeddings.LayerNorm.bias"), eps)
    heads = config["num_attention_heads"]
    d = config["hidden_size"] // heads
    lin = lambda x, name: x @ t(name + ".weight").T + t(name + ".bias")
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q = lin(x, p + "attention.self.query").reshape(s, heads, d).transpose(1, 0, 2)
        k = lin(x, p + "attention.self.key").reshape(s, heads, d).transpose(1, 0, 2)
        v = lin(x, p + "attention.self.value").reshape(s, heads, d).transpose(1, 0, 2)
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs = scores / scores.sum(axis=-1, keepdims=True)
        ctx = (probs @ v).transpose(1, 0, 2).reshape(s, heads * d)
        x = layer_norm(lin(ctx, p + "attention.output.dense") + x,
                       t(p + "attention.output.LayerNorm.weight"),
                       t(p + "attention.output.LayerNorm.bias"), eps)
        h = lin(x, p + "intermediate.dense")
        h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
        x = layer_norm(lin(h, p + "output.dense") + x,
                       t(p + "output.LayerNorm.weight"), t(p + "output.LayerNorm.bias"), eps)
    return x


def main():
    model = Path(sys.argv[1])
    config = json.loads((model / "config.json").read_text())
    weights = load_safetensors(model / "model.safetensors")
    modules = json.loads((model / "modules.json").read_text())
    normalize = any(m["type"].endswith(".Normalize") for m in modules)
    max_len = json.loads((model / "sentence_bert_config.json").read_text())["max_seq_length"]
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_len)
    cases = []
    for text in TEXTS:
        ids = tok.encode(text).ids
        states = encode(weights, config, ids)
        e = states.mean(axis=0)
        if normalize:
            e = e / max(np.linalg.norm(e), 1e-12)
        cases.append({"text": text, "ids": ids, "embedding": [float(f"{x:.10g}") for x in e]})
    json.dump({"model": "all-MiniLM-L6-v2", "normalize": normalize, "cases": cases}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
