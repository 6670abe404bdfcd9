// Strided copies (Transpose, Slice, Split, Concat): output element `idx` (row-major over
// `shape`) of one copy is input element `src_offset + Σ idx[d] * src[d]`, written at
// `dst_offset + Σ idx[d] * dst[d]`. Exact moves, no arithmetic.

extern "C" __global__ void sb_strided_copy(const float* __restrict__ x, float* __restrict__ y,
                                           long long n, SbCopy c)
{
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    long long rest = i, si = c.src_offset, di = c.dst_offset;
#pragma unroll
    for (int d = SB_MAX_RANK - 1; d >= 0; --d) {
      const long long coord = rest % c.shape[d];
      rest /= c.shape[d];
      si += coord * c.src[d];
      di += coord * c.dst[d];
    }
    y[di] = x[si];
  }
}
