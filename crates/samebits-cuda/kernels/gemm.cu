// Reproducible batched GEMM C[b, i, j] = epilogue(sum_k A[b, i, k] * B[b, k, j]) on strided
// operands, and the split-K GEMV path for small M.
//
// contract: gemm, gemm-epilogue (docs/contract.md). Every output is the canonical dot product
// (canonical-sum: tiles of 64 k-steps, each `p = fma(a, b, p)` from +0.0, folded s = p_0,
// s = s + p_j) followed by the epilogue, whatever kernel or launch shape computes it:
// - sb_gemm_tiled_<config>: each output is owned by exactly one thread, which keeps its tile
//   chain `p` in registers and its running sum `s` in registers or, for the widest
//   configuration (SUMS_IN_SHARED), in its own slots of dynamic shared memory (THREADS * TM * TN
//   floats, touched only by that thread, so no barrier is needed); shared-memory K steps (BK = 8 or 16)
//   divide the 64-term tile, so the fold happens at k = 64, 128, ... and at k = K. K is never
//   padded: the last partial step runs only over the valid k.
// - sb_gemv_tile_partials + sb_gemv_fold: the 64-term tiles of an output are computed by
//   different threads (split-K, fills the GPU when M is small), written to a workspace, then
//   folded left to right by one thread per output.

#define SB_GEMV_MAX_M 8

// A strided batched matrix view: element (b, r, c) at offset + b*batch + r*row + c*col.
struct SbMat {
  long long offset, batch_stride, row_stride, col_stride;
};

// contract: gemm-epilogue. kind 0: acc; 1: acc + c; 2: alpha * acc;
// 3: (alpha * acc) + (beta * c). `c` is indexed (b, i, j) through `view`.
struct SbEpilogue {
  SbMat view;
  float alpha, beta;
  int kind;
};

__device__ __forceinline__ float sb_apply_epilogue(const SbEpilogue& e, const float* c, float acc,
                                                   long long b, long long i, long long j)
{
  if (e.kind == 0) return acc;
  if (e.kind == 2) return e.alpha * acc;
  const float cv = c[e.view.offset + b * e.view.batch_stride + i * e.view.row_stride + j * e.view.col_stride];
  if (e.kind == 1) return acc + cv;
  return (e.alpha * acc) + (e.beta * cv);
}

// Reads W (4 or 2) consecutive 16- or 8-byte aligned floats of shared memory in one access.
template <int W>
__device__ __forceinline__ void sb_load_shared(const float* src, float* dst)
{
  if constexpr (W == 4) {
    const float4 q = *reinterpret_cast<const float4*>(src);
    dst[0] = q.x; dst[1] = q.y; dst[2] = q.z; dst[3] = q.w;
  } else {
    const float2 q = *reinterpret_cast<const float2*>(src);
    dst[0] = q.x; dst[1] = q.y;
  }
}

// Register-tiled GEMM: a BM x BN block of C per thread block, TM x TN outputs per thread
// (two TM/2 x TN/2 quadrants BM/2 and BN/2 apart, so shared-memory reads are conflict free).
template <int BM, int BN, int TM, int TN, int BK, bool SUMS_IN_SHARED>
__device__ __forceinline__ void sb_gemm_tiled(int M, int N, int K, const float* A, SbMat a,
                                              const float* B, SbMat b, float* C, SbEpilogue ep,
                                              const float* c_in)
{
  static_assert(SB_TILE % BK == 0, "shared-memory K steps must divide the 64-term tile");
  constexpr int COLS = BN / TN;
  constexpr int THREADS = (BM / TM) * COLS;
  constexpr int A_LOADS = BM * BK / THREADS;
  constexpr int B_LOADS = BN * BK / THREADS;
  __shared__ __align__(16) float As[2][BK][BM + 4];
  __shared__ __align__(16) float Bs[2][BK][BN + 4];

  const int tid = threadIdx.x;
  const int tx = tid % COLS, ty = tid / COLS;
  const long long batch = blockIdx.z;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const float* Ab = A + a.offset + batch * a.batch_stride;
  const float* Bb = B + b.offset + batch * b.batch_stride;
  // Coalesced global reads: consecutive threads walk the operand's unit-stride axis.
  const bool a_k_fastest = a.col_stride == 1;
  const bool b_n_fastest = b.col_stride == 1 || b.row_stride != 1;

  float ra[A_LOADS], rb[B_LOADS];
  auto a_coords = [&](int r, int& ii, int& kk) {
    const int e = tid + r * THREADS;
    if (a_k_fastest) { kk = e % BK; ii = e / BK; } else { ii = e % BM; kk = e / BM; }
  };
  auto b_coords = [&](int r, int& kk, int& jj) {
    const int e = tid + r * THREADS;
    if (b_n_fastest) { jj = e % BN; kk = e / BN; } else { kk = e % BK; jj = e / BK; }
  };
  auto load_tile = [&](int k0) {
#pragma unroll
    for (int r = 0; r < A_LOADS; ++r) {
      int ii, kk;
      a_coords(r, ii, kk);
      const int gi = row0 + ii, gk = k0 + kk;
      ra[r] = (gi < M && gk < K) ? Ab[gi * a.row_stride + gk * a.col_stride] : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < B_LOADS; ++r) {
      int kk, jj;
      b_coords(r, kk, jj);
      const int gk = k0 + kk, gj = col0 + jj;
      rb[r] = (gk < K && gj < N) ? Bb[gk * b.row_stride + gj * b.col_stride] : 0.0f;
    }
  };
  auto store_tile = [&](int buf) {
#pragma unroll
    for (int r = 0; r < A_LOADS; ++r) {
      int ii, kk;
      a_coords(r, ii, kk);
      As[buf][kk][ii] = ra[r];
    }
#pragma unroll
    for (int r = 0; r < B_LOADS; ++r) {
      int kk, jj;
      b_coords(r, kk, jj);
      Bs[buf][kk][jj] = rb[r];
    }
  };

  // Running sums: s[i][j] in registers, or sums[(i * TN + j) * THREADS + tid] in shared memory.
  extern __shared__ float sums[];
  float p[TM][TN], s[SUMS_IN_SHARED ? 1 : TM][SUMS_IN_SHARED ? 1 : TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      p[i][j] = 0.0f;
      if constexpr (SUMS_IN_SHARED) sums[(i * TN + j) * THREADS + tid] = 0.0f;
      else s[i][j] = 0.0f;
    }

  // One k-step of every chain of this thread: p = fma(A[i, k], B[k, j], p).
  auto step = [&](int buf, int kk) {
    float av[TM], bv[TN];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      sb_load_shared<TM / 2>(&As[buf][kk][h * BM / 2 + ty * TM / 2], av + h * TM / 2);
      sb_load_shared<TN / 2>(&Bs[buf][kk][h * BN / 2 + tx * TN / 2], bv + h * TN / 2);
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) p[i][j] = __fmaf_rn(av[i], bv[j], p[i][j]);
  };

  const int k_steps = (K + BK - 1) / BK;
  bool first_tile = true;
  if (k_steps > 0) {
    load_tile(0);
    store_tile(0);
  }
  __syncthreads();
  for (int t = 0; t < k_steps; ++t) {
    const int buf = t & 1;
    const int k0 = t * BK;
    if (t + 1 < k_steps) load_tile(k0 + BK);
    const int kc = min(BK, K - k0);
    if (kc == BK) {
#pragma unroll
      for (int kk = 0; kk < BK; ++kk) step(buf, kk);
    } else {
      for (int kk = 0; kk < kc; ++kk) step(buf, kk);
    }
    const int k_end = k0 + kc;
    if (k_end % SB_TILE == 0 || k_end == K) {
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          if constexpr (SUMS_IN_SHARED) {
            float& sum = sums[(i * TN + j) * THREADS + tid];
            sum = sb_fold_sum(sum, p[i][j], first_tile);
          } else {
            s[i][j] = sb_fold_sum(s[i][j], p[i][j], first_tile);
          }
          p[i][j] = 0.0f;
        }
      first_tile = false;
    }
    if (t + 1 < k_steps) store_tile(buf ^ 1);
    __syncthreads();
  }

  float* Cb = C + batch * (long long)M * N;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int gi = row0 + (i / (TM / 2)) * (BM / 2) + ty * TM / 2 + i % (TM / 2);
    if (gi >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int gj = col0 + (j / (TN / 2)) * (BN / 2) + tx * TN / 2 + j % (TN / 2);
      float acc;
      if constexpr (SUMS_IN_SHARED) acc = sums[(i * TN + j) * THREADS + tid];
      else acc = s[i][j];
      if (gj < N) Cb[(long long)gi * N + gj] = sb_apply_epilogue(ep, c_in, acc, batch, gi, gj);
    }
  }
}

// The launch configurations (name, BM, BN, TM, TN, BK, blocks per SM, running sums in shared
// memory); each uses 256 threads. They differ only in how outputs are spread over threads and
// where a running sum is kept, never in any output's order, so they give equal bits.
#define SB_GEMM_CONFIG(name, BM, BN, TM, TN, BK, MIN_BLOCKS, SUMS_IN_SHARED)                    \
  extern "C" __global__ void __launch_bounds__(256, MIN_BLOCKS) sb_gemm_tiled_##name(          \
      int M, int N, int K, const float* A, SbMat a, const float* B, SbMat b, float* C,          \
      SbEpilogue ep, const float* c_in)                                                          \
  {                                                                                              \
    sb_gemm_tiled<BM, BN, TM, TN, BK, SUMS_IN_SHARED>(M, N, K, A, a, B, b, C, ep, c_in);        \
  }
SB_GEMM_CONFIG(128x128, 128, 128, 8, 8, 8, 1, true)
SB_GEMM_CONFIG(128x64, 128, 64, 8, 4, 16, 1, false)
SB_GEMM_CONFIG(64x64, 64, 64, 4, 4, 16, 2, false)

// Split-K pass 1: thread (column group g, tile t) computes the tile-t partials of outputs
// (b, i, g*VEC .. g*VEC+VEC-1) for every row i < M (M <= SB_GEMV_MAX_M) into
// partials[((t * batch + b) * M + i) * N + j]. The kernel is instantiated for MT = 1, 2, 4, 8
// rows (MT >= M; rows past M - 1 recompute row M - 1 and are not stored), so the loops carry
// no run-time row guard. A and B are read in chunks of CHUNK k-steps staged in registers (many
// independent loads in flight), then the chains run in k order.
// LAYOUT selects how B(k, j) is read, never the order:
//   SB_B_N_VEC4: unit stride along j, 16-byte aligned, N % 4 == 0: one float4 per k, VEC = 4;
//   SB_B_K_VEC4: unit stride along k, 16-byte aligned rows: one float4 per 4 k-steps, VEC = 1;
//   SB_B_STRIDED: any strides, one float per k, VEC = 1.
// Adjacent threads take adjacent column groups, except for SB_B_K_VEC4 (adjacent tiles).
#define SB_B_N_VEC4 0
#define SB_B_K_VEC4 1
#define SB_B_STRIDED 2

template <int LAYOUT, int MT>
__device__ __forceinline__ void sb_gemv_tile_partials(int M, int N, int K, int batch_count,
                                                      const float* __restrict__ A, SbMat a,
                                                      const float* __restrict__ B, SbMat b,
                                                      float* __restrict__ partials)
{
  constexpr int VEC = LAYOUT == SB_B_N_VEC4 ? 4 : 1;
  // k-steps staged per chunk: fewer as the rows' registers grow.
  constexpr int CHUNK = MT <= 2 ? 16 : 8;
  const int tiles = (K + SB_TILE - 1) / SB_TILE;
  const int groups = (N + VEC - 1) / VEC;
  const long long g_lin = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (g_lin >= (long long)tiles * groups) return;
  const bool tiles_fastest = LAYOUT == SB_B_K_VEC4;
  const int t = tiles_fastest ? (int)(g_lin % tiles) : (int)(g_lin / groups);
  const int g = tiles_fastest ? (int)(g_lin / tiles) : (int)(g_lin % groups);
  const long long batch = blockIdx.y;
  const float* Ab = A + a.offset + batch * a.batch_stride;
  const float* Bb = B + b.offset + batch * b.batch_stride;
  const int j0 = g * VEC;
  const int k0 = t * SB_TILE, k_end = min(k0 + SB_TILE, K);

  float p[MT][VEC];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int v = 0; v < VEC; ++v) p[i][v] = 0.0f;

  for (int kc = k0; kc < k_end; kc += CHUNK) {
    const int count = min(CHUNK, k_end - kc);
    float bv[CHUNK][VEC], av[MT][CHUNK];
    if constexpr (LAYOUT == SB_B_N_VEC4) {
#pragma unroll
      for (int c = 0; c < CHUNK; ++c) {
        float4 q = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (c < count) q = *reinterpret_cast<const float4*>(Bb + (kc + c) * b.row_stride + j0);
        bv[c][0] = q.x; bv[c][1] = q.y; bv[c][2] = q.z; bv[c][3] = q.w;
      }
    } else if constexpr (LAYOUT == SB_B_K_VEC4) {
      const float* col = Bb + (long long)j0 * b.col_stride;
#pragma unroll
      for (int c = 0; c < CHUNK; c += 4) {
        float4 q = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (c < count) q = *reinterpret_cast<const float4*>(col + kc + c);
        bv[c][0] = q.x; bv[c + 1][0] = q.y; bv[c + 2][0] = q.z; bv[c + 3][0] = q.w;
      }
    } else {
#pragma unroll
      for (int c = 0; c < CHUNK; ++c)
        bv[c][0] = (c < count) ? Bb[(kc + c) * b.row_stride + j0 * b.col_stride] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const float* a_row = Ab + min(i, M - 1) * a.row_stride;
#pragma unroll
      for (int c = 0; c < CHUNK; ++c) av[i][c] = (c < count) ? a_row[(kc + c) * a.col_stride] : 0.0f;
    }
    // p = fma(A[i, k], B(k, j), p) for k = kc .. kc + count - 1, in order.
#pragma unroll
    for (int c = 0; c < CHUNK; ++c) {
      if (c < count) {
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int v = 0; v < VEC; ++v) p[i][v] = __fmaf_rn(av[i][c], bv[c][v], p[i][v]);
      }
    }
  }

  float* out = partials + ((long long)t * batch_count + batch) * M * (long long)N;
#pragma unroll
  for (int i = 0; i < MT; ++i) {
    if (i >= M) continue;
#pragma unroll
    for (int v = 0; v < VEC; ++v)
      if (j0 + v < N) out[(long long)i * N + j0 + v] = p[i][v];
  }
}

#define SB_GEMV_KERNEL(name, LAYOUT, MT)                                                          \
  extern "C" __global__ void sb_gemv_tile_partials_##name##_m##MT(                                \
      int M, int N, int K, int batch_count, const float* A, SbMat a, const float* B, SbMat b,     \
      float* partials)                                                                             \
  {                                                                                                \
    sb_gemv_tile_partials<LAYOUT, MT>(M, N, K, batch_count, A, a, B, b, partials);                \
  }
#define SB_GEMV_KERNELS(name, LAYOUT) \
  SB_GEMV_KERNEL(name, LAYOUT, 1)     \
  SB_GEMV_KERNEL(name, LAYOUT, 2)     \
  SB_GEMV_KERNEL(name, LAYOUT, 4)     \
  SB_GEMV_KERNEL(name, LAYOUT, 8)
SB_GEMV_KERNELS(n_vec4, SB_B_N_VEC4)
SB_GEMV_KERNELS(k_vec4, SB_B_K_VEC4)
SB_GEMV_KERNELS(strided, SB_B_STRIDED)

// Split-K pass 2: one thread per output folds its tile partials left to right, then applies
// the epilogue. K == 0 (no tiles) gives +0.0.
extern "C" __global__ void sb_gemv_fold(int M, int N, int K, int batch_count,
                                        const float* partials, float* C, SbEpilogue ep,
                                        const float* c_in)
{
  const long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  const long long per_tile = (long long)batch_count * M * N;
  if (o >= per_tile) return;
  const int tiles = (K + SB_TILE - 1) / SB_TILE;
  float s = 0.0f;
  for (int t = 0; t < tiles; ++t) s = sb_fold_sum(s, partials[t * per_tile + o], t == 0);
  const long long j = o % N, i = (o / N) % M, batch = o / ((long long)M * N);
  C[o] = sb_apply_epilogue(ep, c_in, s, batch, i, j);
}
