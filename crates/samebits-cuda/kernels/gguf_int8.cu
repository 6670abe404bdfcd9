// The exact-integer products of GGUF weights (operation set reproducible-int8; docs/contract.md,
// section int8-products), the device form of samebits-kernels' int8_dot
// (src/quant/panel/int8.rs), for any number of activation rows. Built on kernels/gguf.cu's
// products launch: the same block rows, row staging (and RMS normalization), and epilogue
// (residual add, interleaved rotary, SiLU gate), so a fused step computes the same operations
// as the steps it replaces. Instantiated for the types of the generated SB_GGML_INT8_TYPES
// (samebits-kernels' INT8_TYPES).
//
// Per activation row (the staged, possibly normalized, row) and 32-element block b:
//   1. a = max |x_k|, d_x = a / 127, q_k = rint(x_k / d_x) (IEEE division, ties to even; 0 when
//      d_x = 0), S = sum q_k, s_x = d_x * S: one thread per block.
//   2. per (weight row, block) item, i = sum c_k q_k over the weight's integer codes
//      (SbGgmlBlock::code_word): exact integer arithmetic, so dp4a in any grouping gives
//      int8_dot's i.
//   3. per weight row, one thread chains the blocks in order, p = fma(d_w * d_x, i, p), then for
//      Q4_1 p = fma(m_w, s_x, p), from +0.0 per tile of SB_TILE blocks, the tile partials folded
//      s = p_0, s = s + p_j (sb_fold_sum): contract canonical-sum over the blocks.
// A row holding a NaN or an infinity gives NaN in every output of that row.

// Rule 1 for the block of 32 staged values `x`: writes the codes to q, returns d_x and sets S.
__device__ __forceinline__ float sb_int8_quantize_block(const float* x, signed char* q, int& sum)
{
  float a = 0.0f;
  for (int k = 0; k < 32; ++k) a = fmaxf(a, fabsf(x[k]));
  const float d = __fdiv_rn(a, 127.0f);
  int s = 0;
  for (int k = 0; k < 32; ++k) {
    // x / d lies in [-127, 127] up to one rounding; the clamp keeps a non-finite row (NaN
    // outputs anyway) in range.
    const int c = d == 0.0f ? 0 : (int)fminf(fmaxf(rintf(__fdiv_rn(x[k], d)), -127.0f), 127.0f);
    q[k] = (signed char)c;
    s += c;
  }
  sum = s;
  return d;
}

// Grid (ceil(block rows / rows_per_block), M), block rows as kernels/gguf.cu's sb_gguf_locate.
// Dynamic shared memory: tiles * SB_GGUF_PITCH floats (the row), per block of the row d_x and
// s_x (2 * blocks floats), per item d_w * d_x, i (as a float, exact) and m_w (3 * rows_per_block *
// blocks floats), rows_per_block floats (dots), then the codes (cols bytes).
template <int TYPE>
__device__ __forceinline__ void sb_gguf_int8_products(SbGgufMatrices mats, int count, int gate,
                                                      long long row_bytes, int cols,
                                                      const float* x, const float* norm_scale,
                                                      float eps, const float* cos_rows,
                                                      const float* sin_rows, int width,
                                                      int rows_per_block)
{
  using Block = SbGgmlBlock<TYPE>;
  static_assert(Block::ELEMS == 32, "the exact-integer products take blocks of 32 codes");
  extern __shared__ float smem[];
  const int tiles = (cols + SB_TILE - 1) / SB_TILE;
  const int blocks = cols / 32;
  const int items = rows_per_block * blocks;
  float* xs = smem;
  float* dx = xs + tiles * SB_GGUF_PITCH;
  float* sx = dx + blocks;
  float* scaled = sx + blocks;
  float* ints = scaled + items;
  float* mins = ints + items;
  float* dots = mins + items;
  signed char* q = reinterpret_cast<signed char*>(dots + rows_per_block);
  const long long mi = blockIdx.y;
  const int total = sb_gguf_total_rows(mats, count);
  const int row0 = blockIdx.x * rows_per_block;
  // A hint, no arithmetic: the weight blocks start their trip to L1.
  for (int item = threadIdx.x; item < items; item += blockDim.x) {
    const int local = item / blocks, b = item - local * blocks;
    const int g = row0 + local;
    if (g >= total) continue;
    int n;
    const unsigned char* row = sb_gguf_locate(mats, count, gate, g, n).w + n * row_bytes;
    sb_prefetch_l1(row + (long long)Block::BYTES * b);
  }
  sb_gguf_prefetch_epilogue(mats, count, gate, row0, rows_per_block, mi, cos_rows, sin_rows,
                            width);
  sb_gguf_stage_row(x + mi * cols, cols, norm_scale, eps, xs, scaled);

  // Rule 1, a thread per block; the row's finiteness from every thread at the barrier.
  bool finite = true;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) {
    // Block b lies inside tile b / 2 (32 divides 64), so its staged values are contiguous.
    const float* xb = xs + 32 * b + 4 * (b >> 1);
    for (int k = 0; k < 32; ++k) finite = finite && isfinite(xb[k]);
    int s;
    const float d = sb_int8_quantize_block(xb, q + 32 * b, s);
    dx[b] = d;
    sx[b] = __fmul_rn(d, (float)s);
  }
  const bool all_finite = __syncthreads_and(finite);

  // Rule 2, a thread per (weight row, block).
  const int* qw = reinterpret_cast<const int*>(q);
  for (int item = threadIdx.x; item < items; item += blockDim.x) {
    const int local = item / blocks, b = item - local * blocks;
    const int g = row0 + local;
    if (g >= total) continue;
    int n;
    const unsigned char* row = sb_gguf_locate(mats, count, gate, g, n).w + n * row_bytes;
    const Block block(row + (long long)Block::BYTES * b);
    int i = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) i = __dp4a((int)block.code_word(j), qw[8 * b + j], i);
    scaled[item] = __fmul_rn(block.d, dx[b]);
    ints[item] = (float)i;  // |i| <= 32 * 255 * 127 < 2^24: exact
    if constexpr (TYPE == SB_GGML_Q4_1) mins[item] = block.m;
  }
  __syncthreads();

  // Rule 3, a thread per weight row.
  for (int local = threadIdx.x; local < rows_per_block; local += blockDim.x) {
    float s = 0.0f;
    for (int t = 0; t * SB_TILE < blocks; ++t) {
      float p = 0.0f;
      for (int b = t * SB_TILE; b < min(blocks, t * SB_TILE + SB_TILE); ++b) {
        const int item = local * blocks + b;
        p = __fmaf_rn(scaled[item], ints[item], p);
        if constexpr (TYPE == SB_GGML_Q4_1) p = __fmaf_rn(mins[item], sx[b], p);
      }
      s = sb_fold_sum(s, p, t == 0);
    }
    dots[local] = all_finite ? s : sb_nanf();
  }
  __syncthreads();
  sb_gguf_finish(mats, count, gate, row0, rows_per_block, mi, dots, cos_rows, sin_rows, width);
}

#define SB_GGUF_INT8_PRODUCTS_KERNEL(name, TYPE)                                               \
  extern "C" __global__ void sb_gguf_int8_products_##name(                                    \
      SbGgufMatrices mats, int count, int gate, long long row_bytes, int cols, const float* x, \
      const float* norm_scale, float eps, const float* cos_rows, const float* sin_rows,        \
      int width, int rows_per_block)                                                           \
  {                                                                                            \
    sb_gguf_int8_products<TYPE>(mats, count, gate, row_bytes, cols, x, norm_scale, eps,        \
                                cos_rows, sin_rows, width, rows_per_block);                    \
  }
SB_GGML_INT8_TYPES(SB_GGUF_INT8_PRODUCTS_KERNEL)
