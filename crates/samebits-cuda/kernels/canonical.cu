// Canonical-order building blocks shared by every samebits CUDA kernel.
//
// Implements, for the GPU, contract sections `canonical-sum` and `reduce-extrema`
// (docs/contract.md): reductions are cut into tiles of SB_TILE = 64 consecutive terms, each tile a
// chain in index order from its start value, and the tile partials are folded left to right
// (s = p_0, then s = fold(s, p_j)). Threads may compute different tiles in parallel; the fold is
// always sequential, so the bits never depend on the launch shape. Extrema are order independent.
// Compiled after samebits-math's header (sb_nanf, sb_sqrtf) and the device ABI (SB_TILE from
// samebits-kernels' REDUCTION_TILE, src/device_abi.rs) with --fmad=false.

// Asks for the cache line holding `p` (global memory) in L1: a hint that starts a load's
// memory latency early; it loads nothing into registers and changes no result.
__device__ __forceinline__ void sb_prefetch_l1(const void* p)
{
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}

// The running sum after folding the finished tile partial `p` (s = p_0 for the first tile).
__device__ __forceinline__ float sb_fold_sum(float s, float p, bool first)
{
  return first ? p : s + p;
}

// `max` of reduce-extrema: canonical NaN if either is NaN, -0.0 < +0.0. The CUDA form of
// samebits-kernels' `canonical_max` (src/reduce.rs), the one definition; the host test
// program::tests::device_extrema_equal_the_cpu_definition compiles this text with g++ and
// checks both functions against it bit for bit (no GPU needed).
__device__ __forceinline__ float sb_canonical_max(float a, float b)
{
  if (a != a || b != b) return sb_nanf();
  return (a > b || (a == b && (__float_as_uint(b) >> 31))) ? a : b;
}

// `min` of reduce-extrema: canonical NaN if either is NaN, -0.0 < +0.0. The CUDA form of
// samebits-kernels' `canonical_min`.
__device__ __forceinline__ float sb_canonical_min(float a, float b)
{
  if (a != a || b != b) return sb_nanf();
  return (a < b || (a == b && (__float_as_uint(a) >> 31))) ? a : b;
}

// One canonical reduction of `len` terms by a whole block. Thread t computes the partials of
// tiles t, t + blockDim.x, ... (each `p = step(p, k)` for k in the tile, from `init`) into
// `partials` (shared memory, one float per tile); after a barrier thread 0 folds them left to
// right with `fold`, and every thread returns the result. `len == 0` gives `init`.
template <typename Step, typename Fold>
__device__ float sb_block_canonical(int len, float init, Step step, Fold fold, float* partials)
{
  __shared__ float result;
  const int tiles = (len + SB_TILE - 1) / SB_TILE;
  for (int t = threadIdx.x; t < tiles; t += blockDim.x) {
    const int k_end = min(t * SB_TILE + SB_TILE, len);
    float p = init;
    for (int k = t * SB_TILE; k < k_end; ++k) p = step(p, k);
    partials[t] = p;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = init;
    for (int t = 0; t < tiles; ++t) s = (t == 0) ? partials[t] : fold(s, partials[t]);
    result = s;
  }
  __syncthreads();
  const float r = result;
  __syncthreads();
  return r;
}

// Block-wide extremum (order independent): `combine` is sb_canonical_max or sb_canonical_min,
// `empty` the value of an empty set. blockDim.x must be a multiple of 32, at most 1024.
template <typename Combine>
__device__ float sb_block_extremum(const float* x, int len, float empty, Combine combine)
{
  __shared__ float warp_values[32];
  float v = empty;
  for (int k = threadIdx.x; k < len; k += blockDim.x) v = combine(v, x[k]);
  for (int offset = 16; offset > 0; offset >>= 1)
    v = combine(v, __shfl_down_sync(0xffffffffu, v, offset));
  if ((threadIdx.x & 31) == 0) warp_values[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float r = empty;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) r = combine(r, warp_values[w]);
    warp_values[0] = r;
  }
  __syncthreads();
  const float r = warp_values[0];
  __syncthreads();
  return r;
}
