/* sb_math_activations.c: slice loops of the closed-form activations (leaky_relu, hardsigmoid,
 * hardswish). Each element is the inline sb_<name>f of sb_math.h, so the bits are those of the
 * scalar function; build.rs compiles this file at -O3 without trapping math, which lets the
 * compiler if-convert the selects and vectorise the loops for the target's baseline vectors
 * (no contraction, no reassociation: the same IEEE operations per element). */
#include <stddef.h>

#include "sb_math.h"

/* dst[i] = sb_leaky_reluf(src[i], alpha). */
void samebits_leaky_reluf_slice(const float *restrict src, float *restrict dst, size_t n,
                                float alpha)
{
  size_t i;
  for (i = 0; i < n; i++) dst[i] = sb_leaky_reluf(src[i], alpha);
}

/* dst[i] = sb_hardsigmoidf(src[i], alpha, beta). */
void samebits_hardsigmoidf_slice(const float *restrict src, float *restrict dst, size_t n,
                                 float alpha, float beta)
{
  size_t i;
  for (i = 0; i < n; i++) dst[i] = sb_hardsigmoidf(src[i], alpha, beta);
}

/* dst[i] = sb_hardswishf(src[i]). */
void samebits_hardswishf_slice(const float *restrict src, float *restrict dst, size_t n)
{
  size_t i;
  for (i = 0; i < n; i++) dst[i] = sb_hardswishf(src[i]);
}
