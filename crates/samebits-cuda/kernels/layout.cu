// Strided copies (Transpose, Slice, Split, Concat): output element `idx` (row-major over
// `shape`) of one copy is input element `src_offset + Σ idx[d] * src[d]`, written at
// `dst_offset + Σ idx[d] * dst[d]`. Exact moves, no arithmetic.

// The copy's loop with the index arithmetic in `I` (32-bit division is several times cheaper
// on the GPU; the host-side caller picks it whenever `n` fits).
template <typename I>
__device__ __forceinline__ void sb_strided_copy_loop(const float* __restrict__ x, float* __restrict__ y, I n,
                                                     const SbCopy& c)
{
  for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
    I rest = i;
    long long si = c.src_offset, di = c.dst_offset;
#pragma unroll
    for (int d = SB_MAX_RANK - 1; d >= 0; --d) {
      const I dim = (I)c.shape[d];
      const I coord = rest % dim;
      rest /= dim;
      si += coord * c.src[d];
      di += coord * c.dst[d];
    }
    y[di] = x[si];
  }
}

extern "C" __global__ void sb_strided_copy(const float* __restrict__ x, float* __restrict__ y,
                                           long long n, SbCopy c)
{
  if (n <= 0x7fffffffLL) sb_strided_copy_loop<unsigned>(x, y, (unsigned)n, c);
  else sb_strided_copy_loop<long long>(x, y, n, c);
}
