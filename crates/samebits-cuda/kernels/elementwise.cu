// Elementwise kernels: unary math (one kernel per samebits-math function, generated on the Rust
// side from `UnaryFn` and `Activation` with SB_UNARY_KERNEL) and binary arithmetic with
// broadcasting. Each output is one element's formula (contract sections `arithmetic` and
// `activation`): no reduction, so no order to keep; IEEE operations only, --fmad=false.

// A grid-stride kernel `sb_unary_<name>` computing y[i] = EXPR, with `v` the input element and
// `p0`, `p1` the activation's parameters (unused by the plain functions).
#define SB_UNARY_KERNEL(name, EXPR)                                                         \
  extern "C" __global__ void sb_unary_##name(const float* x, float* y, long long n,         \
                                             float p0, float p1)                            \
  {                                                                                          \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;             \
         i += (long long)gridDim.x * blockDim.x) {                                           \
      const float v = x[i];                                                                  \
      y[i] = (EXPR);                                                                         \
    }                                                                                        \
  }

// Binary operation codes (SB_BINARY_*, generated from samebits-ops' `BinaryKernel`).
__device__ __forceinline__ float sb_binary_op(int op, float a, float b)
{
  switch (op) {
    case SB_BINARY_ADD: return a + b;
    case SB_BINARY_SUB: return a - b;
    case SB_BINARY_MUL: return a * b;
    case SB_BINARY_DIV: return a / b;
    case SB_BINARY_MAX: return sb_canonical_max(a, b);
    case SB_BINARY_MIN: return sb_canonical_min(a, b);
    default: return sb_powf(a, b);
  }
}

extern "C" __global__ void sb_binary(const float* a, const float* b, float* y, long long n,
                                     int op, SbBroadcast bc)
{
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    long long rest = i, ia = 0, ib = 0;
#pragma unroll
    for (int d = SB_MAX_RANK - 1; d >= 0; --d) {
      const long long coord = rest % bc.dims[d];
      rest /= bc.dims[d];
      ia += coord * bc.a_strides[d];
      ib += coord * bc.b_strides[d];
    }
    y[i] = sb_binary_op(op, a[ia], b[ib]);
  }
}
