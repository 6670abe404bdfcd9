// Products with GGUF block-quantized weights (samebits::MatMulGguf) for few activation rows
// (decode), the gather of dequantized rows (GatherGguf) and the dequantized transpose that
// the prefill GEMM takes.
//
// y[m, n] = canonical dot (contract: canonical-sum, gemm) of the dequantized weight row n with
// activation row m: tiles of 64 consecutive k, each a chain p = fma(w_k, x_k, p) from +0.0 in k
// order, the tile partials folded s = p_0, s = s + p_j. Weights are dequantized on the fly with
// the formulas of docs/gguf.md ("F32, F16, BF16" and "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0"), exactly as
// crates/samebits-gguf/src/quant/{float,legacy}.rs compute them:
//   F32: the stored float; F16: exact conversion; Q4_0: d * (q - 8); Q4_1: fma(d, q, m);
//   Q8_0: d * q (q signed). d and m are f16, converted exactly; the integer codes become floats
//   exactly through the 2^23 exponent trick (one logical op and one exact subtraction).
//
// sb_gguf_products: one thread per (weight row, 64-term tile) chain, a block owning whole
// rows; the block folds each row's partials in tile order, so the bits are those of
// samebits_gguf::dot_q_f32 whatever the launch. Optional fusions (src/executor/fusion.rs), each
// the same operations as the steps it replaces: the activation row is first RMS-normalized
// (contract: normalization; every block recomputes the row's statistic in the canonical order),
// up to three matrices share one normalized row, and each finished dot takes a residual add,
// an interleaved rotary embedding (contract: attention; the pair (2p, 2p + 1) of a head is two
// neighbouring rows of one block) or, for a gate and an up matrix, the SiLU gate
// (g * sigmoid(g)) * u.

#define SB_GGML_F32 0
#define SB_GGML_F16 1
#define SB_GGML_Q4_0 2
#define SB_GGML_Q4_1 3
#define SB_GGML_Q8_0 8

// The integer q (0 <= q < 2^23) as a float, exactly: 2^23 + q has q in its low mantissa bits.
__device__ __forceinline__ float sb_small_uint_to_f32(unsigned int q)
{
  return __uint_as_float(0x4b000000u | q) - 8388608.0f;
}

// Exact f16 -> f32 conversion of the bits `h`.
__device__ __forceinline__ float sb_f16_to_f32(unsigned short h)
{
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

// p after the chain over weights k0 .. k_end - 1 of `row` (k0 a multiple of 64, k_end - k0 a
// multiple of the block size) against x.
template <int TYPE>
__device__ __forceinline__ float sb_gguf_tile(const unsigned char* row, const float* x, int k0,
                                              int k_end, float p)
{
  if constexpr (TYPE == SB_GGML_F32) {
    const float* w = reinterpret_cast<const float*>(row);
    for (int k = k0; k < k_end; ++k) p = __fmaf_rn(w[k], x[k], p);
  } else if constexpr (TYPE == SB_GGML_F16) {
    const unsigned short* w = reinterpret_cast<const unsigned short*>(row);
    for (int k = k0; k < k_end; ++k) p = __fmaf_rn(sb_f16_to_f32(w[k]), x[k], p);
  } else if constexpr (TYPE == SB_GGML_Q4_1) {
    // 20-byte blocks, 4-byte aligned (rows are whole blocks of a 4-byte multiple).
    for (int b = k0 / 32; b < k_end / 32; ++b) {
      const unsigned int* block = reinterpret_cast<const unsigned int*>(row + 20 * b);
      const unsigned int dm = block[0];
      const float d = sb_f16_to_f32((unsigned short)(dm & 0xffffu));
      const float m = sb_f16_to_f32((unsigned short)(dm >> 16));
      unsigned int qs[4] = {block[1], block[2], block[3], block[4]};
      const float* xb = x + 32 * b;
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const unsigned int q = (qs[i >> 2] >> (8 * (i & 3))) & 0x0fu;
        p = __fmaf_rn(__fmaf_rn(d, sb_small_uint_to_f32(q), m), xb[i], p);
      }
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const unsigned int q = (qs[i >> 2] >> (8 * (i & 3) + 4)) & 0x0fu;
        p = __fmaf_rn(__fmaf_rn(d, sb_small_uint_to_f32(q), m), xb[16 + i], p);
      }
    }
  } else if constexpr (TYPE == SB_GGML_Q4_0) {
    // 18-byte blocks, 2-byte aligned.
    for (int b = k0 / 32; b < k_end / 32; ++b) {
      const unsigned short* block = reinterpret_cast<const unsigned short*>(row + 18 * b);
      const float d = sb_f16_to_f32(block[0]);
      const float* xb = x + 32 * b;
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          const unsigned int q = (block[1 + (i >> 1)] >> (8 * (i & 1) + 4 * h)) & 0x0fu;
          p = __fmaf_rn(d * (sb_small_uint_to_f32(q) - 8.0f), xb[16 * h + i], p);
        }
    }
  } else {
    static_assert(TYPE == SB_GGML_Q8_0, "unsupported ggml type");
    // 34-byte blocks, 2-byte aligned.
    for (int b = k0 / 32; b < k_end / 32; ++b) {
      const unsigned short* block = reinterpret_cast<const unsigned short*>(row + 34 * b);
      const float d = sb_f16_to_f32(block[0]);
      const float* xb = x + 32 * b;
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        // q + 128 of the signed code, then exactly (q + 128) - 128.
        const unsigned int q = ((block[1 + (i >> 1)] >> (8 * (i & 1))) & 0xffu) ^ 0x80u;
        p = __fmaf_rn(d * (sb_small_uint_to_f32(q) - 128.0f), xb[i], p);
      }
    }
  }
  return p;
}

// sb_gguf_tile for a weight type known at run time (its ggml id, SB_GGML_*), from p = +0.0.
__device__ __forceinline__ float sb_gguf_tile_of(int type, const unsigned char* row, const float* x,
                                                 int k0, int k_end)
{
  switch (type) {
    case SB_GGML_F32: return sb_gguf_tile<SB_GGML_F32>(row, x, k0, k_end, 0.0f);
    case SB_GGML_F16: return sb_gguf_tile<SB_GGML_F16>(row, x, k0, k_end, 0.0f);
    case SB_GGML_Q4_0: return sb_gguf_tile<SB_GGML_Q4_0>(row, x, k0, k_end, 0.0f);
    case SB_GGML_Q4_1: return sb_gguf_tile<SB_GGML_Q4_1>(row, x, k0, k_end, 0.0f);
    default: return sb_gguf_tile<SB_GGML_Q8_0>(row, x, k0, k_end, 0.0f);
  }
}

// Bytes of the first k weights of a row (k a multiple of the block size).
template <int TYPE>
__device__ __forceinline__ long long sb_gguf_bytes(int k)
{
  if constexpr (TYPE == SB_GGML_F32) return 4ll * k;
  else if constexpr (TYPE == SB_GGML_F16) return 2ll * k;
  else if constexpr (TYPE == SB_GGML_Q4_0) return 18ll * (k / 32);
  else if constexpr (TYPE == SB_GGML_Q4_1) return 20ll * (k / 32);
  else return 34ll * (k / 32);
}

// SbGgufMatrix / SbGgufMatrices (one matrix of a products launch) and SB_GGUF_PITCH are in the
// device ABI (src/gguf.rs, src/device_abi.rs).

// Grid (ceil(block rows / rows_per_block), M). Block rows: the rows of matrices 0, 1, .. one
// after another, or, when `gate`, the rows n of matrix 0 (gate) and 1 (up) interleaved (block
// row 2n + i is row n of matrix i), whose output (g * sigmoid(g)) * u goes to matrix 0's y.
// rows_per_block is even, so a rotary pair or a gate / up pair never straddles blocks (every
// matrix has an even number of rows when rotary or gate is on). With `norm_scale`, the
// activation row is first RMS-normalized: ms = canonical_dot(x, x) / cols,
// rrms = 1 / sqrt(ms + eps), x_k = (x_k * rrms) * scale_k. Dynamic shared memory, in floats:
// tiles * SB_GGUF_PITCH (the row) + rows_per_block * tiles (partials) + rows_per_block (dots).
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
  __shared__ float rrms;
  const long long mi = blockIdx.y;
  const float* xr = x + mi * cols;
  const int total = mats.m[0].rows + (count > 1 ? mats.m[1].rows : 0) + (count > 2 ? mats.m[2].rows : 0);
  // The matrix (selected by comparisons: the parameter struct is not indexed at run time)
  // and the row of block row `g`.
  auto locate = [&](int g, int& n) -> const SbGgufMatrix& {
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
  };
  const int row0 = blockIdx.x * rows_per_block;
  const int items = rows_per_block * tiles;
  // A hint, no arithmetic: the weight tiles (which do not depend on the activations), the
  // norm scale, the added terms and the rotary rows start their trip to L1 now, so their
  // memory latency overlaps the row's load and statistic.
  for (int item = threadIdx.x; item < items; item += blockDim.x) {
    const int local = item / tiles, t = item - local * tiles;
    const int g = row0 + local;
    if (g >= total) continue;
    int n;
    const unsigned char* row = locate(g, n).w + n * row_bytes;
    const unsigned char* from = row + sb_gguf_bytes<TYPE>(t * SB_TILE);
    sb_prefetch_l1(from);
    sb_prefetch_l1(row + sb_gguf_bytes<TYPE>(min(t * SB_TILE + SB_TILE, cols)) - 1);
  }
  if (norm_scale)
    for (int k = 32 * threadIdx.x; k < cols; k += 32 * blockDim.x) sb_prefetch_l1(norm_scale + k);
  for (int local = threadIdx.x; local < rows_per_block; local += blockDim.x) {
    const int g = row0 + local;
    if (g >= total) continue;
    int n;
    const SbGgufMatrix& mat = locate(g, n);
    if (mat.add) sb_prefetch_l1(mat.add + mi * mat.rows + n);
    if (mat.rot > 0) {
      sb_prefetch_l1(cos_rows + mi * width);
      sb_prefetch_l1(sin_rows + mi * width);
    }
  }
  for (int k = threadIdx.x; k < cols; k += blockDim.x) xs[k + 4 * (k / SB_TILE)] = xr[k];
  __syncthreads();
  if (norm_scale) {
    for (int t = threadIdx.x; t < tiles; t += blockDim.x) {
      const float* xt = xs + t * SB_GGUF_PITCH;
      const int len = min(SB_TILE, cols - t * SB_TILE);
      float p = 0.0f;
      for (int i = 0; i < len; ++i) p = __fmaf_rn(xt[i], xt[i], p);
      partials[t] = p;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float s = 0.0f;
      for (int t = 0; t < tiles; ++t) s = sb_fold_sum(s, partials[t], t == 0);
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

  for (int item = threadIdx.x; item < items; item += blockDim.x) {
    const int local = item / tiles, t = item - local * tiles;
    const int g = row0 + local;
    if (g >= total) continue;
    int n;
    const unsigned char* row = locate(g, n).w + n * row_bytes;
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
  for (int local = threadIdx.x; local < rows_per_block; local += blockDim.x) {
    const int g = row0 + local;
    if (g >= total) continue;
    int n;
    const SbGgufMatrix& mat = locate(g, n);
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

#define SB_GGUF_PRODUCTS_KERNEL(name, TYPE)                                                   \
  extern "C" __global__ void sb_gguf_products_##name(                                        \
      SbGgufMatrices mats, int count, int gate, long long row_bytes, int cols, const float* x, \
      const float* norm_scale, float eps, const float* cos_rows, const float* sin_rows,        \
      int width, int rows_per_block)                                                           \
  {                                                                                            \
    sb_gguf_products<TYPE>(mats, count, gate, row_bytes, cols, x, norm_scale, eps, cos_rows,   \
                           sin_rows, width, rows_per_block);                                   \
  }
SB_GGUF_PRODUCTS_KERNEL(f32, SB_GGML_F32)
SB_GGUF_PRODUCTS_KERNEL(f16, SB_GGML_F16)
SB_GGUF_PRODUCTS_KERNEL(q4_0, SB_GGML_Q4_0)
SB_GGUF_PRODUCTS_KERNEL(q4_1, SB_GGML_Q4_1)
SB_GGUF_PRODUCTS_KERNEL(q8_0, SB_GGML_Q8_0)

// Element k of a weight row, dequantized by the same formulas (samebits::GatherGguf).
template <int TYPE>
__device__ __forceinline__ float sb_gguf_value(const unsigned char* row, int k)
{
  if constexpr (TYPE == SB_GGML_F32) {
    return reinterpret_cast<const float*>(row)[k];
  } else if constexpr (TYPE == SB_GGML_F16) {
    return sb_f16_to_f32(reinterpret_cast<const unsigned short*>(row)[k]);
  } else {
    const int i = k % 32;
    const unsigned char* block;
    unsigned int q;
    if constexpr (TYPE == SB_GGML_Q4_1) {
      block = row + 20 * (k / 32);
      q = (i < 16 ? block[4 + i] : block[4 + i - 16] >> 4) & 0x0fu;
      const float d = sb_f16_to_f32((unsigned short)(block[0] | (block[1] << 8)));
      const float m = sb_f16_to_f32((unsigned short)(block[2] | (block[3] << 8)));
      return __fmaf_rn(d, (float)q, m);
    } else if constexpr (TYPE == SB_GGML_Q4_0) {
      block = row + 18 * (k / 32);
      q = (i < 16 ? block[2 + i] : block[2 + i - 16] >> 4) & 0x0fu;
      const float d = sb_f16_to_f32((unsigned short)(block[0] | (block[1] << 8)));
      return d * (float)((int)q - 8);
    } else {
      static_assert(TYPE == SB_GGML_Q8_0, "unsupported ggml type");
      block = row + 34 * (k / 32);
      const float d = sb_f16_to_f32((unsigned short)(block[0] | (block[1] << 8)));
      return d * (float)(signed char)block[2 + i];
    }
  }
}

// y[i, k] = dequantized element k of weight row ids[i] (negative ids count from the end; the
// host checked that every id is in range). Thread per output element.
template <int TYPE>
__device__ __forceinline__ void sb_gguf_gather(const unsigned char* w, long long row_bytes,
                                               int rows, int cols, const long long* ids,
                                               long long count, float* y)
{
  const long long n = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (n >= count) return;
  long long id = ids[n / cols];
  if (id < 0) id += rows;
  y[n] = sb_gguf_value<TYPE>(w + id * row_bytes, (int)(n % cols));
}

#define SB_GGUF_GATHER_KERNEL(name, TYPE)                                                     \
  extern "C" __global__ void sb_gguf_gather_##name(const unsigned char* w, long long row_bytes, \
                                                   int rows, int cols, const long long* ids,   \
                                                   long long count, float* y)                  \
  {                                                                                            \
    sb_gguf_gather<TYPE>(w, row_bytes, rows, cols, ids, count, y);                             \
  }
SB_GGUF_GATHER_KERNEL(f32, SB_GGML_F32)
SB_GGUF_GATHER_KERNEL(f16, SB_GGML_F16)
SB_GGUF_GATHER_KERNEL(q4_0, SB_GGML_Q4_0)
SB_GGUF_GATHER_KERNEL(q4_1, SB_GGML_Q4_1)
SB_GGUF_GATHER_KERNEL(q8_0, SB_GGML_Q8_0)

// wt[k, n] = dequantized element k of weight row n: the whole [rows, cols] matrix as the
// row-major [cols, rows] f32 operand B of a GEMM (prefill: many activation rows per weight).
// Thread per element, consecutive threads along a weight row.
template <int TYPE>
__device__ __forceinline__ void sb_gguf_dequantize_t(const unsigned char* w, long long row_bytes,
                                                     int rows, int cols, float* wt)
{
  const long long n = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (n >= (long long)rows * cols) return;
  const long long r = n / cols;
  const int k = (int)(n % cols);
  wt[(long long)k * rows + r] = sb_gguf_value<TYPE>(w + r * row_bytes, k);
}

#define SB_GGUF_DEQUANTIZE_KERNEL(name, TYPE)                                                 \
  extern "C" __global__ void sb_gguf_dequantize_t_##name(const unsigned char* w,              \
                                                         long long row_bytes, int rows,       \
                                                         int cols, float* wt)                 \
  {                                                                                            \
    sb_gguf_dequantize_t<TYPE>(w, row_bytes, rows, cols, wt);                                  \
  }
SB_GGUF_DEQUANTIZE_KERNEL(f32, SB_GGML_F32)
SB_GGUF_DEQUANTIZE_KERNEL(f16, SB_GGML_F16)
SB_GGUF_DEQUANTIZE_KERNEL(q4_0, SB_GGML_Q4_0)
SB_GGUF_DEQUANTIZE_KERNEL(q4_1, SB_GGML_Q4_1)
SB_GGUF_DEQUANTIZE_KERNEL(q8_0, SB_GGML_Q8_0)
