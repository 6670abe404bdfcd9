/* sb_math_check.cu: kernels of examples/gpu_exhaustive.rs. Compiled by NVRTC after
 * samebits_math::CUDA_SOURCE (sb_math.h) with --fmad=false; each kernel evaluates one function of
 * sb_math.h at the n consecutive binary32 bit patterns first, first + 1, ... and stores the results
 * for a bitwise comparison with the CPU build. */

#define SB_CHECK_UNARY(name)                                                                       \
  extern "C" __global__ void check_##name(unsigned int first, unsigned int n, float *out)         \
  {                                                                                                \
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;                                        \
    if (i < n) out[i] = sb_##name##f(__uint_as_float(first + i));                                  \
  }

SB_CHECK_UNARY(exp)
SB_CHECK_UNARY(exp2)
SB_CHECK_UNARY(exp10)
SB_CHECK_UNARY(expm1)
SB_CHECK_UNARY(log)
SB_CHECK_UNARY(log2)
SB_CHECK_UNARY(log10)
SB_CHECK_UNARY(log1p)
SB_CHECK_UNARY(sin)
SB_CHECK_UNARY(cos)
SB_CHECK_UNARY(tan)
SB_CHECK_UNARY(asin)
SB_CHECK_UNARY(acos)
SB_CHECK_UNARY(atan)
SB_CHECK_UNARY(sinh)
SB_CHECK_UNARY(cosh)
SB_CHECK_UNARY(tanh)
SB_CHECK_UNARY(asinh)
SB_CHECK_UNARY(acosh)
SB_CHECK_UNARY(atanh)
SB_CHECK_UNARY(erf)
SB_CHECK_UNARY(erfc)
SB_CHECK_UNARY(cbrt)

/* Activations take up to two parameters p0, p1 (the Rust Activation's fields, in order). */
#define SB_CHECK_ACTIVATION(name, call)                                                            \
  extern "C" __global__ void check_act_##name(unsigned int first, unsigned int n, float p0,        \
                                              float p1, float *out)                                \
  {                                                                                                \
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;                                        \
    float x;                                                                                       \
    if (i >= n) return;                                                                            \
    x = __uint_as_float(first + i);                                                                \
    (void)p0;                                                                                      \
    (void)p1;                                                                                      \
    out[i] = call;                                                                                 \
  }

SB_CHECK_ACTIVATION(sigmoid, sb_sigmoidf(x))
SB_CHECK_ACTIVATION(softplus, sb_softplusf(x))
SB_CHECK_ACTIVATION(gelu_erf, sb_gelu_erff(x))
SB_CHECK_ACTIVATION(gelu_tanh, sb_gelu_tanhf(x))
SB_CHECK_ACTIVATION(hardsigmoid, sb_hardsigmoidf(x, p0, p1))
SB_CHECK_ACTIVATION(hardswish, sb_hardswishf(x))
SB_CHECK_ACTIVATION(mish, sb_mishf(x))
SB_CHECK_ACTIVATION(elu, sb_eluf(x, p0))
SB_CHECK_ACTIVATION(selu, sb_seluf(x, p0, p1))
SB_CHECK_ACTIVATION(celu, sb_celuf(x, p0))
SB_CHECK_ACTIVATION(leaky_relu, sb_leaky_reluf(x, p0))
SB_CHECK_ACTIVATION(rsqrt_formula, sb_rsqrt_formulaf(x))

/* pow on n given pairs (x[i], y[i]). */
extern "C" __global__ void check_pow(const float *x, const float *y, unsigned int n, float *out)
{
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = sb_powf(x[i], y[i]);
}
