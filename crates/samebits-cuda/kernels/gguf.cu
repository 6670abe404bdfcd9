// Products with GGUF block-quantized weights (samebits::MatMulGguf) for few activation rows
// (decode), the gather of dequantized rows (GatherGguf) and the dequantized transpose that
// the prefill GEMM takes.
//
// y[m, n] = canonical dot (contract: canonical-sum, gemm) of the dequantized weight row n with
// activation row m: tiles of 64 consecutive k, each a chain p = fma(w_k, x_k, p) from +0.0 in k
// order, the tile partials folded s = p_0, s = s + p_j. Weights are dequantized on the fly by
// the one device definition per format, SbGgmlBlock of kernels/ggml.cu (the formulas of
// docs/gguf.md, tested against samebits-ggml); the kernels are instantiated for every type of
// the generated SB_GGML_DEVICE_TYPES.
//
// sb_gguf_products: one thread per (weight row, 64-term tile) chain, a block owning whole
// rows; the block folds each row's partials in tile order, so the bits are those of
// samebits_kernels::dot_q_f32 whatever the launch. Optional fusions (src/executor/fusion.rs), each
// the same operations as the steps it replaces: the activation row is first RMS-normalized
// (contract: normalization; every block recomputes the row's statistic in the canonical order),
// up to three matrices share one normalized row, and each finished dot takes a residual add,
// an interleaved rotary embedding (contract: attention; the pair (2p, 2p + 1) of a head is two
// neighbouring rows of one block) or, for a gate and an up matrix, the SiLU gate
// (g * sigmoid(g)) * u.

// p after the chain over weights k0 .. k_end - 1 of `row` (k0 a multiple of 64, and of the block
// size or inside one block; k_end a multiple of the block size or inside the same block) against
// x, its elements in order.
template <int TYPE>
__device__ __forceinline__ float sb_gguf_tile(const unsigned char* row, const float* x, int k0,
                                              int k_end, float p)
{
  using Block = SbGgmlBlock<TYPE>;
  if constexpr (Block::ELEMS <= SB_TILE) {
    for (int b = k0 / Block::ELEMS; b < k_end / Block::ELEMS; ++b) {
      const Block block(row + (long long)Block::BYTES * b);
      const float* xb = x + Block::ELEMS * b;
#pragma unroll
      for (int i = 0; i < Block::ELEMS; ++i) p = __fmaf_rn(block.value(i), xb[i], p);
    }
  } else {
    // A tile inside a super-block (the k-quants' 256 elements): its elements in order.
    for (int k = k0; k < k_end;) {
      const int b = k / Block::ELEMS;
      const Block block(row + (long long)Block::BYTES * b);
      for (const int end = min(k_end, (b + 1) * Block::ELEMS); k < end; ++k)
        p = __fmaf_rn(block.value(k - b * Block::ELEMS), x[k], p);
    }
  }
  return p;
}

// sb_gguf_tile for a weight type known at run time (its ggml id, SB_GGML_*), from p = +0.0;
// NaN for a type the device does not dequantize (the host never launches one).
__device__ __forceinline__ float sb_gguf_tile_of(int type, const unsigned char* row, const float* x,
                                                 int k0, int k_end)
{
#define SB_GGUF_TILE_CASE(name, TYPE) \
  case TYPE: return sb_gguf_tile<TYPE>(row, x, k0, k_end, 0.0f);
  switch (type) {
    SB_GGML_DEVICE_TYPES(SB_GGUF_TILE_CASE)
    default: return sb_nanf();
  }
#undef SB_GGUF_TILE_CASE
}

// Bytes of the blocks of a row that hold its first k weights (rounded up to whole blocks).
template <int TYPE>
__device__ __forceinline__ long long sb_gguf_bytes(int k)
{
  using Block = SbGgmlBlock<TYPE>;
  return (long long)Block::BYTES * ((k + Block::ELEMS - 1) / Block::ELEMS);
}

// SbGgufMatrix / SbGgufMatrices (one matrix of a products launch) and SB_GGUF_PITCH are in the
// device ABI (src/gguf.rs, src/device_abi.rs).

// The matrix of block row `g` of a products launch and, in `n`, its row there. Block rows: the
// rows of matrices 0, 1, .. one after another, or, when `gate`, the rows n of matrix 0 (gate)
// and 1 (up) interleaved (block row 2n + i is row n of matrix i). The matrix is selected by
// comparisons: the parameter struct is not indexed at run time.
__device__ __forceinline__ const SbGgufMatrix& sb_gguf_locate(const SbGgufMatrices& mats,
                                                              int count, int gate, int g, int& n)
{
  if (gate) {
    n = g >> 1;
    return (g & 1) ? mats.m[1] : mats.m[0];
  }
  n = g;
  if (count < 2 || n < mats.m[0].rows) return mats.m[0];
  n -= mats.m[0].rows;
  if (count < 3 || n < mats.m[1].rows) return mats.m[1];
  n -= mats.m[1].rows;
  return mats.m[2];
}

// The block rows of a products launch.
__device__ __forceinline__ int sb_gguf_total_rows(const SbGgufMatrices& mats, int count)
{
  return mats.m[0].rows + (count > 1 ? mats.m[1].rows : 0) + (count > 2 ? mats.m[2].rows : 0);
}

// Stages the activation row xr (cols values) into xs, element k at xs[k + 4 * (k / 64)] (tiles
// of SB_GGUF_PITCH floats), and with `norm_scale` RMS-normalizes it there (contract:
// normalization): ms = canonical_dot(x, x) / cols, rrms = 1 / sqrt(ms + eps),
// x_k = (x_k * rrms) * scale_k. `scratch` holds one float per 64-term tile. Every thread of the
// block calls it; the row is complete on return.
__device__ __forceinline__ void sb_gguf_stage_row(const float* xr, int cols,
                                                  const float* norm_scale, float eps, float* xs,
                                                  float* scratch)
{
  __shared__ float rrms;
  const int tiles = (cols + SB_TILE - 1) / SB_TILE;
  if (norm_scale)
    for (int k = 32 * threadIdx.x; k < cols; k += 32 * blockDim.x) sb_prefetch_l1(norm_scale + k);
  for (int k = threadIdx.x; k < cols; k += blockDim.x) xs[k + 4 * (k / SB_TILE)] = xr[k];
  __syncthreads();
  if (!norm_scale) return;
  for (int t = threadIdx.x; t < tiles; t += blockDim.x) {
    const float* xt = xs + t * SB_GGUF_PITCH;
    const int len = min(SB_TILE, cols - t * SB_TILE);
    float p = 0.0f;
    for (int i = 0; i < len; ++i) p = __fmaf_rn(xt[i], xt[i], p);
    scratch[t] = p;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int t = 0; t < tiles; ++t) s = sb_fold_sum(s, scratch[t], t == 0);
    rrms = 1.0f / sb_sqrtf(s / (float)cols + eps);
  }
  __syncthreads();
  const float r = rrms;
  for (int k = threadIdx.x; k < cols; k += blockDim.x) {
    float* xk = xs + k + 4 * (k / SB_TILE);
    *xk = (*xk * r) * norm_scale[k];
  }
  __syncthreads();
}

// A hint, no arithmetic: the added terms and the rotary rows of the block's rows start their
// trip to L1.
__device__ __forceinline__ void sb_gguf_prefetch_epilogue(const SbGgufMatrices& mats, int count,
                                                          int gate, int row0, int rows_per_block,
                                                          long long mi, const float* cos_rows,
                                                          const float* sin_rows, int width)
{
  const int total = sb_gguf_total_rows(mats, count);
  for (int local = threadIdx.x; local < rows_per_block; local += blockDim.x) {
    const int g = row0 + local;
    if (g >= total) continue;
    int n;
    const SbGgufMatrix& mat = sb_gguf_locate(mats, count, gate, g, n);
    if (mat.add) sb_prefetch_l1(mat.add + mi * mat.rows + n);
    if (mat.rot > 0) {
      sb_prefetch_l1(cos_rows + mi * width);
      sb_prefetch_l1(sin_rows + mi * width);
    }
  }
}

// Writes the finished dots[local] of block rows row0 + local of activation row mi: each plain,
// plus its added term, rotated (an interleaved rotary embedding; contract: attention, the pair
// (2p, 2p + 1) of a head is two neighbouring block rows) or, with `gate`, the SiLU gate
// (g * sigmoid(g)) * u of a gate / up pair into matrix 0's y. The dots are complete on entry.
__device__ __forceinline__ void sb_gguf_finish(const SbGgufMatrices& mats, int count, int gate,
                                               int row0, int rows_per_block, long long mi,
                                               const float* dots, const float* cos_rows,
                                               const float* sin_rows, int width)
{
  const int total = sb_gguf_total_rows(mats, count);
  for (int local = threadIdx.x; local < rows_per_block; local += blockDim.x) {
    const int g = row0 + local;
    if (g >= total) continue;
    int n;
    const SbGgufMatrix& mat = sb_gguf_locate(mats, count, gate, g, n);
    float* y = mat.y + mi * mat.rows;
    const float v = dots[local];
    if (gate) {
      // contract: activation (sigmoid), arithmetic: Sigmoid, Mul, Mul.
      if ((g & 1) == 0) y[n] = (v * sb_sigmoidf(v)) * dots[local + 1];
      continue;
    }
    const int e = mat.head_size > 0 ? n % mat.head_size : 0;
    if (e < mat.rot) {
      // contract: attention (RotaryEmbedding, interleaved): pair p = (x_2p, x_2p+1).
      const float* cs_row = cos_rows + mi * width;
      const float* sn_row = sin_rows + mi * width;
      const int p = e >> 1;
      const float cs = cs_row[p], sn = sn_row[p];
      const float x1 = dots[local & ~1], x2 = dots[local | 1];
      y[n] = (e & 1) ? (sn * x1) + (cs * x2) : (cs * x1) - (sn * x2);
    } else {
      y[n] = mat.add ? v + mat.add[mi * mat.rows + n] : v;
    }
  }
}

// Grid (ceil(block rows / rows_per_block), M); block rows as sb_gguf_locate. rows_per_block is
// even, so a rotary pair or a gate / up pair never straddles blocks (every matrix has an even
// number of rows when rotary or gate is on). With `norm_scale`, the activation row is first
// RMS-normalized (sb_gguf_stage_row). Dynamic shared memory, in floats: tiles * SB_GGUF_PITCH
// (the row) + rows_per_block * tiles (partials) + rows_per_block (dots).
template <int TYPE>
__device__ __forceinline__ void sb_gguf_products(SbGgufMatrices mats, int count, int gate,
                                                 long long row_bytes, int cols, const float* x,
                                                 const float* norm_scale, float eps,
                                                 const float* cos_rows, const float* sin_rows,
                                                 int width, int rows_per_block)
{
  extern __shared__ float smem[];
  const int tiles = (cols + SB_TILE - 1) / SB_TILE;
  float* xs = smem;
  float* partials = xs + tiles * SB_GGUF_PITCH;
  float* dots = partials + rows_per_block * tiles;
  const long long mi = blockIdx.y;
  const int total = sb_gguf_total_rows(mats, count);
  const int row0 = blockIdx.x * rows_per_block;
  const int items = rows_per_block * tiles;
  // A hint, no arithmetic: the weight tiles (which do not depend on the activations) start
  // their trip to L1 now, so their memory latency overlaps the row's load and statistic.
  for (int item = threadIdx.x; item < items; item += blockDim.x) {
    const int local = item / tiles, t = item - local * tiles;
    const int g = row0 + local;
    if (g >= total) continue;
    int n;
    const unsigned char* row = sb_gguf_locate(mats, count, gate, g, n).w + n * row_bytes;
    const unsigned char* from =
        row + (long long)SbGgmlBlock<TYPE>::BYTES * (t * SB_TILE / SbGgmlBlock<TYPE>::ELEMS);
    sb_prefetch_l1(from);
    sb_prefetch_l1(row + sb_gguf_bytes<TYPE>(min(t * SB_TILE + SB_TILE, cols)) - 1);
  }
  sb_gguf_prefetch_epilogue(mats, count, gate, row0, rows_per_block, mi, cos_rows, sin_rows,
                            width);
  sb_gguf_stage_row(x + mi * cols, cols, norm_scale, eps, xs, partials);

  for (int item = threadIdx.x; item < items; item += blockDim.x) {
    const int local = item / tiles, t = item - local * tiles;
    const int g = row0 + local;
    if (g >= total) continue;
    int n;
    const unsigned char* row = sb_gguf_locate(mats, count, gate, g, n).w + n * row_bytes;
    // xs + 4t: element k of tile t sits at xs[k + 4t] (sb_gguf_tile indexes x by k).
    partials[item] = sb_gguf_tile<TYPE>(row, xs + 4 * t, t * SB_TILE,
                                        min(t * SB_TILE + SB_TILE, cols), 0.0f);
  }
  __syncthreads();
  for (int local = threadIdx.x; local < rows_per_block; local += blockDim.x) {
    float s = 0.0f;
    for (int t = 0; t < tiles; ++t) s = sb_fold_sum(s, partials[local * tiles + t], t == 0);
    dots[local] = s;
  }
  __syncthreads();
  sb_gguf_finish(mats, count, gate, row0, rows_per_block, mi, dots, cos_rows, sin_rows, width);
}

#define SB_GGUF_PRODUCTS_KERNEL(name, TYPE)                                                   \
  extern "C" __global__ void sb_gguf_products_##name(                                        \
      SbGgufMatrices mats, int count, int gate, long long row_bytes, int cols, const float* x, \
      const float* norm_scale, float eps, const float* cos_rows, const float* sin_rows,        \
      int width, int rows_per_block)                                                           \
  {                                                                                            \
    sb_gguf_products<TYPE>(mats, count, gate, row_bytes, cols, x, norm_scale, eps, cos_rows,   \
                           sin_rows, width, rows_per_block);                                   \
  }
SB_GGML_DEVICE_TYPES(SB_GGUF_PRODUCTS_KERNEL)

// Element k of a weight row, dequantized (samebits::GatherGguf, the dequantized transpose).
template <int TYPE>
__device__ __forceinline__ float sb_gguf_value(const unsigned char* row, int k)
{
  using Block = SbGgmlBlock<TYPE>;
  return Block(row + (long long)Block::BYTES * (k / Block::ELEMS)).value(k % Block::ELEMS);
}

// y[i, k] = dequantized element k of weight row ids[i] (negative ids count from the end; the
// host checked that every id is in range). Grid-stride over the output elements.
template <int TYPE>
__device__ __forceinline__ void sb_gguf_gather(const unsigned char* w, long long row_bytes,
                                               int rows, int cols, const long long* ids,
                                               long long count, float* y)
{
  for (long long n = blockIdx.x * (long long)blockDim.x + threadIdx.x; n < count;
       n += (long long)gridDim.x * blockDim.x) {
    long long id = ids[n / cols];
    if (id < 0) id += rows;
    y[n] = sb_gguf_value<TYPE>(w + id * row_bytes, (int)(n % cols));
  }
}

#define SB_GGUF_GATHER_KERNEL(name, TYPE)                                                     \
  extern "C" __global__ void sb_gguf_gather_##name(const unsigned char* w, long long row_bytes, \
                                                   int rows, int cols, const long long* ids,   \
                                                   long long count, float* y)                  \
  {                                                                                            \
    sb_gguf_gather<TYPE>(w, row_bytes, rows, cols, ids, count, y);                             \
  }
SB_GGML_DEVICE_TYPES(SB_GGUF_GATHER_KERNEL)

// wt[k, n] = dequantized element k of weight row n: the whole [rows, cols] matrix as the
// row-major [cols, rows] f32 operand B of a GEMM (prefill: many activation rows per weight).
// Thread per element, consecutive threads along a weight row.
template <int TYPE>
__device__ __forceinline__ void sb_gguf_dequantize_t(const unsigned char* w, long long row_bytes,
                                                     int rows, int cols, float* wt)
{
  for (long long n = blockIdx.x * (long long)blockDim.x + threadIdx.x; n < (long long)rows * cols;
       n += (long long)gridDim.x * blockDim.x) {
    const long long r = n / cols;
    const int k = (int)(n % cols);
    wt[(long long)k * rows + r] = sb_gguf_value<TYPE>(w + r * row_bytes, k);
  }
}

#define SB_GGUF_DEQUANTIZE_KERNEL(name, TYPE)                                                 \
  extern "C" __global__ void sb_gguf_dequantize_t_##name(const unsigned char* w,              \
                                                         long long row_bytes, int rows,       \
                                                         int cols, float* wt)                 \
  {                                                                                            \
    sb_gguf_dequantize_t<TYPE>(w, row_bytes, rows, cols, wt);                                  \
  }
SB_GGML_DEVICE_TYPES(SB_GGUF_DEQUANTIZE_KERNEL)
