// Reproducible batched GEMM C[b, i, j] = epilogue(sum_k A[b, i, k] * B[b, k, j]) on strided
// operands, and the split-K GEMV path for small M.
//
// contract: gemm, gemm-epilogue (docs/contract.md). Every output is the canonical dot product
// (canonical-sum: tiles of 64 k-steps, each `p = fma(a, b, p)` from +0.0, folded s = p_0,
// s = s + p_j) followed by the epilogue, whatever kernel or launch shape computes it:
// - sb_gemm_warp_<config>: each output is owned by exactly one thread, which keeps its tile
//   chain `p` in a register and its running sum `s` in shared memory. Shared-memory K steps
//   (BK = 8 or 16) divide the 64-term tile, so the fold happens after every 64 / BK steps and at
//   k = K. K is never padded: the last partial step runs only over the valid k.
// - the same kernels with `split_tiles`, then sb_gemm_fold_tiles, for outputs of too few blocks
//   to fill the GPU: block (tile, batch) runs only the chains p of one 64-term tile and stores
//   them to a workspace; the fold kernel then folds each output's partials in tile order.
// - sb_gemv_<layout>_m<MT>: M <= 8 rows. A block owns CB consecutive columns and a run of
//   64-term tiles; one thread runs each (column, tile) chain for all rows, so a chain is never
//   split. Partials go to shared memory and are folded left to right in the same kernel; when
//   the tiles of a column are spread over several blocks (`splits` > 1), each block writes its
//   partials to a workspace and the last block of the column group to finish (an atomic ticket
//   picks WHO folds, never the order) folds all of them, tile 0 first. The bits therefore do
//   not depend on CB, `splits` or which block finishes last.

__device__ __forceinline__ float sb_apply_epilogue(const SbEpilogue& e, const float* c, float acc,
                                                   long long b, long long i, long long j)
{
  if (e.kind == 0) return acc;
  if (e.kind == 2) return e.alpha * acc;
  const float cv = c[e.view.offset + b * e.view.batch_stride + i * e.view.row_stride + j * e.view.col_stride];
  if (e.kind == 1) return acc + cv;
  return (e.alpha * acc) + (e.beta * cv);
}

// Asynchronous global -> shared copies (sm_80+). `bytes` of the source are read (0 skips the
// read and fills the destination with zeros).
__device__ __forceinline__ void sb_cp_async4(void* dst, const void* src, int bytes)
{
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void sb_cp_async16(void* dst, const void* src, int bytes)
{
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void sb_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void sb_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// Reads 4 consecutive 16-byte aligned floats of shared memory in one access.
__device__ __forceinline__ void sb_load_shared4(const float* src, float* dst)
{
  const float4 q = *reinterpret_cast<const float4*>(src);
  dst[0] = q.x; dst[1] = q.y; dst[2] = q.z; dst[3] = q.w;
}

// ---------------------------------------------------------------------------------------------
// Warp-tiled GEMM (sb_gemm_warp_<config>), after the SIMT GEMMs of CUTLASS, S. Boehm's "How to
// optimize a CUDA matmul kernel for cuBLAS-like performance" and Y. Li's Ampere SGEMM: a BM x BN
// block of C per thread block, WARPS_M x WARPS_N warps of (16 * FM) x (32 * FN) outputs. The 32
// lanes of a warp form a 4 x 8 grid in a 'z' order (lane -> row (lane / 16) * 2 + lane % 2,
// column (lane / 2) % 8), and lane (r, c) owns FM x FN fragments of 4 x 4 outputs: warp-tile rows
// f * 16 + r * 4 + 0..3 and columns g * 32 + c * 4 + 0..3. Each fragment row or column is one
// 16-byte shared-memory read, and the 16 lanes of a half warp read at most 128 distinct bytes of
// each operand row, without bank conflicts.
// The tile chains `p` live in registers; the running sums `s` live in shared memory (one float4
// slot per 4 outputs, slot q of thread t at q * THREADS + t, so a warp's slots are contiguous),
// read and written only at the 64-term tile boundaries. That halves the registers per output:
// a thread holds 16 x 8 chains in 216 registers (128 x 256 blocks, one per SM), or 8 x 8 in 121
// (64 x 128 blocks, three per SM). Fragments are double-buffered in
// registers (the next k-step's operands are read while this one's FMAs run) and the operand
// tiles arrive by cp.async through a STAGES-deep ring with one barrier per BK k-steps.

// One thread's copies of a k-major operand tile (tile[k][x], pitch PITCH floats) per k-step
// block: copy r moves W consecutive elements along x (the tile's m for A, n for B) at tile
// coordinates (x0 + r * dx, k0 + r * dk), from `src + r * src_step` (`src` advances by `advance`
// per block); bit r of `x_ok` says whether x0 + r * dx lies inside the matrix.
struct SbTileCopy {
  const float* src;
  long long src_step, advance;
  int dst, dst_step, k0, dk;
  unsigned x_ok;
};

// The LOADS copies of a thread for tile coordinates (x0, k0) + r * (dx, dk) of an operand whose
// element (x, k) is at `base + x * xs + k * ks`, with x_limit rows (A) or columns (B) past the
// block's origin.
template <int PITCH, int LOADS>
__device__ __forceinline__ SbTileCopy sb_tile_copy(const float* base, long long xs, long long ks, int x0,
                                                   int dx, int k0, int dk, int x_limit, int bk)
{
  SbTileCopy c;
  c.src = base + x0 * xs + k0 * ks;
  c.src_step = dx * xs + dk * ks;
  c.advance = bk * ks;
  c.dst = k0 * PITCH + x0;
  c.dst_step = dk * PITCH + dx;
  c.k0 = k0;
  c.dk = dk;
  c.x_ok = 0;
#pragma unroll
  for (int r = 0; r < LOADS; ++r) c.x_ok |= (x0 + r * dx < x_limit ? 1u : 0u) << r;
  return c;
}

// Queues the LOADS copies of one k-step block (k_left = K - its first k) into `tile`. Elements
// past the matrix are not copied: their shared-memory words feed only chains of rows or columns
// that are never stored, or k-steps past K that are never stepped.
template <int W, int LOADS>
__device__ __forceinline__ void sb_tile_issue(const SbTileCopy& c, float* tile, int k_left)
{
#pragma unroll
  for (int r = 0; r < LOADS; ++r) {
    if ((c.x_ok >> r & 1u) && c.k0 + r * c.dk < k_left) {
      if constexpr (W == 4) sb_cp_async16(tile + c.dst + r * c.dst_step, c.src + r * c.src_step, 16);
      else sb_cp_async4(tile + c.dst + r * c.dst_step, c.src + r * c.src_step, 4);
    }
  }
}

// With `split_tiles` set, block z = tile * batches + batch computes only the 64-term tile
// `tile` of each of its outputs (its chain p from +0.0) and stores p raw (the host passes the
// empty epilogue) into C + tile * batches * M * N; sb_gemm_fold_tiles folds those partials.
template <int BM, int BN, int FM, int FN, int BK, int STAGES, bool B_VEC>
__device__ __forceinline__ void sb_gemm_warp(int M, int N, int K, const float* A, SbMat a, const float* B,
                                             SbMat b, float* C, SbEpilogue ep, const float* c_in,
                                             int batches, int split_tiles)
{
  static_assert(SB_TILE % BK == 0, "shared-memory K steps must divide the 64-term tile");
  constexpr int TM = 4 * FM, TN = 4 * FN, WM = 16 * FM, WN = 32 * FN;
  constexpr int WARPS_N = BN / WN, THREADS = 32 * (BM / WM) * WARPS_N;
  constexpr int A_PITCH = BM + 4, B_PITCH = BN + 4;
  constexpr int BW = B_VEC ? 4 : 1;  // B elements per copy
  constexpr int A_LOADS = BM * BK / THREADS, B_LOADS = BN * BK / BW / THREADS;
  static_assert(BM % WM == 0 && BN % WN == 0, "warps must tile the block");
  static_assert(THREADS % BM == 0 && THREADS % BN == 0 && THREADS % BK == 0 && (THREADS * BW) % BN == 0,
                "copy coordinates must be affine in the copy index");
  static_assert(A_LOADS * THREADS == BM * BK && B_LOADS * BW * THREADS == BN * BK && B_LOADS > 0,
                "tile copies must split evenly");
  extern __shared__ __align__(16) float sb_gemm_smem[];
  float* As = sb_gemm_smem;                                          // [STAGES][BK][A_PITCH]
  float* Bs = As + STAGES * BK * A_PITCH;                            // [STAGES][BK][B_PITCH]
  float4* Ss = reinterpret_cast<float4*>(Bs + STAGES * BK * B_PITCH);  // [TM * FN][THREADS]

  const int tid = threadIdx.x;
  long long batch = blockIdx.z;
  long long k0 = 0;
  if (split_tiles) {
    const int tile = blockIdx.z / batches;
    batch = blockIdx.z % batches;
    k0 = (long long)tile * SB_TILE;
    K = min(K - (int)k0, SB_TILE);
    C += (long long)tile * batches * M * N;
  }
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const float* Ab = A + a.offset + batch * a.batch_stride + k0 * a.col_stride;
  const float* Bb = B + b.offset + batch * b.batch_stride + k0 * b.row_stride;

  // Copies: consecutive threads walk the operand's unit-stride axis (coalesced reads; A is
  // transposed on the way, and the pitch BM + 4 keeps those 4-byte writes conflict free).
  SbTileCopy ca = a.col_stride == 1
                      ? sb_tile_copy<A_PITCH, A_LOADS>(Ab + row0 * a.row_stride, a.row_stride, a.col_stride, tid / BK,
                                              THREADS / BK, tid % BK, 0, M - row0, BK)
                      : sb_tile_copy<A_PITCH, A_LOADS>(Ab + row0 * a.row_stride, a.row_stride, a.col_stride, tid % BM, 0,
                                              tid / BM, THREADS / BM, M - row0, BK);
  SbTileCopy cb;
  if constexpr (B_VEC) {
    cb = sb_tile_copy<B_PITCH, B_LOADS>(Bb + col0, 1, b.row_stride, (tid % (BN / 4)) * 4, 0, tid / (BN / 4),
                               THREADS / (BN / 4), N - col0, BK);
  } else {
    cb = b.col_stride == 1 || b.row_stride != 1
             ? sb_tile_copy<B_PITCH, B_LOADS>(Bb + col0 * b.col_stride, b.col_stride, b.row_stride, tid % BN, 0,
                                     tid / BN, THREADS / BN, N - col0, BK)
             : sb_tile_copy<B_PITCH, B_LOADS>(Bb + col0 * b.col_stride, b.col_stride, b.row_stride, tid / BK,
                                     THREADS / BK, tid % BK, 0, N - col0, BK);
  }
  // Queues k-step block `blk` into its ring slot; blocks are issued in order 0, 1, 2, ...
  auto issue = [&](int blk) {
    const int slot = blk % STAGES, k_left = K - blk * BK;
    sb_tile_issue<1, A_LOADS>(ca, As + slot * BK * A_PITCH, k_left);
    sb_tile_issue<BW, B_LOADS>(cb, Bs + slot * BK * B_PITCH, k_left);
    ca.src += ca.advance;
    cb.src += cb.advance;
  };

  const int lane = tid % 32, warp = tid / 32;
  const int a_off = (warp / WARPS_N) * WM + ((lane / 16) * 2 + lane % 2) * 4;
  const int b_off = (warp % WARPS_N) * WN + ((lane / 2) % 8) * 4;

  float p[TM][TN], af[2][TM], bf[2][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) p[i][j] = 0.0f;
  // Reads the fragments of k-step row `as` / `bs` into buffer `buf`.
  auto load_fragments = [&](int buf, const float* as, const float* bs) {
#pragma unroll
    for (int f = 0; f < FM; ++f) sb_load_shared4(as + a_off + f * 16, af[buf] + 4 * f);
#pragma unroll
    for (int g = 0; g < FN; ++g) sb_load_shared4(bs + b_off + g * 32, bf[buf] + 4 * g);
  };
  // One k-step of every chain of this thread: p = fma(A[i, k], B[k, j], p).
  auto fmas = [&](int buf) {
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) p[i][j] = __fmaf_rn(af[buf][i], bf[buf][j], p[i][j]);
  };

  const int k_steps = (K + BK - 1) / BK, full_steps = K / BK;
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < k_steps) issue(st);
    sb_cp_async_commit();
  }
  sb_cp_async_wait<STAGES - 2>();
  __syncthreads();
  load_fragments(0, As, Bs);
  for (int t = 0; t < full_steps; ++t) {
    // Slot (t - 1) % STAGES was last read before the previous block's barrier.
    if (t + STAGES - 1 < k_steps) issue(t + STAGES - 1);
    sb_cp_async_commit();
    const float* as = As + (t % STAGES) * BK * A_PITCH;
    const float* bs = Bs + (t % STAGES) * BK * B_PITCH;
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      if (kk == BK - 1) {
        // Block t + 1 has landed for every thread, and every read of block t is done.
        sb_cp_async_wait<STAGES - 2>();
        __syncthreads();
        const int next = (t + 1) % STAGES;
        load_fragments((kk + 1) % 2, As + next * BK * A_PITCH, Bs + next * BK * B_PITCH);
      } else {
        load_fragments((kk + 1) % 2, as + (kk + 1) * A_PITCH, bs + (kk + 1) * B_PITCH);
      }
      fmas(kk % 2);
    }
    // contract: canonical-sum. A 64-term tile ends before K: s = p_0, then s = s + p_j.
    const int k_end = (t + 1) * BK;
    if (k_end % SB_TILE == 0 && k_end < K) {
      const bool first = k_end == SB_TILE;
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int g = 0; g < FN; ++g) {
          float4* slot = Ss + (i * FN + g) * THREADS + tid;
          float4 v = first ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : *slot;
          v.x = sb_fold_sum(v.x, p[i][4 * g], first);
          v.y = sb_fold_sum(v.y, p[i][4 * g + 1], first);
          v.z = sb_fold_sum(v.z, p[i][4 * g + 2], first);
          v.w = sb_fold_sum(v.w, p[i][4 * g + 3], first);
          *slot = v;
        }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
          // p = +0.0 through an opaque move: a literal zero lets the compiler specialise the
          // next tile's chains and run out of registers (spills).
          asm volatile("mov.b32 %0, 0;" : "=f"(p[i][j]));
    }
  }
  if (full_steps < k_steps) {
    // The partial last k-step block (K % BK k-steps): landed and visible since the last barrier.
    const int slot = full_steps % STAGES;
    for (int kk = 0; kk < K - full_steps * BK; ++kk) {
      load_fragments(0, As + (slot * BK + kk) * A_PITCH, Bs + (slot * BK + kk) * B_PITCH);
      fmas(0);
    }
  }
  sb_cp_async_wait<0>();

  // The last tile's partial p, folded into s when K has more than one tile.
  const bool folded = K > SB_TILE;
  float* Cb = C + batch * (long long)M * N;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int gi = row0 + a_off + (i / 4) * 16 + i % 4;
#pragma unroll
    for (int g = 0; g < FN; ++g) {
      const float4 s = folded ? Ss[(i * FN + g) * THREADS + tid] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      const float sv[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int gj = col0 + b_off + g * 32 + j;
        const float acc = sb_fold_sum(sv[j], p[i][4 * g + j], !folded);
        if (gi < M && gj < N) Cb[(long long)gi * N + gj] = sb_apply_epilogue(ep, c_in, acc, batch, gi, gj);
      }
    }
  }
}

// The warp-tiled configurations (name, BM, BN, FM, FN, BK, STAGES, blocks per SM for
// __launch_bounds__), each with element-copied B (`_e`) and 16-byte-copied B (`_v`); src/gemm.rs
// `GemmLaunch` picks one (NOTES.md has their timings). Dynamic shared memory:
// (STAGES * BK * (BM + 4 + BN + 4) + BM * BN) floats (the ring, then the running sums).
#define SB_GEMM_WARP_KERNEL(name, BM, BN, FM, FN, BK, STAGES, MIN_BLOCKS, B_VEC)                          \
  extern "C" __global__ void __launch_bounds__(32 * (BM / (16 * FM)) * (BN / (32 * FN)), MIN_BLOCKS)      \
      sb_gemm_warp_##name(int M, int N, int K, const float* A, SbMat a, const float* B, SbMat b, float* C, \
                          SbEpilogue ep, const float* c_in, int batches, int split_tiles)                  \
  {                                                                                                        \
    sb_gemm_warp<BM, BN, FM, FN, BK, STAGES, B_VEC>(M, N, K, A, a, B, b, C, ep, c_in, batches,             \
                                                    split_tiles);                                          \
  }
#define SB_GEMM_WARP_CONFIG(name, BM, BN, FM, FN, BK, STAGES, MIN_BLOCKS)      \
  SB_GEMM_WARP_KERNEL(name##_e, BM, BN, FM, FN, BK, STAGES, MIN_BLOCKS, false) \
  SB_GEMM_WARP_KERNEL(name##_v, BM, BN, FM, FN, BK, STAGES, MIN_BLOCKS, true)
SB_GEMM_WARP_CONFIG(128x256, 128, 256, 4, 2, 16, 3, 1)
SB_GEMM_WARP_CONFIG(64x128, 64, 128, 2, 2, 8, 4, 4)
SB_GEMM_WARP_CONFIG(64x64, 64, 64, 2, 1, 8, 4, 4)

// The tile partials of a split-tile launch, `tiles` arrays of `total` = batches * M * N floats
// (tile-major), folded per output as the contract's canonical-sum says (s = p_0, then
// s = s + p_j in tile order), then the epilogue: the bits of the unsplit kernel.
extern "C" __global__ void sb_gemm_fold_tiles(const float* __restrict__ partials, int tiles, long long total,
                                              int M, int N, float* __restrict__ C, SbEpilogue ep,
                                              const float* c_in)
{
  const long long mn = (long long)M * N;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    float s = partials[e];
    for (int t = 1; t < tiles; ++t) s = sb_fold_sum(s, partials[t * total + e], false);
    const long long b = e / mn, r = e % mn;
    C[e] = sb_apply_epilogue(ep, c_in, s, b, r / N, r % N);
  }
}

// ---------------------------------------------------------------------------------------------
// Split-K GEMV (M <= 8). Block (x = column group, y = split, z = batch) owns columns
// j0 = x * CB .. j0 + CB - 1 and tiles y * tps .. min((y + 1) * tps, tiles) - 1; thread
// q = tt * CB + c runs the chains of column j0 + c, tile y * tps + tt, for every row.
// The weights are `float` or bf16 (`unsigned short`, widened exactly: bits << 16).

__device__ __forceinline__ float sb_widen(float w) { return w; }
__device__ __forceinline__ float sb_widen(unsigned short w) { return __uint_as_float((unsigned)w << 16); }

// Stages the rows of A for this block's k range [kb, ke) in shared memory: A[i, k] at
// xs[i * tps * SB_X_PITCH + tile * SB_X_PITCH + k % 64] (the tile-local k of tile `tile` of the
// block); the odd pitch keeps the reads of chains of different tiles in distinct banks.
#define SB_X_PITCH (SB_TILE + 1)
template <int MT>
__device__ __forceinline__ void sb_gemv_stage_a(int M, int kb, int ke, int tps, const float* Ab,
                                                const SbMat& a, float* xs)
{
  const int len = ke - kb;
  for (int e = threadIdx.x; e < MT * len; e += blockDim.x) {
    const int i = e / len, kl = e % len;
    xs[(i * tps + kl / SB_TILE) * SB_X_PITCH + kl % SB_TILE] =
        Ab[min(i, M - 1) * a.row_stride + (kb + kl) * a.col_stride];
  }
}

// Folds the tile partials of this block's columns and stores the outputs. `partials` holds
// [row][tile][CB] either in shared memory (one split) or in the global workspace (all tiles).
template <int MT>
__device__ __forceinline__ void sb_gemv_fold_store(int M, int N, int tiles, int j0, int cb,
                                                   long long batch, const float* partials,
                                                   long long tile_stride, long long row_stride,
                                                   bool from_global, float* C, const SbEpilogue& ep,
                                                   const float* c_in)
{
  for (int e = threadIdx.x; e < MT * cb; e += blockDim.x) {
    const int i = e / cb, c = e % cb, j = j0 + c;
    if (i >= M || j >= N) continue;
    const float* pp = partials + i * row_stride + c;
    float s = 0.0f;
    for (int t = 0; t < tiles; ++t) {
      const float v = from_global ? __ldcg(pp + t * tile_stride) : pp[t * tile_stride];
      s = sb_fold_sum(s, v, t == 0);
    }
    C[(batch * M + i) * (long long)N + j] = sb_apply_epilogue(ep, c_in, s, batch, i, j);
  }
}

// The chains of one thread: p[i] = fma(A[i, k], W(k, j), p[i]) over its tile of `len` k-steps,
// k in order. A full tile first gathers its 64 weights into registers with `fill` (all loads in
// flight at once); a partial last tile reads weight kk with `at(kk)`. xs holds the tile's A
// values at xs[i * x_row + kk].
template <int MT, typename Fill, typename At>
__device__ __forceinline__ void sb_gemv_chain(int len, const float* xs, int x_row, Fill fill, At at, float* p)
{
  if (len == SB_TILE) {
    float w[SB_TILE];
    fill(w);
#pragma unroll
    for (int kk = 0; kk < SB_TILE; ++kk)
#pragma unroll
      for (int i = 0; i < MT; ++i) p[i] = __fmaf_rn(xs[i * x_row + kk], w[kk], p[i]);
  } else {
    for (int kk = 0; kk < len; ++kk) {
      const float w = at(kk);
#pragma unroll
      for (int i = 0; i < MT; ++i) p[i] = __fmaf_rn(xs[i * x_row + kk], w, p[i]);
    }
  }
}

// 64 staged weights (16-byte aligned shared memory) widened to f32 with 16-byte reads.
__device__ __forceinline__ void sb_widen_tile(const float* src, float* w)
{
#pragma unroll
  for (int v = 0; v < SB_TILE / 4; ++v) {
    const float4 q = reinterpret_cast<const float4*>(src)[v];
    w[4 * v] = q.x; w[4 * v + 1] = q.y; w[4 * v + 2] = q.z; w[4 * v + 3] = q.w;
  }
}
__device__ __forceinline__ void sb_widen_tile(const unsigned short* src, float* w)
{
#pragma unroll
  for (int v = 0; v < SB_TILE / 8; ++v) {
    const uint4 q = reinterpret_cast<const uint4*>(src)[v];
    const unsigned u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      w[8 * v + 2 * h] = __uint_as_float(u[h] << 16);
      w[8 * v + 2 * h + 1] = __uint_as_float(u[h] & 0xffff0000u);
    }
  }
}

// How a GEMV block reads its weights B(k, j), never the order:
// SB_GEMV_NK: unit stride along k (`[n, k]` weights), 16-byte aligned columns, K a multiple of
//   16 bytes of weights. The block first copies its [CB columns x tiles] weights into shared
//   memory with coalesced 16-byte cp.async (each chain's 64 weights contiguous, padded by 16
//   bytes so that the 16-byte reads of 8 neighbouring chains hit distinct banks).
// SB_GEMV_KN: unit stride along n (`[k, n]` weights), 16-byte aligned rows, N a multiple of 16
//   bytes: the block copies its [k x CB] slab row by row (rows of tile tt at
//   (tt * 65 + kk) * CB, so the 32 chains of a warp read 32 distinct banks).
// SB_GEMV_DIRECT: any strides; each chain reads its weights from global memory.
// SB_GEMV_KN4: `[k, n]` weights as for SB_GEMV_KN, read directly from global memory with one
//   16-byte (f32) or 8-byte (bf16) load per k-step for 4 neighbouring columns, each thread
//   running the 4 chains (wide N, where staging caps the blocks per SM and serializes a
//   block's loads and arithmetic).
// Staging issues every copy of the block before the first use (many bytes in flight).
#define SB_GEMV_DIRECT 0
#define SB_GEMV_NK 1
#define SB_GEMV_KN 2
#define SB_GEMV_KN4 3

// Four consecutive weights widened to f32 (16-byte aligned f32, 8-byte aligned bf16).
__device__ __forceinline__ void sb_load4(const float* src, float* w)
{
  const float4 q = __ldg(reinterpret_cast<const float4*>(src));
  w[0] = q.x; w[1] = q.y; w[2] = q.z; w[3] = q.w;
}
__device__ __forceinline__ void sb_load4(const unsigned short* src, float* w)
{
  const uint2 q = __ldg(reinterpret_cast<const uint2*>(src));
  w[0] = __uint_as_float(q.x << 16); w[1] = __uint_as_float(q.x & 0xffff0000u);
  w[2] = __uint_as_float(q.y << 16); w[3] = __uint_as_float(q.y & 0xffff0000u);
}

// The 4 chains of columns j .. j + 3 over a tile of `len` k-steps from `wq` (row stride rs):
// p[i][v] = fma(A[i, k], W(k, j + v), p[i][v]), k in order; loads run 8 k-steps ahead.
template <int MT, typename W>
__device__ __forceinline__ void sb_gemv_chain4(int len, const float* xs, int x_row, const W* wq,
                                               long long rs, float (*p)[4])
{
  constexpr int AHEAD = 8;
  for (int k0 = 0; k0 < len; k0 += AHEAD) {
    float w[AHEAD][4];
#pragma unroll
    for (int c = 0; c < AHEAD; ++c)
      if (k0 + c < len) sb_load4(wq + (k0 + c) * rs, w[c]);
#pragma unroll
    for (int c = 0; c < AHEAD; ++c) {
      if (k0 + c < len) {
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int v = 0; v < 4; ++v) p[i][v] = __fmaf_rn(xs[i * x_row + k0 + c], w[c][v], p[i][v]);
      }
    }
  }
}

template <int MT, typename W, int LAYOUT>
__device__ __forceinline__ void sb_gemv(int M, int N, int K, int cb, int tps, const float* __restrict__ A,
                                        SbMat a, const W* __restrict__ B, SbMat b, float* __restrict__ C,
                                        SbEpilogue ep, const float* c_in, float* workspace,
                                        unsigned* tickets)
{
  extern __shared__ __align__(16) unsigned char sb_gemv_smem[];
  constexpr int W_PITCH = SB_TILE + 16 / (int)sizeof(W);  // elements per NK-staged chain
  constexpr int PER16 = 16 / (int)sizeof(W);               // weights per 16-byte copy
  const int tiles = (K + SB_TILE - 1) / SB_TILE;
  const int splits = gridDim.y;
  const long long batch = blockIdx.z;
  const int j0 = blockIdx.x * cb;
  const int t_begin = blockIdx.y * tps, t_end = min(t_begin + tps, tiles);
  const int kb = t_begin * SB_TILE, ke = min(t_end * SB_TILE, K);
  const float* Ab = A + a.offset + batch * a.batch_stride;
  const W* Bb = B + b.offset + batch * b.batch_stride;

  // Shared memory: staged weights (NK: [tps * cb][W_PITCH]; KN: [tps][65][cb]), partials
  // [MT][tps][cb], A rows (sb_gemv_stage_a).
  const int staged_elems = LAYOUT == SB_GEMV_NK ? tps * cb * W_PITCH
                           : LAYOUT == SB_GEMV_KN ? tps * (SB_TILE + 1) * cb : 0;
  W* ws = reinterpret_cast<W*>(sb_gemv_smem);
  float* part = reinterpret_cast<float*>(sb_gemv_smem + staged_elems * sizeof(W));
  float* xs = part + MT * tps * cb;
  sb_gemv_stage_a<MT>(M, kb, ke, tps, Ab, a, xs);
  if constexpr (LAYOUT == SB_GEMV_NK) {
    constexpr int VECS = SB_TILE / PER16;  // 16-byte pieces per chain
    for (int e = threadIdx.x; e < cb * tps * VECS; e += blockDim.x) {
      const int v = e % VECS, chain = e / VECS;
      const int c = chain / tps, tt = chain % tps;  // consecutive threads: one column's k run
      const int j = j0 + c, k = (t_begin + tt) * SB_TILE + v * PER16;
      const bool ok = j < N && k < ke;
      const W* src = ok ? Bb + (long long)j * b.col_stride + k : Bb;
      sb_cp_async16(ws + (tt * cb + c) * W_PITCH + v * PER16, src, ok ? 16 : 0);
    }
  } else if constexpr (LAYOUT == SB_GEMV_KN) {
    const int row_vecs = cb / PER16;
    for (int e = threadIdx.x; e < (ke - kb) * row_vecs; e += blockDim.x) {
      const int v = e % row_vecs, r = e / row_vecs;
      const int j = j0 + v * PER16;
      const bool ok = j < N;
      const W* src = ok ? Bb + (long long)(kb + r) * b.row_stride + j : Bb;
      sb_cp_async16(ws + ((r / SB_TILE) * (SB_TILE + 1) + r % SB_TILE) * cb + v * PER16, src, ok ? 16 : 0);
    }
  }
  if constexpr (LAYOUT == SB_GEMV_NK || LAYOUT == SB_GEMV_KN) {
    sb_cp_async_commit();
    sb_cp_async_wait<0>();
  }
  __syncthreads();

  // A thread runs the chains of one column (4 neighbouring columns for SB_GEMV_KN4) over one
  // tile.
  constexpr int WIDTH = LAYOUT == SB_GEMV_KN4 ? 4 : 1;
  const int lanes = cb / WIDTH;
  const int q = threadIdx.x, tt = q / lanes, c = (q % lanes) * WIDTH;
  const int j = j0 + c;
  if constexpr (LAYOUT == SB_GEMV_KN4) {
    if (tt < t_end - t_begin) {
      const int k0 = (t_begin + tt) * SB_TILE, len = min(SB_TILE, K - k0);
      float p[MT][4];
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int v = 0; v < 4; ++v) p[i][v] = 0.0f;
      if (j < N)
        sb_gemv_chain4<MT>(len, xs + tt * SB_X_PITCH, tps * SB_X_PITCH,
                           Bb + (long long)k0 * b.row_stride + j, b.row_stride, p);
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int v = 0; v < 4; ++v) part[(i * tps + tt) * cb + c + v] = p[i][v];
    }
  } else if (tt < t_end - t_begin) {
    const int k0 = (t_begin + tt) * SB_TILE, len = min(SB_TILE, K - k0);
    const float* xt = xs + tt * SB_X_PITCH;
    const int x_row = tps * SB_X_PITCH;
    float p[MT];
#pragma unroll
    for (int i = 0; i < MT; ++i) p[i] = 0.0f;
    if (j < N) {
      if constexpr (LAYOUT == SB_GEMV_NK) {
        const W* wq = ws + q * W_PITCH;
        sb_gemv_chain<MT>(
            len, xt, x_row, [&](float* w) { sb_widen_tile(wq, w); },
            [&](int kk) { return sb_widen(wq[kk]); }, p);
      } else if constexpr (LAYOUT == SB_GEMV_KN) {
        const W* wq = ws + tt * (SB_TILE + 1) * cb + c;
        sb_gemv_chain<MT>(
            len, xt, x_row,
            [&](float* w) {
#pragma unroll
              for (int kk = 0; kk < SB_TILE; ++kk) w[kk] = sb_widen(wq[kk * cb]);
            },
            [&](int kk) { return sb_widen(wq[kk * cb]); }, p);
      } else {
        const W* wq = Bb + (long long)k0 * b.row_stride + (long long)j * b.col_stride;
        const long long rs = b.row_stride;
        sb_gemv_chain<MT>(
            len, xt, x_row,
            [&](float* w) {
#pragma unroll
              for (int kk = 0; kk < SB_TILE; ++kk) w[kk] = sb_widen(wq[kk * rs]);
            },
            [&](int kk) { return sb_widen(wq[kk * rs]); }, p);
      }
    }
#pragma unroll
    for (int i = 0; i < MT; ++i) part[(i * tps + tt) * cb + c] = p[i];
  }
  __syncthreads();

  if (splits == 1) {
    sb_gemv_fold_store<MT>(M, N, tiles, j0, cb, batch, part, cb, (long long)tps * cb, false, C, ep, c_in);
    return;
  }
  // Several splits: publish this block's partials, then the last block of this column group
  // (ticket) folds every tile in order.
  const long long per_tile = (long long)gridDim.z * M * N;
  for (int e = threadIdx.x; e < MT * (t_end - t_begin) * cb; e += blockDim.x) {
    const int i = e / ((t_end - t_begin) * cb), r = e % ((t_end - t_begin) * cb);
    const int t = r / cb, cc = r % cb;
    if (i < M && j0 + cc < N)
      workspace[(t_begin + t) * per_tile + (batch * M + i) * (long long)N + j0 + cc] =
          part[(i * tps + t) * cb + cc];
  }
  __threadfence();
  __syncthreads();
  __shared__ bool sb_gemv_last;
  if (threadIdx.x == 0) {
    unsigned* ticket = tickets + batch * gridDim.x + blockIdx.x;
    const unsigned done = atomicAdd(ticket, 1u);
    sb_gemv_last = done == (unsigned)splits - 1;
    if (sb_gemv_last) *ticket = 0u;  // ready for the next launch
  }
  __syncthreads();
  if (!sb_gemv_last) return;
  __threadfence();
  sb_gemv_fold_store<MT>(M, N, tiles, j0, cb, batch, workspace + batch * M * (long long)N + j0,
                         per_tile, N, true, C, ep, c_in);
}

// Instantiated for MT = 1, 2, 4, 8 rows (MT >= M; rows past M - 1 recompute row M - 1 and are
// not stored), f32 or bf16 weights, each weight layout.
#define SB_GEMV_KERNEL(name, W, LAYOUT, MT)                                                         \
  extern "C" __global__ void __launch_bounds__(128) sb_gemv_##name##_m##MT(                         \
      int M, int N, int K, int cb, int tps, const float* A, SbMat a, const W* B, SbMat b, float* C, \
      SbEpilogue ep, const float* c_in, float* workspace, unsigned* tickets)                        \
  {                                                                                                  \
    sb_gemv<MT, W, LAYOUT>(M, N, K, cb, tps, A, a, B, b, C, ep, c_in, workspace, tickets);          \
  }
#define SB_GEMV_KERNELS(name, W, LAYOUT) \
  SB_GEMV_KERNEL(name, W, LAYOUT, 1)     \
  SB_GEMV_KERNEL(name, W, LAYOUT, 2)     \
  SB_GEMV_KERNEL(name, W, LAYOUT, 4)     \
  SB_GEMV_KERNEL(name, W, LAYOUT, 8)
SB_GEMV_KERNELS(direct_f32, float, SB_GEMV_DIRECT)
SB_GEMV_KERNELS(nk_f32, float, SB_GEMV_NK)
SB_GEMV_KERNELS(kn_f32, float, SB_GEMV_KN)
SB_GEMV_KERNELS(kn4_f32, float, SB_GEMV_KN4)
SB_GEMV_KERNELS(direct_bf16, unsigned short, SB_GEMV_DIRECT)
SB_GEMV_KERNELS(nk_bf16, unsigned short, SB_GEMV_NK)
SB_GEMV_KERNELS(kn_bf16, unsigned short, SB_GEMV_KN)
SB_GEMV_KERNELS(kn4_bf16, unsigned short, SB_GEMV_KN4)
