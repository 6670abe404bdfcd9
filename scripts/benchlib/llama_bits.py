#!/usr/bin/env python3
"""Reproducibility probes of llama.cpp (the peer of scripts/bench.py), through the ctypes
bindings of the same llama-cpp-python sdist whose vendored llama.cpp was built: its `llama_cpp`
package directory goes on sys.path and LLAMA_CPP_LIB_PATH names the built libllama.

For a fixed prompt (the token ids of `samebits bench`, from float32_llm.fixed_tokens) it prints
the sha256 of the logits of every prompt position computed four ways: one decode call over the
whole prompt ("prefill"), one call per token ("decode"), alone ("batch1", the same as prefill)
and as sequence 0 of 8 different prompts decoded in one call ("batch8"), with --threads
threads and --gpu-layers layers offloaded. The caller compares hashes across runs (1 vs 2
threads, CPU vs GPU).

    LLAMA_CPP_LIB_PATH=BUILD/bin llama_bits.py --bindings SDIST_DIR --gguf M.gguf --threads 2
"""
import argparse
import ctypes
import hashlib
import importlib
import json
import os
import sys
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from float32_llm import fixed_tokens  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bindings", required=True, help="the unpacked llama-cpp-python sdist")
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--gpu-layers", type=int, default=0)
    ap.add_argument("--tokens", type=int, default=32)
    args = ap.parse_args()
    # Only the ctypes layer: the package's __init__ also imports the high-level API and its
    # dependencies (diskcache, jinja2), which the probes do not need.
    package = types.ModuleType("llama_cpp")
    package.__path__ = [os.path.join(args.bindings, "llama_cpp")]
    sys.modules["llama_cpp"] = package
    L = importlib.import_module("llama_cpp.llama_cpp")

    quiet = L.llama_log_callback(lambda level, text, data: None)  # kept alive while llama.cpp holds it
    if not os.environ.get("LLAMA_BITS_VERBOSE"):
        L.llama_log_set(quiet, ctypes.c_void_p())
    L.llama_backend_init()
    mparams = L.llama_model_default_params()
    mparams.n_gpu_layers = args.gpu_layers
    model = L.llama_model_load_from_file(args.gguf.encode(), mparams)
    if not model:
        raise SystemExit(f"llama_bits.py: llama.cpp cannot load {args.gguf}")
    vocab_size = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
    n = args.tokens
    prompts = [fixed_tokens(n, vocab_size, seed=0x5EED + row) for row in range(8)]

    def run(sequences, per_token):
        """Logits [n, vocab] of sequence 0's positions."""
        total = n * len(sequences)
        cparams = L.llama_context_default_params()
        cparams.n_ctx = max(total, 256)
        cparams.n_batch = cparams.n_ubatch = max(total, 1)
        cparams.n_seq_max = len(sequences)
        cparams.n_threads = cparams.n_threads_batch = args.threads
        # With no layers offloaded, keep every op on the CPU (a CUDA build would otherwise send
        # large batches' matrix products to the GPU).
        cparams.op_offload = cparams.offload_kqv = args.gpu_layers > 0
        ctx = L.llama_init_from_model(model, cparams)
        rows = []
        steps = [[(s, i) for s in range(len(sequences))] for i in range(n)] if per_token else \
            [[(s, i) for s in range(len(sequences)) for i in range(n)]]
        for step in steps:
            batch = L.llama_batch_init(len(step), 0, 1)
            for j, (s, i) in enumerate(step):
                batch.token[j] = sequences[s][i]
                batch.pos[j] = i
                batch.n_seq_id[j] = 1
                batch.seq_id[j][0] = s
                batch.logits[j] = 1
            batch.n_tokens = len(step)
            if L.llama_decode(ctx, batch) != 0:
                raise SystemExit("llama_bits.py: llama_decode failed")
            for j, (s, _) in enumerate(step):
                if s == 0:
                    rows.append(np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, j), shape=(vocab_size,)).copy())
            L.llama_batch_free(batch)
        L.llama_free(ctx)
        return np.stack(rows)

    one_pass = run(prompts[:1], per_token=False)
    stepwise = run(prompts[:1], per_token=True)
    batch8 = run(prompts, per_token=False)
    L.llama_model_free(model)
    sha = lambda a: hashlib.sha256(a.astype(np.float32).tobytes()).hexdigest()  # noqa: E731
    print(json.dumps({
        "tokens": n, "threads": args.threads, "gpu_layers": args.gpu_layers,
        "prefill": sha(one_pass), "decode": sha(stepwise), "batch1": sha(one_pass), "batch8": sha(batch8),
        "max_abs_diff": {"prefill_vs_decode": float(np.abs(one_pass - stepwise).max()),
                         "batch1_vs_batch8": float(np.abs(one_pass - batch8).max())},
    }))


if __name__ == "__main__":
    main()
