"""Reference dequantizations from the `gguf` Python package (pip install gguf; printed with
0.19.0), for tests/dequantize.rs (`the_gguf_package_dequantizes_the_same_values`): for each
quantized type, random blocks (f16 scales made finite) and `gguf.quants.dequantize`'s float32
values as bit patterns.

Usage: python3 tools/reference_gguf_dequantize.py > tests/fixtures/gguf_package_dequantize.json
"""
import json
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

# Byte offsets of each type's f16 scales inside a block.
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.IQ4_NL: [0], T.IQ4_XS: [0],
}

rng = np.random.default_rng(7)
out = {}
for qtype, fields in F16_FIELDS.items():
    _, block_bytes = GGML_QUANT_SIZES[qtype]
    data = rng.integers(0, 256, size=(4, block_bytes), dtype=np.uint8)
    for at in fields:
        data[:, at + 1] &= 0xBB  # exponent below all-ones: a finite f16
    values = dequantize(data.reshape(-1), qtype).astype(np.float32).reshape(-1)
    out[qtype.name] = {
        "blocks": data.reshape(-1).tobytes().hex(),
        "bits": [int(v) for v in values.view(np.uint32)],
    }
json.dump(out, sys.stdout)
sys.stdout.write("\n")
