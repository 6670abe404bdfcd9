#!/usr/bin/env bash
# Checks the warp-tiled GEMM kernels of ../kernels/gemm.cu without a GPU: compiles them as host
# C++ (shim.h: one OS thread per CUDA thread, std::barrier for __syncthreads, cp.async landing at
# issue or only at the wait that retires its group) and compares every configuration, with
# element-copied and 16-byte-copied B, bit for bit against a scalar canonical GEMM
# (harness.cpp). Needs g++ with C++20. Exit 0 when every run matches.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# The kernels' inline PTX (cp.async, the opaque zero) is replaced by the shims.
python3 - "$HERE/../kernels/gemm.cu" "$WORK/gemm_emu.inc" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
a = s.index('// Asynchronous global -> shared copies')
b = s.index('// Reads 4 consecutive')
s = s[:a] + s[b:]
s = re.sub(r'asm volatile\("mov\.b32 %0, 0;" : "=f"\((.*?)\)\);', r'\1 = 0.0f;', s)
s = s.replace('extern __shared__ __align__(16) float sb_gemm_smem[];', 'float* sb_gemm_smem = (float*)g_smem;')
s = s.replace('extern __shared__ __align__(16) unsigned char sb_gemv_smem[];', 'unsigned char* sb_gemv_smem = g_smem;')
assert 'asm' not in s, 'inline PTX left for the shims'
open(sys.argv[2], 'w').write(s)
PY
g++ -std=c++20 -O2 -ffp-contract=off -Wno-unknown-pragmas -pthread -I"$HERE" -I"$WORK" \
  -o "$WORK/harness" "$HERE/harness.cpp"
"$WORK/harness" "$@"
