#!/usr/bin/env python3
"""Generates the constant tables and polynomial coefficients of csrc/sb_math.h.

Everything is computed here with mpmath at 256 bits and rounded once to binary64.
Polynomials are Chebyshev fits (mpmath.chebyfit, close to minimax) of the smooth part of
each function; the script prints the measured maximum relative error of every rounded
polynomial (sampled densely) so the error budgets in docs/math.md can be checked.

The output replaces the block between the GENERATED TABLES markers in csrc/sb_math.h.
Run: python3 tools/gen_tables.py   (from crates/samebits-math; needs `pip install mpmath`)
"""
import os
import sys

import mpmath as mp

mp.mp.prec = 256
HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(HERE, "..", "csrc", "sb_math.h")
BEGIN = "/* ==== BEGIN GENERATED TABLES (tools/gen_tables.py) ==== */"
END = "/* ==== END GENERATED TABLES ==== */"

out = []


def d(v):
    """binary64 literal (round to nearest) of an mpf."""
    return float(v).hex()


def rnd_bits(v, bits):
    """v rounded to `bits` significant bits (as mpf)."""
    e = mp.floor(mp.log(abs(v), 2))
    scale = mp.mpf(2) ** (bits - 1 - e)
    return mp.nint(v * scale) / scale


def emit_array(name, values, per_line=2):
    out.append(f"SB_CONST double {name}[{len(values)}] = {{")
    for i in range(0, len(values), per_line):
        out.append("    " + ", ".join(d(v) for v in values[i:i + per_line]) + ",")
    out.append("};")


def emit_const(name, v):
    out.append(f"#define {name} {d(v)}")


def fit(f, a, b, degree, rel_to=None, name=""):
    """Chebyshev fit of f on [a,b]; returns coefficients lowest degree first (as doubles)
    and prints the sampled max error of the double-rounded polynomial (relative to rel_to(x)
    when given, else absolute)."""
    coeffs, _ = mp.chebyfit(f, [a, b], degree + 1, error=True)
    coeffs = [mp.mpf(float(c)) for c in reversed(coeffs)]
    worst = mp.mpf(0)
    n = 400
    for k in range(n + 1):
        x = a + (b - a) * k / n
        p = mp.mpf(0)
        for c in reversed(coeffs):
            p = p * x + c
        err = abs(p - f(x))
        if rel_to is not None:
            err /= abs(rel_to(x))
        worst = max(worst, err)
    print(f"{name}: degree {degree} on [{float(a):.6g}, {float(b):.6g}] max err 2^{float(mp.log(worst, 2)) if worst else -999:.1f}",
          file=sys.stderr)
    return coeffs, worst


# ---- exp family: 2^(i/64) as double-double, q(h) = 2^(h/64) - 1 -------------------------
emit_array("sb_exp2_64_dd", [v for i in range(64) for v in (mp.mpf(2) ** (mp.mpf(i) / 64),
           mp.mpf(2) ** (mp.mpf(i) / 64) - mp.mpf(float(mp.mpf(2) ** (mp.mpf(i) / 64))))])
H = mp.mpf("0.5") + mp.mpf(2) ** -12
cexp, _ = fit(lambda h: (mp.mpf(2) ** (h / 64) - 1) / h if h else mp.log(2) / 64, -H, H, 4,
              rel_to=lambda h: 1, name="exp q(h)/h")
emit_array("sb_exp_q_coef", cexp, 3)
emit_const("SB_INV_LN2_64_HI", rnd_bits(64 / mp.log(2), 29))
emit_const("SB_INV_LN2_64_LO", 64 / mp.log(2) - rnd_bits(64 / mp.log(2), 29))
emit_const("SB_INV_LN2_64", 64 / mp.log(2))
emit_const("SB_LOG2_10_64_HI", rnd_bits(64 * mp.log(10, 2), 29))
emit_const("SB_LOG2_10_64_LO", 64 * mp.log(10, 2) - rnd_bits(64 * mp.log(10, 2), 29))
emit_const("SB_LN2_64_HI", rnd_bits(mp.log(2) / 64, 38))
emit_const("SB_LN2_64_LO", mp.log(2) / 64 - rnd_bits(mp.log(2) / 64, 38))

# ---- log family: reciprocal table with 256 entries, log1p(z) = z + z^2 P(z) ---------------
vals = []
for i in range(256):
    if i == 0:
        r, L = mp.mpf(1), mp.mpf(0)
    elif i == 255:
        r, L = mp.mpf("0.5"), mp.mpf(0)
    else:
        r = rnd_bits(1 / (1 + (mp.mpf(i) + mp.mpf("0.5")) / 256), 20)
        L = -mp.log(r) if i < 128 else -mp.log(2 * r)
    vals += [r, L, L - mp.mpf(float(L))]
out.append("/* {r_i, -log(r_i) hi, lo}; entries i >= 128 stand for m/2 (so -log(2 r_i)) */")
emit_array("sb_log_tab", vals, 3)
Z = mp.mpf(2) ** -8 + mp.mpf(2) ** -18
clog, _ = fit(lambda z: (mp.log1p(z) - z) / z ** 2 if z else mp.mpf(-0.5), -Z, Z, 6,
              rel_to=lambda z: 1, name="log1p (log1p(z)-z)/z^2")
emit_array("sb_log1p_p", clog, 3)
emit_const("SB_LN2_HI", rnd_bits(mp.log(2), 43))
emit_const("SB_LN2_LO", mp.log(2) - rnd_bits(mp.log(2), 43))
emit_const("SB_INV_LN2", 1 / mp.log(2))
emit_const("SB_INV_LN10", 1 / mp.log(10))

# ---- sin / cos on |r| <= pi/4 (+ margin): sin = r + r u S(u), cos = 1 + u C(u), u = r^2 ---
U = (mp.pi / 4 + mp.mpf(2) ** -10) ** 2
csin, _ = fit(lambda u: (mp.sin(mp.sqrt(u)) / mp.sqrt(u) - 1) / u if u else mp.mpf(-1) / 6, 0, U, 7,
              name="sin S(u)", rel_to=lambda u: 1)
emit_array("sb_sin_s", csin, 3)
ccos, _ = fit(lambda u: (mp.cos(mp.sqrt(u)) - 1) / u if u else mp.mpf(-0.5), 0, U, 8,
              name="cos C(u)", rel_to=lambda u: 1)
emit_array("sb_cos_c", ccos, 3)
pio2 = mp.pi / 2
p1 = rnd_bits(pio2, 36)
p2 = rnd_bits(pio2 - p1, 36)
p3 = pio2 - p1 - p2
emit_const("SB_PIO2_1", p1)
emit_const("SB_PIO2_2", p2)
emit_const("SB_PIO2_3", p3)
emit_const("SB_PIO2_HI", pio2)
emit_const("SB_PIO2_LO", pio2 - mp.mpf(float(pio2)))
emit_const("SB_TWO_OVER_PI", 2 / mp.pi)
# 2/pi in 32-bit words: word k holds the bits of weight 2^-(32k-31) .. 2^-(32k); word 0 is 0.
NW = 12
with mp.workprec(1024):
    big = int(mp.floor(2 / mp.pi * mp.mpf(2) ** (32 * (NW - 1))))
words = [(big >> (32 * (NW - 1 - k))) & 0xFFFFFFFF for k in range(NW)]
out.append(f"SB_CONST sb_u32 sb_two_over_pi_words[{NW}] = {{")
for i in range(0, NW, 6):
    out.append("    " + ", ".join(f"0x{w:08x}u" for w in words[i:i + 6]) + ",")
out.append("};")

# ---- atan: table atan(i/16), i = 0..16; atan(t) = t + t u A(u) for |t| <= 1/32 ----------
emit_array("sb_atan_tab", [v for i in range(17) for v in (mp.atan(mp.mpf(i) / 16),
           mp.atan(mp.mpf(i) / 16) - mp.mpf(float(mp.atan(mp.mpf(i) / 16))))])
T = (mp.mpf(1) / 32 + mp.mpf(2) ** -12) ** 2
catan, _ = fit(lambda u: (mp.atan(mp.sqrt(u)) / mp.sqrt(u) - 1) / u if u else mp.mpf(-1) / 3, 0, T, 5,
               name="atan A(u)", rel_to=lambda u: 1)
emit_array("sb_atan_a", catan, 3)

# ---- erf on [0, 1/2]: erf(x) = x E(u), u = x^2 ------------------------------------------
cerf, _ = fit(lambda u: mp.erf(mp.sqrt(u)) / mp.sqrt(u) if u else 2 / mp.sqrt(mp.pi), 0, mp.mpf("0.25"), 11,
              name="erf E(u)", rel_to=lambda u: 1)
emit_array("sb_erf_e", cerf, 3)

# ---- erfc on [1/2, 10.125]: erfc(x) = exp(-x^2) g(x), g piecewise on 1/4-wide intervals ----
ERFC_W = mp.mpf("0.25")
ERFC_N = 39  # intervals [0.5 + k/4, 0.75 + k/4), k < 39, up to 10.25
ERFC_DEG = 13
gvals = []
worst = mp.mpf(0)
for k in range(ERFC_N):
    a = mp.mpf("0.5") + k * ERFC_W
    c = a + ERFC_W / 2
    g = (lambda c: lambda t: mp.erfc(c + t) * mp.exp((c + t) ** 2))(c)
    coeffs, err = fit(g, -ERFC_W / 2, ERFC_W / 2, ERFC_DEG, rel_to=g, name=f"erfc g[{k}]")
    worst = max(worst, err)
    gvals += coeffs
out.append(f"#define SB_ERFC_DEG {ERFC_DEG}")
out.append("/* coefficients of g(c_k + t), lowest degree first, c_k = 0.625 + k/4 */")
emit_array("sb_erfc_g", gvals, 3)

# ---- cbrt seed on [1, 2) and 2^(1/3), 2^(2/3) --------------------------------------------
ccb, _ = fit(lambda m: mp.cbrt(m), 1, 2, 3, name="cbrt seed", rel_to=lambda m: 1)
emit_array("sb_cbrt_seed", ccb, 4)
emit_array("sb_cbrt_2k3", [mp.mpf(1), mp.cbrt(2), mp.cbrt(4)], 3)

# ---- pow accurate path: double-double constants -----------------------------------------
def emit_dd_array(name, values):
    emit_array(name, [v for c in values for v in (c, c - mp.mpf(float(c)))])


def triple(v, hi_bits):
    hi = rnd_bits(v, hi_bits)
    mid = mp.mpf(float(v - hi))
    return hi, mid, mp.mpf(float(v - hi - mid))


for name, v in (("SB_LN2_T", triple(mp.log(2), 43)), ("SB_LN2_64_T", triple(mp.log(2) / 64, 38))):
    emit_const(name + "0", v[0])
    emit_const(name + "1", v[1])
    emit_const(name + "2", v[2])
out.append("/* 1/k!, k = 0..10, as double-double (hi, lo) */")
emit_dd_array("sb_exp_taylor_dd", [1 / mp.factorial(k) for k in range(11)])
out.append("/* (-1)^(k+1)/k, k = 1..13, as double-double (hi, lo): log1p(z) = sum of c_k z^k */")
emit_dd_array("sb_log1p_taylor_dd", [mp.mpf((-1) ** (k + 1)) / k for k in range(1, 14)])

# ---- write --------------------------------------------------------------------------------
text = open(HEADER).read()
i, j = text.index(BEGIN), text.index(END)
text = text[:i] + BEGIN + "\n" + "\n".join(out) + "\n" + text[j:]
open(HEADER, "w").write(text)
print(f"wrote {len(out)} lines into {HEADER}", file=sys.stderr)
