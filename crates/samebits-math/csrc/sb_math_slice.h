/* sb_math_slice.h: the vectorisable slice loop of a correctly rounded function, for the CPU
 * build only (included by sb_math_avx2.c, which is compiled with AVX2 enabled).
 *
 * Each block of SB_SLICE_BLOCK inputs is evaluated lane by lane with sb_<name>_lane (the same
 * binary64 kernel as the scalar function, written without branches) and the same rounding test
 * as sb_round_checked; the compiler vectorises that loop (table reads become gathers). Lanes
 * that are special inputs or fail the rounding test are then recomputed by the scalar
 * sb_<name>f, so every element equals sb_<name>f(src[i]) bit for bit: the lane value is the
 * scalar function's binary64 y, and a passing rounding test returns (float)(y - e) in both. */
#ifndef SB_MATH_SLICE_H
#define SB_MATH_SLICE_H

#include <stddef.h>

#include "sb_math.h"

#define SB_SLICE_BLOCK 256

/* Defines `void fn(const float *src, float *dst, size_t n)`: dst[i] = sb_<name>f(src[i]). */
#define SB_DEFINE_VECTOR_SLICE(fn, name)                                                           \
  static void fn##_block(const float *restrict src, float *restrict dst, sb_i32 *restrict redo,    \
                         size_t m)                                                                 \
  {                                                                                                \
    const double rel = sb_##name##_err();                                                          \
    size_t j;                                                                                      \
    for (j = 0; j < m; j++) {                                                                      \
      double y, e;                                                                                 \
      float lo, hi;                                                                                \
      sb_i32 flagged = sb_##name##_lane(src[j], &y);                                               \
      e = sb_f64_from_bits(sb_f64_bits(y) & 0x7fffffffffffffffull) * rel; /* |y| rel */           \
      lo = (float)(y - e);                                                                         \
      hi = (float)(y + e);                                                                         \
      dst[j] = lo;                                                                                 \
      redo[j] = flagged | (lo != hi);                                                              \
    }                                                                                              \
  }                                                                                                \
  void fn(const float *src, float *dst, size_t n)                                                  \
  {                                                                                                \
    sb_i32 redo[SB_SLICE_BLOCK];                                                                   \
    size_t i, j;                                                                                   \
    for (i = 0; i < n; i += SB_SLICE_BLOCK) {                                                      \
      size_t m = n - i < SB_SLICE_BLOCK ? n - i : SB_SLICE_BLOCK;                                  \
      fn##_block(src + i, dst + i, redo, m);                                                       \
      for (j = 0; j < m; j++)                                                                      \
        if (redo[j]) dst[i + j] = sb_##name##f(src[i + j]);                                        \
    }                                                                                              \
  }

/* Defines `void fn(const float *src, float *dst, size_t n)`: dst[i] = sb_sigmoidf(src[i]), its
 * exp(-|x|) from the slice function `exp_slice` and the formula sb_sigmoid_of_expf applied in a
 * loop the compiler vectorises (both branches of the formula divide by 1 + e). */
#define SB_DEFINE_SIGMOID_SLICE(fn, exp_slice)                                                     \
  void fn(const float *src, float *dst, size_t n)                                                  \
  {                                                                                                \
    float neg[SB_SLICE_BLOCK], e[SB_SLICE_BLOCK];                                                  \
    size_t i, j;                                                                                   \
    for (i = 0; i < n; i += SB_SLICE_BLOCK) {                                                      \
      size_t m = n - i < SB_SLICE_BLOCK ? n - i : SB_SLICE_BLOCK;                                  \
      for (j = 0; j < m; j++) neg[j] = sb_copysignf(src[i + j], -1.0f);                            \
      exp_slice(neg, e, m);                                                                        \
      for (j = 0; j < m; j++) dst[i + j] = sb_sigmoid_of_expf(src[i + j], e[j]);                   \
    }                                                                                              \
  }

/* The functions with a lane definition in sb_math.h, as X(name). */
#define SB_VECTOR_SLICE_FUNCTIONS(X)                                                               \
  X(exp) X(exp2) X(log) X(log2) X(sin) X(cos) X(asin) X(acos) X(atan) X(tanh) X(erf) X(erfc)     \
  X(cbrt)

#endif /* SB_MATH_SLICE_H */
