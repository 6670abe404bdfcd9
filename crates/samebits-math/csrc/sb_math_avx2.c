/* sb_math_avx2.c: the vectorised slice loops (sb_math_slice.h) compiled with AVX2 enabled; build.rs
 * compiles this file on x86-64 only, and sb_math.c calls these functions when the CPU has AVX2
 * (and not AVX-512F, see sb_math_avx512.c). No FMA: the build keeps -ffp-contract=off, so every
 * lane performs the scalar operations. */
#include "sb_math_slice.h"

#define SB_AVX2_SLICE(name) SB_DEFINE_VECTOR_SLICE(samebits_avx2_##name##f_slice, name)
SB_VECTOR_SLICE_FUNCTIONS(SB_AVX2_SLICE)
SB_DEFINE_SIGMOID_SLICE(samebits_avx2_sigmoidf_slice, samebits_avx2_expf_slice)
