/* sb_math.c: the CPU build of sb_math.h. Exports each function as a scalar C symbol samebits_<f>f,
 * a slice loop samebits_<f>f_slice and (for tools/gen_exceptions.py) its hard-case query;
 * src/lib.rs binds to these. On x86-64 (build.rs defines SB_HAVE_AVX2_SLICES) the slice functions
 * of SB_VECTOR_SLICE_FUNCTIONS and the sigmoid slice call the vectorised loops of
 * sb_math_avx512.c or sb_math_avx2.c when the CPU has AVX-512F or AVX2; they return the same
 * bits as the scalar loop. */
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
#define SB_DECLARE_X86_SLICES(name)                                                                \
  void samebits_avx2_##name##f_slice(const float *, float *, size_t);                              \
  void samebits_avx512_##name##f_slice(const float *, float *, size_t);
SB_VECTOR_SLICE_FUNCTIONS(SB_DECLARE_X86_SLICES)
SB_DECLARE_X86_SLICES(sigmoid)
/* The widest vectorised loop this CPU runs; all give the scalar loop's bits. */
#define SB_DISPATCH_SLICE(name, src, dst, n, scalar)                                               \
  do {                                                                                             \
    if (__builtin_cpu_supports("avx512f")) samebits_avx512_##name##f_slice(src, dst, n);           \
    else if (__builtin_cpu_supports("avx2")) samebits_avx2_##name##f_slice(src, dst, n);           \
    else scalar(src, dst, n);                                                                      \
  } while (0)
#define SB_EXPORT_VECTORISED(name)                                                                 \
  SB_EXPORT_SCALAR(name)                                                                           \
  void samebits_##name##f_slice(const float *src, float *dst, size_t n)                           \
  {                                                                                                \
    SB_DISPATCH_SLICE(name, src, dst, n, sb_scalar_##name##f_slice);                               \
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
SB_EXPORT_VECTORISED(tanh)
SB_EXPORT_CORRECTLY_ROUNDED(asinh)
SB_EXPORT_CORRECTLY_ROUNDED(acosh)
SB_EXPORT_CORRECTLY_ROUNDED(atanh)
SB_EXPORT_VECTORISED(erf)
SB_EXPORT_VECTORISED(erfc)
SB_EXPORT_VECTORISED(cbrt)

float samebits_powf(float x, float y) { return sb_powf(x, y); }
void samebits_powf_slice(const float *x, const float *y, float *dst, size_t n)
{
  for (size_t i = 0; i < n; i++) dst[i] = sb_powf(x[i], y[i]);
}

#define SB_EXPORT_ACTIVATION(name, params, args)                                                   \
  float samebits_##name##f params { return sb_##name##f args; }

SB_EXPORT_ACTIVATION(sigmoid, (float x), (x))
/* dst[i] = sb_sigmoidf(src[i]): the vectorised loops of sb_math_slice.h, else this build's. */
SB_DEFINE_SIGMOID_SLICE(sb_generic_sigmoidf_slice, samebits_expf_slice)
void samebits_sigmoidf_slice(const float *src, float *dst, size_t n)
{
#ifdef SB_HAVE_AVX2_SLICES
  SB_DISPATCH_SLICE(sigmoid, src, dst, n, sb_generic_sigmoidf_slice);
#else
  sb_generic_sigmoidf_slice(src, dst, n);
#endif
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
SB_EXPORT_ACTIVATION(leaky_relu, (float x, float alpha), (x, alpha))
SB_EXPORT_ACTIVATION(rsqrt_formula, (float x), (x))
