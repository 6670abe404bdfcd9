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

// The broadcast loop with the index arithmetic in `I` (32-bit whenever `n` fits: a 64-bit
// division costs several times a 32-bit one).
template <typename I>
__device__ __forceinline__ void sb_binary_loop(const float* a, const float* b, float* y, I n, int op,
                                               const SbBroadcast& bc)
{
  for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
    I rest = i;
    long long ia = 0, ib = 0;
#pragma unroll
    for (int d = SB_MAX_RANK - 1; d >= 0; --d) {
      const I dim = (I)bc.dims[d];
      const I coord = rest % dim;
      rest /= dim;
      ia += coord * bc.a_strides[d];
      ib += coord * bc.b_strides[d];
    }
    y[i] = sb_binary_op(op, a[ia], b[ib]);
  }
}

extern "C" __global__ void sb_binary(const float* a, const float* b, float* y, long long n,
                                     int op, SbBroadcast bc)
{
  if (n <= 0x7fffffffLL) sb_binary_loop<unsigned>(a, b, y, (unsigned)n, op, bc);
  else sb_binary_loop<long long>(a, b, y, n, op, bc);
}

// Cast to float32 (contract `cast`): element i of an integer tensor of `width` bytes (signed
// or not) converted with one round to nearest even, as the CPU's `as f32`; width 0 is bool
// (one byte, nonzero -> 1).
extern "C" __global__ void sb_cast_to_f32(const unsigned char* x, float* y, long long n,
                                          int width, int is_signed)
{
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    float v;
    switch (width) {
      case 0: v = x[i] != 0 ? 1.0f : 0.0f; break;
      case 1:
        v = is_signed ? __int2float_rn(((const signed char*)x)[i]) : __uint2float_rn(x[i]);
        break;
      case 2:
        v = is_signed ? __int2float_rn(((const short*)x)[i])
                      : __uint2float_rn(((const unsigned short*)x)[i]);
        break;
      case 4:
        v = is_signed ? __int2float_rn(((const int*)x)[i])
                      : __uint2float_rn(((const unsigned int*)x)[i]);
        break;
      default:
        v = is_signed ? __ll2float_rn(((const long long*)x)[i])
                      : __ull2float_rn(((const unsigned long long*)x)[i]);
    }
    y[i] = v;
  }
}
