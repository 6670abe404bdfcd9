// RotaryEmbedding and Attention (contract section `attention`), the device side of
// crates/samebits-ops/src/families/attention.rs; the attention launch also appends the step's
// keys and values to a device-resident KV cache.
//
// Tensors are addressed through (batch, head, position) element strides with the feature
// index of unit stride, so 3-D `[B, S, H * D]` and 4-D `[B, H, S, D]` tensors and the cache
// storage `[B, H, capacity, D]` take the same code.
//
// Attention, for batch b, query head h (KV head h / group), query i, keys j = 0 .. total - 1:
//   s_j = canonical_dot(q_i, k_j) * scale          (tiles of 64 features, folded in order)
//   s_j = -inf when causal and j > i + past
//   m = max_j s_j (reduce-extrema), e_j = exp(s_j - m), sum = canonical_sum(e), p_j = e_j / sum
//   y[d] = canonical_dot(p, v[:, d])                (tiles of 64 key positions, folded in order)
// Masked keys take part with probability 0, as on the CPU (the CPU computes these dots as two
// canonical GEMMs per KV head). One block computes `rows` query heads of one KV group at one
// query position; every reduction runs in the canonical order whatever the block shape.

// Strides of one tensor: batch, head, position (the feature stride is 1).
struct SbStrides {
  long long b, h, s;
};

// Element n (row-major over [B, H, S, D]) of a view with strides `v`, at position offset
// `first`.
__device__ __forceinline__ long long sb_heads_at(long long n, int heads, int seq, int size,
                                                 SbStrides v, int first)
{
  const int e = (int)(n % size);
  const int s = (int)((n / size) % seq);
  const int h = (int)((n / ((long long)size * seq)) % heads);
  const long long b = n / ((long long)size * seq * heads);
  return b * v.b + h * v.h + (long long)(first + s) * v.s + e;
}

// Rotary: thread per element of x (dims [B, H, S, D] through strides); cos / sin are
// [rows, width], row b * seq + s (no position_ids). out has x's layout.
extern "C" __global__ void sb_rotary(const float* x, const float* cos_cache, const float* sin_cache,
                                     float* out, long long count, int heads, int seq, int size,
                                     int rot, int interleaved, int width, long long sb,
                                     long long sh, long long ss)
{
  const long long n = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (n >= count) return;
  // n enumerates (b, h, s, e) row-major.
  const int e = (int)(n % size);
  const int s = (int)((n / size) % seq);
  const int h = (int)((n / ((long long)size * seq)) % heads);
  const long long b = n / ((long long)size * seq * heads);
  const long long base = b * sb + h * sh + s * ss;
  if (e >= rot) {
    out[base + e] = x[base + e];
    return;
  }
  const int half = rot / 2;
  int p, i1, i2;
  if (interleaved) {
    p = e / 2;
    i1 = 2 * p;
    i2 = 2 * p + 1;
  } else {
    p = e < half ? e : e - half;
    i1 = p;
    i2 = p + half;
  }
  const long long c = (b * seq + s) * (long long)width + p;
  const float cs = cos_cache[c], sn = sin_cache[c];
  const float x1 = x[base + i1], x2 = x[base + i2];
  out[base + e] = (e == i1) ? (cs * x1) - (sn * x2) : (sn * x1) + (cs * x2);
}

// dst at positions first .. first + S - 1 = src (both [B, H, S, D] through strides). Thread
// per element.
extern "C" __global__ void sb_heads_copy(const float* src, float* dst, long long count, int heads,
                                         int seq, int size, SbStrides from, SbStrides to, int first)
{
  const long long n = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (n >= count) return;
  dst[sb_heads_at(n, heads, seq, size, to, first)] = src[sb_heads_at(n, heads, seq, size, from, 0)];
}

// Grid (queries, q_heads / rows, batch). Keys and values j < past are read from k / v; those
// of this step, j = past .. past + new_len - 1, from k_new / v_new at position j - past, or,
// when k_new is null, from k / v as well (total = past + new_len <= stride). With k_new, the
// kernel also appends: the blocks share out the stores of k_new / v_new into k / v at positions
// past .. (a cache storage; no block of this launch reads them there). With a `counter` (a
// cache storage's [filled length, ticket]) past is counter[0], and the last block to finish (a
// ticket decides WHO, never an order of arithmetic) advances counter[0] by new_len, after every
// block has read it. `vec4`: keys may be read as aligned float4 (d and every key stride are
// multiples of 4). Dynamic shared memory, in floats:
//   rows * d (queries) + rows * stride (scores, then probabilities) + round_tiles * rows * dv
//   (output partials) + rows * dv (output sums), round_tiles = max(1, blockDim.x / dv).
// Phases: scores, one thread per key (the key's 64-feature tile in registers, every row of the
// block against it; masked keys are -inf without a dot); the softmax of each row by one warp
// (max, exp, tile sums as lane chains folded in tile order through shuffles, division); the
// outputs, one thread per (key tile, feature) with the tile's values in registers, every row
// against them, the partials folded in tile order per (row, feature).
extern "C" __global__ void sb_attention(const float* q, SbStrides qs, float* k, SbStrides ks,
                                        float* v, SbStrides vs, const float* k_new,
                                        SbStrides kns, const float* v_new, SbStrides vns,
                                        float* y, SbStrides ys, int past, int new_len,
                                        int stride, int* counter, int d, int dv, int group,
                                        int rows, int causal, float scale, int kv_heads, int vec4)
{
  extern __shared__ float smem[];
  const int i = blockIdx.x;
  const int h0 = blockIdx.y * rows;  // first query head of the block
  const long long b = blockIdx.z;
  const int g = h0 / group;          // its KV head (rows divides group)
  if (counter) past = *(volatile const int*)counter;
  const int total = past + new_len;
  const int tiles = (total + SB_TILE - 1) / SB_TILE;
  const int round_tiles = max(1, (int)blockDim.x / dv);
  float* q_rows = smem;
  float* scores = q_rows + rows * d;
  float* out_partials = scores + (long long)rows * stride;
  float* out_sums = out_partials + round_tiles * rows * dv;

  if (k_new) {
    // The append: element n of the new keys, then of the new values, row-major over
    // [batch, kv_heads, new_len, size].
    const long long blocks = (long long)gridDim.x * gridDim.y * gridDim.z;
    const long long block = blockIdx.x + (long long)gridDim.x * (blockIdx.y + (long long)gridDim.y * blockIdx.z);
    const long long keys = (long long)gridDim.z * kv_heads * new_len * d;
    const long long count = keys + (long long)gridDim.z * kv_heads * new_len * dv;
    for (long long n = block * blockDim.x + threadIdx.x; n < count; n += blocks * blockDim.x) {
      if (n < keys)
        k[sb_heads_at(n, kv_heads, new_len, d, ks, past)] = k_new[sb_heads_at(n, kv_heads, new_len, d, kns, 0)];
      else
        v[sb_heads_at(n - keys, kv_heads, new_len, dv, vs, past)] =
            v_new[sb_heads_at(n - keys, kv_heads, new_len, dv, vns, 0)];
    }
  }
  for (int n = threadIdx.x; n < rows * d; n += blockDim.x) {
    const int r = n / d, e = n % d;
    q_rows[n] = q[b * qs.b + (long long)(h0 + r) * qs.h + (long long)i * qs.s + e];
  }
  __syncthreads();

  // 1-3. Scores: canonical dots over the head dimension, scaled; causally masked keys -inf.
  const float* kb = k + b * ks.b + (long long)g * ks.h;
  const float* knb = k_new ? k_new + b * kns.b + (long long)g * kns.h : nullptr;
  const int visible = causal ? min(total, i + past + 1) : total;
  const int d_tiles = (d + SB_TILE - 1) / SB_TILE;
  for (int j = threadIdx.x; j < total; j += blockDim.x) {
    if (j >= visible) {
      for (int r = 0; r < rows; ++r) scores[(long long)r * stride + j] = -sb_inff();
      continue;
    }
    const float* kj = (knb && j >= past) ? knb + (long long)(j - past) * kns.s : kb + (long long)j * ks.s;
    float kr[SB_TILE];
    for (int r = 0; r < rows; ++r) {
      const float* qr = q_rows + r * d;
      float s = 0.0f;
      for (int tt = 0; tt < d_tiles; ++tt) {
        const int t0 = tt * SB_TILE, len = min(SB_TILE, d - t0);
        if (r == 0 || d_tiles > 1) {
          if (vec4) {
#pragma unroll
            for (int c = 0; c < SB_TILE / 4; ++c)
              if (4 * c < len) {
                const float4 f = reinterpret_cast<const float4*>(kj + t0)[c];
                kr[4 * c] = f.x;
                kr[4 * c + 1] = f.y;
                kr[4 * c + 2] = f.z;
                kr[4 * c + 3] = f.w;
              }
          } else {
#pragma unroll
            for (int e = 0; e < SB_TILE; ++e)
              if (e < len) kr[e] = kj[t0 + e];
          }
        }
        float p = 0.0f;
#pragma unroll
        for (int e = 0; e < SB_TILE; ++e)
          if (e < len) p = __fmaf_rn(qr[t0 + e], kr[e], p);
        s = sb_fold_sum(s, p, tt == 0);
      }
      scores[(long long)r * stride + j] = s * scale;
    }
  }
  __syncthreads();

  // 4. Softmax of each row (contract: softmax) by one warp: max, exp, canonical sum, division.
  const int lane = threadIdx.x & 31;
  for (int r = threadIdx.x >> 5; r < rows; r += blockDim.x >> 5) {
    float* row = scores + (long long)r * stride;
    float m = -sb_inff();
    for (int j = lane; j < total; j += 32) m = sb_canonical_max(m, row[j]);
    for (int offset = 16; offset > 0; offset >>= 1)
      m = sb_canonical_max(m, __shfl_xor_sync(0xffffffffu, m, offset));
    for (int j = lane; j < total; j += 32) row[j] = sb_expf(row[j] - m);
    __syncwarp();
    float sum = 0.0f;
    for (int t0 = 0; t0 < tiles; t0 += 32) {
      const int t = t0 + lane;
      float p = 0.0f;
      if (t < tiles) {
        const int j_end = min(t * SB_TILE + SB_TILE, total);
        for (int j = t * SB_TILE; j < j_end; ++j) p = p + row[j];
      }
      const int count = min(32, tiles - t0);
      for (int jj = 0; jj < count; ++jj) sum = sb_fold_sum(sum, __shfl_sync(0xffffffffu, p, jj), t0 + jj == 0);
    }
    for (int j = lane; j < total; j += 32) row[j] = row[j] / sum;
  }
  __syncthreads();

  // 5. Outputs: canonical dots of the probabilities with V over key positions. Rounds of
  // round_tiles key tiles: each (tile, feature) item runs the chains of every row, then the
  // (row, feature) sums fold the round's partials in tile order.
  const float* vb = v + b * vs.b + (long long)g * vs.h;
  const float* vnb = v_new ? v_new + b * vns.b + (long long)g * vns.h : nullptr;
  for (int base = 0; base < tiles; base += round_tiles) {
    for (int item = threadIdx.x; item < round_tiles * dv; item += blockDim.x) {
      const int tt = item / dv, e = item % dv;
      const int t = base + tt;
      if (t >= tiles) continue;
      const int j0 = t * SB_TILE, len = min(SB_TILE, total - j0);
      float vr[SB_TILE];
#pragma unroll
      for (int jj = 0; jj < SB_TILE; ++jj) {
        const int j = j0 + jj;
        if (jj < len)
          vr[jj] = (vnb && j >= past) ? vnb[(long long)(j - past) * vns.s + e] : vb[(long long)j * vs.s + e];
      }
      for (int r = 0; r < rows; ++r) {
        const float* pr = scores + (long long)r * stride + j0;
        float p = 0.0f;
#pragma unroll
        for (int jj = 0; jj < SB_TILE; ++jj)
          if (jj < len) p = __fmaf_rn(pr[jj], vr[jj], p);
        out_partials[(tt * rows + r) * dv + e] = p;
      }
    }
    __syncthreads();
    for (int f = threadIdx.x; f < rows * dv; f += blockDim.x) {
      float s = out_sums[f];
      for (int tt = 0; tt < round_tiles && base + tt < tiles; ++tt)
        s = sb_fold_sum(s, out_partials[tt * rows * dv + f], base + tt == 0);
      out_sums[f] = s;
    }
    __syncthreads();
  }
  for (int f = threadIdx.x; f < rows * dv; f += blockDim.x) {
    const int r = f / dv, e = f % dv;
    y[b * ys.b + (long long)(h0 + r) * ys.h + (long long)i * ys.s + e] = out_sums[f];
  }
  if (counter && threadIdx.x == 0) {
    const unsigned int blocks = gridDim.x * gridDim.y * gridDim.z;
    if (atomicAdd(reinterpret_cast<unsigned int*>(counter + 1), 1u) == blocks - 1) {
      counter[0] = total;
      counter[1] = 0;
    }
  }
}
