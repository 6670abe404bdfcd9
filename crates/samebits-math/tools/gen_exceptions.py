#!/usr/bin/env python3
"""Generates the exception tables of csrc/sb_math.h from the hard cases of each function.

Input: tools/hard_cases/<name>.txt, written by
    cargo run --release -p samebits-math --example hard_cases -- <name>...
with one line `<input bits> <fallback bits>` (hex) for every binary32 input whose binary64
approximation fails the rounding test, and the float the code returns when it finds no entry.
For each such input this script computes f(x) rounded to nearest even binary32 with mpmath (at
160 and at 320 bits, which must agree) and keeps the inputs where the fallback is wrong.
Output: the block between the GENERATED EXCEPTIONS markers of csrc/sb_math.h.
A function without a hard-case file gets an empty table (only the sentinel).
"""
import os
import struct
import sys

import mpmath as mp

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(HERE, "..", "csrc", "sb_math.h")
HARD = os.path.join(HERE, "hard_cases")
BEGIN = "/* ==== BEGIN GENERATED EXCEPTIONS (tools/gen_exceptions.py) ==== */"
END = "/* ==== END GENERATED EXCEPTIONS ==== */"

FUNCS = {
    "exp": mp.exp,
    "exp2": lambda x: mp.power(2, x),
    "exp10": lambda x: mp.power(10, x),
    "expm1": mp.expm1,
    "log": mp.log,
    "log2": lambda x: mp.log(x, 2),
    "log10": lambda x: mp.log(x, 10),
    "log1p": mp.log1p,
    "sin": mp.sin,
    "cos": mp.cos,
    "tan": mp.tan,
    "asin": mp.asin,
    "acos": mp.acos,
    "atan": mp.atan,
    "sinh": mp.sinh,
    "cosh": mp.cosh,
    "tanh": mp.tanh,
    "asinh": mp.asinh,
    "acosh": mp.acosh,
    "atanh": mp.atanh,
    "erf": mp.erf,
    "erfc": mp.erfc,
    "cbrt": mp.cbrt,
}


def f32_from_bits(b):
    return struct.unpack("<f", struct.pack("<I", b))[0]


def round_to_f32_bits(v):
    """Bits of the binary32 nearest to the real v (ties to even), with subnormals and overflow."""
    if v == 0:
        return 0
    sign = 0x80000000 if v < 0 else 0
    a = abs(v)
    _, e = mp.frexp(a)  # a = m 2^e, m in [1/2, 1)
    e2 = max(int(e) - 1, -126)
    q = a / mp.mpf(2) ** (e2 - 23)
    n = int(mp.floor(q))
    frac = q - n
    if frac > 0.5 or (frac == 0.5 and n % 2 == 1):
        n += 1
    if n == 1 << 24:
        n, e2 = 1 << 23, e2 + 1
    if e2 > 127:
        return sign | 0x7F800000
    if n < (1 << 23):
        return sign | n
    return sign | ((e2 + 127) << 23) | (n - (1 << 23))


def correctly_rounded(f, xbits):
    x = mp.mpf(f32_from_bits(xbits))
    results = []
    for prec in (160, 320):
        with mp.workprec(prec):
            results.append(round_to_f32_bits(f(x)))
    if results[0] != results[1]:
        sys.exit(f"precision not enough for input 0x{xbits:08x}")
    return results[0]


def main():
    out = []
    for name, f in FUNCS.items():
        path = os.path.join(HARD, f"{name}.txt")
        entries = []
        hard = 0
        if os.path.exists(path):
            for line in open(path):
                xs, fs = line.split()
                hard += 1
                xb, fb = int(xs, 16), int(fs, 16)
                cr = correctly_rounded(f, xb)
                if cr != fb:
                    entries.append((xb, cr))
        entries.sort()
        print(f"{name}: {hard} hard cases, {len(entries)} exceptions", file=sys.stderr)
        out.append(f"/* {name}: {hard} inputs fail the rounding test, {len(entries)} need an entry */")
        out.append(f"SB_CONST sb_u32 sb_{name}_exceptions[][2] = {{")
        for xb, rb in entries:
            out.append(f"    {{0x{xb:08x}u, 0x{rb:08x}u}},")
        out.append("    {0xffffffffu, 0u}, /* sentinel */")
        out.append("};")
    text = open(HEADER).read()
    i, j = text.index(BEGIN), text.index(END)
    open(HEADER, "w").write(text[:i] + BEGIN + "\n" + "\n".join(out) + "\n" + text[j:])


if __name__ == "__main__":
    main()
