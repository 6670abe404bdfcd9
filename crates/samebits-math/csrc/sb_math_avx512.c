/* sb_math_avx512.c: the vectorised slice loops (sb_math_slice.h) compiled with AVX-512F enabled
 * (16 binary32 / 8 binary64 lanes per register); build.rs compiles this file on x86-64 only, and
 * sb_math.c calls these functions when the CPU has AVX-512F. The lane code and the scalar redo
 * pass are those of the AVX2 build, so every element is sb_<name>f(src[i]) bit for bit; no FMA
 * (-ffp-contract=off). */
#include "sb_math_slice.h"

#define SB_AVX512_SLICE(name) SB_DEFINE_VECTOR_SLICE(samebits_avx512_##name##f_slice, name)
SB_VECTOR_SLICE_FUNCTIONS(SB_AVX512_SLICE)
SB_DEFINE_SIGMOID_SLICE(samebits_avx512_sigmoidf_slice, samebits_avx512_expf_slice)
