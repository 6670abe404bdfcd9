// Matrix-vector products over GGUF block-quantized weights (samebits::MatMulGguf).
//
// y[m, n] = canonical dot (contract: canonical-sum, gemm) of the dequantized weight row n with
// activation row m: tiles of 64 consecutive k, each a chain p = fma(w_k, x_k, p) from +0.0 in k
// order, the tile partials folded s = p_0, s = s + p_j. Weights are dequantized on the fly with
// the formulas of docs/gguf.md ("F32, F16, BF16" and "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0"), exactly as
// crates/samebits-gguf/src/quant/{float,legacy}.rs compute them:
//   F32: the stored float; F16: exact conversion; Q4_0: d * (q - 8); Q4_1: fma(d, q, m);
//   Q8_0: d * q (q signed). d and m are f16, converted exactly.
// One warp per weight row: lane l computes the partials of tiles l, l + 32, ... (a 64-term
// tile is two whole 32-element blocks), and every lane folds the partials in tile order via
// shuffles, so the bits are those of samebits_gguf::dot_q_f32 whatever the launch.

#define SB_GGML_F32 0
#define SB_GGML_F16 1
#define SB_GGML_Q4_0 2
#define SB_GGML_Q4_1 3
#define SB_GGML_Q8_0 8

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
        p = __fmaf_rn(__fmaf_rn(d, (float)q, m), xb[i], p);
      }
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const unsigned int q = (qs[i >> 2] >> (8 * (i & 3) + 4)) & 0x0fu;
        p = __fmaf_rn(__fmaf_rn(d, (float)q, m), xb[16 + i], p);
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
          p = __fmaf_rn(d * (float)((int)q - 8), xb[16 * h + i], p);
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
        const signed char q = (signed char)((block[1 + (i >> 1)] >> (8 * (i & 1))) & 0xffu);
        p = __fmaf_rn(d * (float)q, xb[i], p);
      }
    }
  }
  return p;
}

// Grid (ceil(rows / warps per block), M); y is [M, rows], x is [M, cols]. With `add` (a
// [M, rows] tensor, or null) the finished dot takes one more addition, y = dot + add (the
// residual Add fused into the product; the addition commutes, so Add(a, y) alike).
template <int TYPE>
__device__ __forceinline__ void sb_gguf_matvec(const unsigned char* w, long long row_bytes,
                                               int rows, int cols, const float* x, const float* add,
                                               float* y)
{
  const long long n = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (n >= rows) return;  // whole warps leave together
  const long long mi = blockIdx.y;
  const unsigned char* row = w + n * row_bytes;
  const float* xr = x + mi * cols;
  const int tiles = (cols + SB_TILE - 1) / SB_TILE;
  float s = 0.0f;
  for (int t0 = 0; t0 < tiles; t0 += 32) {
    const int t = t0 + lane;
    float p = 0.0f;
    if (t < tiles) p = sb_gguf_tile<TYPE>(row, xr, t * SB_TILE, min(t * SB_TILE + SB_TILE, cols), p);
    const int count = min(32, tiles - t0);
    for (int j = 0; j < count; ++j) {
      const float v = __shfl_sync(0xffffffffu, p, j);
      s = sb_fold_sum(s, v, t0 + j == 0);
    }
  }
  if (lane == 0) y[mi * rows + n] = add ? s + add[mi * rows + n] : s;
}

#define SB_GGUF_KERNEL(name, TYPE)                                                            \
  extern "C" __global__ void sb_gguf_matvec_##name(const unsigned char* w, long long row_bytes, \
                                                   int rows, int cols, const float* x,         \
                                                   const float* add, float* y)                 \
  {                                                                                            \
    sb_gguf_matvec<TYPE>(w, row_bytes, rows, cols, x, add, y);                                 \
  }
SB_GGUF_KERNEL(f32, SB_GGML_F32)
SB_GGUF_KERNEL(f16, SB_GGML_F16)
SB_GGUF_KERNEL(q4_0, SB_GGML_Q4_0)
SB_GGUF_KERNEL(q4_1, SB_GGML_Q4_1)
SB_GGUF_KERNEL(q8_0, SB_GGML_Q8_0)

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
