// RotaryEmbedding and Attention (contract section `attention`), the device side of
// crates/samebits-ops/src/families/attention.rs, and the append of new keys / values to a
// device-resident KV cache.
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

// The new keys (blockIdx.y == 0) and values (1) of a step appended to a cache storage at
// positions len .. len + S - 1, len = counter[0] (the storage's filled length, which the
// attention kernel of the same step then advances). Grid-stride over the larger of the two.
extern "C" __global__ void sb_kv_append(const float* k_src, SbStrides k_from, float* k_dst,
                                        SbStrides k_to, int k_size, const float* v_src,
                                        SbStrides v_from, float* v_dst, SbStrides v_to,
                                        int v_size, int batch, int heads, int seq,
                                        const int* counter)
{
  const bool values = blockIdx.y == 1;
  const int size = values ? v_size : k_size;
  const long long count = (long long)batch * heads * seq * size;
  const int first = counter[0];
  for (long long n = blockIdx.x * (long long)blockDim.x + threadIdx.x; n < count;
       n += (long long)gridDim.x * blockDim.x) {
    if (values)
      v_dst[sb_heads_at(n, heads, seq, size, v_to, first)] =
          v_src[sb_heads_at(n, heads, seq, size, v_from, 0)];
    else
      k_dst[sb_heads_at(n, heads, seq, size, k_to, first)] =
          k_src[sb_heads_at(n, heads, seq, size, k_from, 0)];
  }
}

// Grid (queries, q_heads / rows, batch). The keys and values before this step number `past`,
// or, with a `counter` (a cache storage's [filled length, ticket]), counter[0]; the step's
// `new_len` keys follow them (total = past + new_len <= stride). With a counter, the last block
// to finish (a ticket decides WHO, never an order of arithmetic) advances counter[0] by
// new_len, after every block has read it. Dynamic shared memory, in floats:
//   rows * d (queries) + rows * stride (scores, then probabilities) + tiles(stride) (sum
//   partials) + round_tiles * rows * dv (output partials) + rows * dv (output sums),
// round_tiles = max(1, blockDim.x / dv).
extern "C" __global__ void sb_attention(const float* q, SbStrides qs, const float* k, SbStrides ks,
                                        const float* v, SbStrides vs, float* y, SbStrides ys,
                                        int past, int new_len, int stride, int* counter, int d,
                                        int dv, int group, int rows, int causal, float scale)
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
  float* sum_partials = scores + (long long)rows * stride;
  float* out_partials = sum_partials + (stride + SB_TILE - 1) / SB_TILE;
  float* out_sums = out_partials + round_tiles * rows * dv;

  for (int n = threadIdx.x; n < rows * d; n += blockDim.x) {
    const int r = n / d, e = n % d;
    q_rows[n] = q[b * qs.b + (long long)(h0 + r) * qs.h + (long long)i * qs.s + e];
  }
  __syncthreads();

  // 1-3. Scores: canonical dots over the head dimension, scaled, causally masked.
  const float* kb = k + b * ks.b + (long long)g * ks.h;
  for (int j = threadIdx.x; j < total; j += blockDim.x) {
    const float* kj = kb + (long long)j * ks.s;
    for (int r = 0; r < rows; ++r) {
      const float* qr = q_rows + r * d;
      float s = 0.0f;
      for (int t0 = 0; t0 < d; t0 += SB_TILE) {
        const int t_end = min(t0 + SB_TILE, d);
        float p = 0.0f;
        for (int e = t0; e < t_end; ++e) p = __fmaf_rn(qr[e], kj[e], p);
        s = sb_fold_sum(s, p, t0 == 0);
      }
      float score = s * scale;
      if (causal && j > i + past) score = -sb_inff();
      scores[(long long)r * stride + j] = score;
    }
  }
  __syncthreads();

  // 4. Softmax of each row (contract: softmax): max, exp, canonical sum, division.
  for (int r = 0; r < rows; ++r) {
    float* row = scores + (long long)r * stride;
    const float m = sb_block_extremum(row, total, -sb_inff(),
                                      [](float a, float c) { return sb_canonical_max(a, c); });
    for (int j = threadIdx.x; j < total; j += blockDim.x) row[j] = sb_expf(row[j] - m);
    __syncthreads();
    const float sum = sb_block_canonical(total, 0.0f, [&](float p, int j) { return p + row[j]; },
                                         [](float s, float p) { return s + p; }, sum_partials);
    for (int j = threadIdx.x; j < total; j += blockDim.x) row[j] = row[j] / sum;
    __syncthreads();
  }

  // 5. Outputs: canonical dots of the probabilities with V over key positions. Rounds of
  // round_tiles key tiles: each (tile, feature) item runs the chains of every row, then the
  // (row, feature) sums fold the round's partials in tile order.
  const float* vb = v + b * vs.b + (long long)g * vs.h;
  for (int base = 0; base < tiles; base += round_tiles) {
    for (int item = threadIdx.x; item < round_tiles * dv; item += blockDim.x) {
      const int tt = item / dv, e = item % dv;
      const int t = base + tt;
      if (t >= tiles) continue;
      const int j_end = min(t * SB_TILE + SB_TILE, total);
      for (int r = 0; r < rows; ++r) {
        const float* pr = scores + (long long)r * stride;
        float p = 0.0f;
        for (int j = t * SB_TILE; j < j_end; ++j) p = __fmaf_rn(pr[j], vb[(long long)j * vs.s + e], p);
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
