/* sb_math.c: the CPU build of sb_math.h. Exports each function as a scalar C symbol samebits_<f>f,
 * a slice loop samebits_<f>f_slice and (for tools/gen_exceptions.py) its hard-case query;
 * src/lib.rs binds to these. On x86-64 with AVX2 (build.rs defines SB_HAVE_AVX2_SLICES) the
 * slice functions of SB_VECTOR_SLICE_FUNCTIONS call the vectorised loops of sb_math_avx2.c,
 * which return the same bits as the scalar loop. */
#include <stddef.h>

#include "sb_math.h"
#include "sb_math_slice.h"

/* The scalar entry points of a function and its scalar slice loop sb_scalar_<name>f_slice. */
#define SB_EXPORT_SCALAR(name)                                                                     \
  float samebits_##name##f(float x) { return sb_##name##f(x); }                                  \
  sb_u64 samebits_##name##f_hard_case(float x) { return sb_##name##f_hard_case(x); }             \
  static void sb_scalar_##name##f_slice(const float *src, float *dst, size_t n)                   \
  {                                                                                                \
    for (size_t i = 0; i < n; i++) dst[i] = sb_##name##f(src[i]);                                  \
  }

#define SB_EXPORT_CORRECTLY_ROUNDED(name)                                                          \
  SB_EXPORT_SCALAR(name)                                                                           \
  void samebits_##name##f_slice(const float *src, float *dst, size_t n)                           \
  {                                                                                                \
    sb_scalar_##name##f_slice(src, dst, n);                                                        \
  }

#ifdef SB_HAVE_AVX2_SLICES
#define SB_DECLARE_AVX2_SLICE(name) void samebits_avx2_##name##f_slice(const float *, float *, size_t);
SB_VECTOR_SLICE_FUNCTIONS(SB_DECLARE_AVX2_SLICE)
#define SB_EXPORT_VECTORISED(name)                                                                 \
  SB_EXPORT_SCALAR(name)                                                                           \
  void samebits_##name##f_slice(const float *src, float *dst, size_t n)                           \
  {                                                                                                \
    if (__builtin_cpu_supports("avx2")) samebits_avx2_##name##f_slice(src, dst, n);                \
    else sb_scalar_##name##f_slice(src, dst, n);                                                   \
  }
#else
#define SB_EXPORT_VECTORISED(name) SB_EXPORT_CORRECTLY_ROUNDED(name)
#endif

SB_EXPORT_VECTORISED(exp)
SB_EXPORT_VECTORISED(exp2)
SB_EXPORT_CORRECTLY_ROUNDED(exp10)
SB_EXPORT_CORRECTLY_ROUNDED(expm1)
SB_EXPORT_VECTORISED(log)
SB_EXPORT_VECTORISED(log2)
SB_EXPORT_CORRECTLY_ROUNDED(log10)
SB_EXPORT_CORRECTLY_ROUNDED(log1p)
SB_EXPORT_VECTORISED(sin)
SB_EXPORT_VECTORISED(cos)
SB_EXPORT_CORRECTLY_ROUNDED(tan)
SB_EXPORT_VECTORISED(asin)
SB_EXPORT_VECTORISED(acos)
SB_EXPORT_VECTORISED(atan)
SB_EXPORT_CORRECTLY_ROUNDED(sinh)
SB_EXPORT_CORRECTLY_ROUNDED(cosh)
SB_EXPORT_CORRECTLY_ROUNDED(tanh)
SB_EXPORT_CORRECTLY_ROUNDED(asinh)
SB_EXPORT_CORRECTLY_ROUNDED(acosh)
SB_EXPORT_CORRECTLY_ROUNDED(atanh)
SB_EXPORT_CORRECTLY_ROUNDED(erf)
SB_EXPORT_CORRECTLY_ROUNDED(erfc)
SB_EXPORT_VECTORISED(cbrt)

float samebits_powf(float x, float y) { return sb_powf(x, y); }
void samebits_powf_slice(const float *x, const float *y, float *dst, size_t n)
{
  for (size_t i = 0; i < n; i++) dst[i] = sb_powf(x[i], y[i]);
}

#define SB_EXPORT_ACTIVATION(name, params, args)                                                   \
  float samebits_##name##f params { return sb_##name##f args; }

SB_EXPORT_ACTIVATION(sigmoid, (float x), (x))
/* dst[i] = sb_sigmoidf(src[i]), its exp(-|x|) from the (vectorised) exp slice. */
void samebits_sigmoidf_slice(const float *src, float *dst, size_t n)
{
  float neg[SB_SLICE_BLOCK], e[SB_SLICE_BLOCK];
  for (size_t i = 0; i < n; i += SB_SLICE_BLOCK) {
    size_t m = n - i < SB_SLICE_BLOCK ? n - i : SB_SLICE_BLOCK;
    for (size_t j = 0; j < m; j++) neg[j] = sb_copysignf(src[i + j], -1.0f);
    samebits_expf_slice(neg, e, m);
    for (size_t j = 0; j < m; j++) dst[i + j] = sb_sigmoid_of_expf(src[i + j], e[j]);
  }
}
SB_EXPORT_ACTIVATION(softplus, (float x), (x))
SB_EXPORT_ACTIVATION(gelu_erf, (float x), (x))
SB_EXPORT_ACTIVATION(gelu_tanh, (float x), (x))
SB_EXPORT_ACTIVATION(hardsigmoid, (float x, float alpha, float beta), (x, alpha, beta))
SB_EXPORT_ACTIVATION(hardswish, (float x), (x))
SB_EXPORT_ACTIVATION(mish, (float x), (x))
SB_EXPORT_ACTIVATION(elu, (float x, float alpha), (x, alpha))
SB_EXPORT_ACTIVATION(selu, (float x, float alpha, float gamma), (x, alpha, gamma))
SB_EXPORT_ACTIVATION(celu, (float x, float alpha), (x, alpha))
SB_EXPORT_ACTIVATION(rsqrt_formula, (float x), (x))
