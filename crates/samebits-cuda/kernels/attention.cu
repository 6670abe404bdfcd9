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

// SbStrides (device ABI): strides of one tensor: batch, head, position (feature stride 1).
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

// Rotary: grid-stride over the elements of x (dims [B, H, S, D] through strides); cos / sin are
// [rows, width], row b * seq + s (no position_ids). out has x's layout.
extern "C" __global__ void sb_rotary(const float* x, const float* cos_cache, const float* sin_cache,
                                     float* out, long long count, int heads, int seq, int size,
                                     int rot, int interleaved, int width, long long sb,
                                     long long sh, long long ss)
{
  // Grid-stride: a launch's blocks are capped (backend::blocks_for).
  for (long long n = blockIdx.x * (long long)blockDim.x + threadIdx.x; n < count;
       n += (long long)gridDim.x * blockDim.x) {
    // n enumerates (b, h, s, e) row-major.
    const int e = (int)(n % size);
    const int s = (int)((n / size) % seq);
    const int h = (int)((n / ((long long)size * seq)) % heads);
    const long long b = n / ((long long)size * seq * heads);
    const long long base = b * sb + h * sh + s * ss;
    if (e >= rot) {
      out[base + e] = x[base + e];
      continue;
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
}

// dst at positions first .. first + S - 1 = src (both [B, H, S, D] through strides),
// grid-stride over the elements.
extern "C" __global__ void sb_heads_copy(const float* src, float* dst, long long count, int heads,
                                         int seq, int size, SbStrides from, SbStrides to, int first)
{
  for (long long n = blockIdx.x * (long long)blockDim.x + threadIdx.x; n < count;
       n += (long long)gridDim.x * blockDim.x)
    dst[sb_heads_at(n, heads, seq, size, to, first)] = src[sb_heads_at(n, heads, seq, size, from, 0)];
}

// The append of an attention step: element n (row-major over [batch, kv_heads, new_len, size])
// of the new keys, then of the new values, stored at positions past .. of k / v. The blocks of
// a launch (`block` of `blocks`) share out the elements.
__device__ __forceinline__ void sb_attention_append(float* k, SbStrides ks, float* v, SbStrides vs,
                                                    const float* k_new, SbStrides kns,
                                                    const float* v_new, SbStrides vns, int batch,
                                                    int kv_heads, int new_len, int past, int d,
                                                    int dv, long long block, long long blocks)
{
  const long long keys = (long long)batch * kv_heads * new_len * d;
  const long long count = keys + (long long)batch * kv_heads * new_len * dv;
  for (long long n = block * blockDim.x + threadIdx.x; n < count; n += blocks * blockDim.x) {
    if (n < keys)
      k[sb_heads_at(n, kv_heads, new_len, d, ks, past)] = k_new[sb_heads_at(n, kv_heads, new_len, d, kns, 0)];
    else
      v[sb_heads_at(n - keys, kv_heads, new_len, dv, vs, past)] =
          v_new[sb_heads_at(n - keys, kv_heads, new_len, dv, vns, 0)];
  }
}

// The block's query rows (rows x d) of query i into shared memory.
__device__ __forceinline__ void sb_attention_load_queries(const float* q, SbStrides qs, long long b,
                                                          int h0, int i, int rows, int d,
                                                          float* q_rows)
{
  for (int n = threadIdx.x; n < rows * d; n += blockDim.x) {
    const int r = n / d, e = n % d;
    q_rows[n] = q[b * qs.b + (long long)(h0 + r) * qs.h + (long long)i * qs.s + e];
  }
}

// Steps 1-3 for one key row kj: out[r * out_stride] = canonical_dot(q_r, kj) * scale for every
// query row r of the block. The key's 64-feature tile sits in registers (aligned float4 reads
// with `vec4`) while every row runs its chain against it.
__device__ __forceinline__ void sb_attention_key_scores(const float* q_rows, const float* kj, int d,
                                                        int rows, int vec4, float scale, float* out,
                                                        long long out_stride)
{
  const int d_tiles = (d + SB_TILE - 1) / SB_TILE;
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
    out[r * out_stride] = s * scale;
  }
}

// Step 5 for one (key tile, feature e): the tile's values v_j[e] (j = j0 .. j0 + len - 1) in
// registers, and for every row r the chain p = fma(probs[r][j], v_j[e], p) from +0.0 in key
// order into out[r * out_stride]. `value(j)` points at key j's value row.
template <typename Value>
__device__ __forceinline__ void sb_attention_tile_values(const float* probs, long long probs_stride,
                                                         int j0, int len, int e, int rows,
                                                         Value value, float* out,
                                                         long long out_stride)
{
  float vr[SB_TILE];
#pragma unroll
  for (int jj = 0; jj < SB_TILE; ++jj)
    if (jj < len) vr[jj] = value(j0 + jj)[e];
  for (int r = 0; r < rows; ++r) {
    const float* pr = probs + r * probs_stride + j0;
    float p = 0.0f;
#pragma unroll
    for (int jj = 0; jj < SB_TILE; ++jj)
      if (jj < len) p = __fmaf_rn(pr[jj], vr[jj], p);
    out[r * out_stride] = p;
  }
}

// A hint, no arithmetic: the block's key rows j_begin .. visible - 1 and value rows
// j_begin .. j_end - 1 start their trip to L1 (each thread asks for the lines of every
// blockDim-th row), so that their memory latency overlaps the work before their reads.
template <typename Key, typename Value>
__device__ __forceinline__ void sb_attention_prefetch(Key key, Value value, int j_begin, int j_end,
                                                      int visible, int d, int dv)
{
  for (int j = j_begin + threadIdx.x; j < j_end; j += blockDim.x) {
    if (j < visible)
      for (int e = 0; e < d; e += 32) sb_prefetch_l1(key(j) + e);
    for (int e = 0; e < dv; e += 32) sb_prefetch_l1(value(j) + e);
  }
}

// A GGUF product fused after a decode attention (executor/fusion.rs: Attention, MatMulGguf of
// its output, residual Add): out[qi, n] = canonical_dot(W[n, :], y[qi, :]) + add[qi, n] for
// query row qi (batch * queries + query), where y[qi] holds the `heads` heads' outputs of 64
// features one after another, so head h's outputs are exactly the 64-term tile h of every dot
// (contract: canonical-sum). w == null: no product. SbAttentionProduct: src/attention.rs.

// The block of head `head` of query row qi, its 64 outputs y_head in shared memory: the tile
// chains of every weight row (p = fma(w_k, y_k, p) from +0.0, k in the head's tile) to the
// workspace; the last head block of the query row to finish (a ticket decides WHO) folds the
// tiles of each row in order, then adds the residual term. Every thread of the block calls it.
__device__ __forceinline__ void sb_attention_product(const SbAttentionProduct& o, const float* y_head,
                                                     int head, int heads, long long qi)
{
  // y_head - 64 * head: sb_gguf_tile indexes its activations by k.
  const float* x = y_head - SB_TILE * head;
  float* part = o.partials + (qi * heads + head) * o.rows;
  for (int n = threadIdx.x; n < o.rows; n += blockDim.x)
    part[n] = sb_gguf_tile_of(o.ggml_type, o.w + n * o.row_bytes, x, SB_TILE * head, SB_TILE * head + SB_TILE);
  __threadfence();
  __syncthreads();
  __shared__ bool last;
  if (threadIdx.x == 0) {
    last = atomicAdd(o.tickets + qi, 1u) == (unsigned)heads - 1;
    if (last) o.tickets[qi] = 0u;  // ready for the next launch
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const float* all = o.partials + qi * heads * o.rows;
  for (int n = threadIdx.x; n < o.rows; n += blockDim.x) {
    float s = 0.0f;
    for (int h = 0; h < heads; ++h) s = sb_fold_sum(s, __ldcg(all + (long long)h * o.rows + n), h == 0);
    o.out[qi * o.rows + n] = o.add ? s + o.add[qi * o.rows + n] : s;
  }
}

// Prefetch (a hint) of the product's weights of head tile `head`.
__device__ __forceinline__ void sb_attention_product_prefetch(const SbAttentionProduct& o, int head,
                                                              int tile_bytes)
{
  for (int n = threadIdx.x; n < o.rows; n += blockDim.x) {
    const unsigned char* p = o.w + n * o.row_bytes + (long long)head * tile_bytes;
    sb_prefetch_l1(p);
    sb_prefetch_l1(p + tile_bytes - 1);
  }
}

// The last of the `blocks` blocks of a cache's step to finish (a ticket in counter[1] decides
// WHO, never an order of arithmetic) advances the cache's filled length counter[0] to `total`,
// after every block has read it.
__device__ __forceinline__ void sb_attention_advance(int* counter, int total, unsigned int blocks)
{
  if (counter && threadIdx.x == 0) {
    if (atomicAdd(reinterpret_cast<unsigned int*>(counter + 1), 1u) == blocks - 1) {
      counter[0] = total;
      counter[1] = 0;
    }
  }
}

// One block of an attention step: query i, query heads h0 .. h0 + rows - 1 of batch b, one of
// `blocks` blocks (this one `block`) of the step of one cache (`batch` batches, `head_groups`
// blocks of heads per query, `queries` queries), which share out its append and whose last to
// finish advances its counter; sb_attention and sb_ragged_attention run it. Keys and values
// j < past are read from k / v; those of this step, j = past .. past + new_len - 1, from
// k_new / v_new at position j - past, or, when k_new is null, from k / v as well
// (total = past + new_len <= stride). With k_new, the
// kernel also appends: the blocks share out the stores of k_new / v_new into k / v at positions
// past .. (a cache storage; no block of this launch reads them there). With a `counter` (a
// cache storage's [filled length, ticket]) past is counter[0], and the last block to finish
// advances counter[0] by new_len (sb_attention_advance). `vec4`: keys may be read as aligned
// float4 (d and every key stride are multiples of 4). Dynamic shared memory, in floats:
//   rows * d (queries) + rows * stride (scores, then probabilities) + round_tiles * rows * dv
//   (output partials) + rows * dv (output sums), round_tiles = max(1, blockDim.x / dv).
// Phases: scores, one thread per key (masked keys are -inf without a dot); the softmax of each
// row by one warp (max, exp, tile sums as lane chains folded in tile order through shuffles,
// division); the outputs, one thread per (key tile, feature), the partials folded in tile order
// per (row, feature).
__device__ __forceinline__ void sb_attention_block(
    const float* q, SbStrides qs, float* k, SbStrides ks, float* v, SbStrides vs,
    const float* k_new, SbStrides kns, const float* v_new, SbStrides vns, float* y, SbStrides ys,
    int past, int new_len, int stride, int* counter, int d, int dv, int group, int rows, int causal,
    float scale, int kv_heads, int vec4, const SbAttentionProduct& product, int tile_bytes, int i,
    int h0, long long b, int batch, long long block, long long blocks, int head_groups, int queries)
{
  extern __shared__ float smem[];
  const int g = h0 / group;  // its KV head (rows divides group)
  if (counter) past = *(volatile const int*)counter;
  const int total = past + new_len;
  const int tiles = (total + SB_TILE - 1) / SB_TILE;
  const int round_tiles = max(1, (int)blockDim.x / dv);
  float* q_rows = smem;
  float* scores = q_rows + rows * d;
  float* out_partials = scores + (long long)rows * stride;
  float* out_sums = out_partials + round_tiles * rows * dv;

  const float* kb = k + b * ks.b + (long long)g * ks.h;
  const float* knb = k_new ? k_new + b * kns.b + (long long)g * kns.h : nullptr;
  const float* vb = v + b * vs.b + (long long)g * vs.h;
  const float* vnb = v_new ? v_new + b * vns.b + (long long)g * vns.h : nullptr;
  auto key = [&](int j) {
    return (knb && j >= past) ? knb + (long long)(j - past) * kns.s : kb + (long long)j * ks.s;
  };
  auto value = [&](int j) {
    return (vnb && j >= past) ? vnb + (long long)(j - past) * vns.s : vb + (long long)j * vs.s;
  };
  const int visible = causal ? min(total, i + past + 1) : total;
  sb_attention_prefetch(key, value, 0, total, visible, d, dv);
  if (product.w) sb_attention_product_prefetch(product, h0, tile_bytes);
  if (k_new)
    sb_attention_append(k, ks, v, vs, k_new, kns, v_new, vns, batch, kv_heads, new_len, past, d, dv,
                        block, blocks);
  sb_attention_load_queries(q, qs, b, h0, i, rows, d, q_rows);
  __syncthreads();

  // 1-3. Scores: canonical dots over the head dimension, scaled; causally masked keys -inf.
  for (int j = threadIdx.x; j < total; j += blockDim.x) {
    if (j >= visible) {
      for (int r = 0; r < rows; ++r) scores[(long long)r * stride + j] = -sb_inff();
      continue;
    }
    sb_attention_key_scores(q_rows, key(j), d, rows, vec4, scale, scores + j, stride);
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
    __syncwarp();
    for (int j = lane; j < total; j += 32) row[j] = row[j] / sum;
  }
  __syncthreads();

  // 5. Outputs: canonical dots of the probabilities with V over key positions. Rounds of
  // round_tiles key tiles: each (tile, feature) item runs the chains of every row, then the
  // (row, feature) sums fold the round's partials in tile order.
  for (int base = 0; base < tiles; base += round_tiles) {
    for (int item = threadIdx.x; item < round_tiles * dv; item += blockDim.x) {
      const int tt = item / dv, e = item % dv;
      const int t = base + tt;
      if (t >= tiles) continue;
      sb_attention_tile_values(scores, stride, t * SB_TILE, min(SB_TILE, total - t * SB_TILE), e,
                               rows, value, out_partials + tt * rows * dv + e, dv);
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
  if (product.w) sb_attention_product(product, out_sums, h0, head_groups, b * queries + i);
  sb_attention_advance(counter, total, (unsigned int)blocks);
}


// Attention of one step: grid (queries, q_heads / rows, batch), a block per (query, head group,
// batch).
extern "C" __global__ void sb_attention(const float* q, SbStrides qs, float* k, SbStrides ks,
                                        float* v, SbStrides vs, const float* k_new,
                                        SbStrides kns, const float* v_new, SbStrides vns,
                                        float* y, SbStrides ys, int past, int new_len,
                                        int stride, int* counter, int d, int dv, int group,
                                        int rows, int causal, float scale, int kv_heads, int vec4,
                                        SbAttentionProduct product, int tile_bytes)
{
  const long long block = blockIdx.x + (long long)gridDim.x * (blockIdx.y + (long long)gridDim.y * blockIdx.z);
  sb_attention_block(q, qs, k, ks, v, vs, k_new, kns, v_new, vns, y, ys, past, new_len, stride, counter,
                     d, dv, group, rows, causal, scale, kv_heads, vec4, product, tile_bytes, blockIdx.x,
                     blockIdx.y * rows, blockIdx.z, gridDim.z, block,
                     (long long)gridDim.x * gridDim.y * gridDim.z, gridDim.y, gridDim.x);
}

// Ragged attention (several sequences' rows, each over its own cache storage, in one launch):
// grid (most rows of a sequence, q_heads / rows, sequences). Sequence z (seqs[z],
// SbRaggedSequence) has rows first .. first + rows - 1 of q, k_new, v_new and y (3-D
// [1, R, heads * size], strides qs, kns, vns, ys) and its storage's keys, values and counter;
// its blocks run sb_attention_block as a lone step of that sequence's rows over that storage
// would (blocks past its rows return at once), so its bits are the lone step's. `stride`: the
// score rows' pitch in shared memory, at least every sequence's past + rows.
extern "C" __global__ void sb_ragged_attention(const float* q, SbStrides qs, const float* k_new,
                                               SbStrides kns, const float* v_new, SbStrides vns,
                                               float* y, SbStrides ys,
                                               const SbRaggedSequence* seqs, int stride, int d,
                                               int dv, int group, int rows, int causal,
                                               float scale, int kv_heads, int vec4)
{
  const SbRaggedSequence s = seqs[blockIdx.z];
  const int i = blockIdx.x;
  if (i >= s.rows) return;
  const SbAttentionProduct none = {};
  sb_attention_block(q + s.first * qs.s, qs, (float*)s.k, s.ks, (float*)s.v, s.vs,
                     k_new + s.first * kns.s, kns, v_new + s.first * vns.s, vns,
                     y + s.first * ys.s, ys, 0, s.rows, stride, (int*)s.counter, d, dv, group, rows,
                     causal, scale, kv_heads, vec4, none, 0, i, blockIdx.y * rows, 0, 1,
                     i + (long long)s.rows * blockIdx.y, (long long)s.rows * gridDim.y, gridDim.y,
                     s.rows);
}

// Attention split over key chunks (few queries, long caches): the same arithmetic in two
// launches of grid (queries * chunks, q_heads / rows, batch), block (i, c) owning the key tiles
// c * chunk_tiles .. (c + 1) * chunk_tiles - 1 of query i. Workspaces, per query row
// R = (b * q_heads + h) * queries + i: scores[R * stride + j], chunk maxima
// maxima[R * chunks + c], value partials partials[(R * tiles(stride) + t) * dv + e].
//
// sb_attention_split_scores: the append (as sb_attention), then the scores of the chunk's keys
// (steps 1-3) and the chunk's maximum per row (-inf for a chunk past the keys). Dynamic shared
// memory, in floats: rows * d + rows * chunk_tiles * 64.
extern "C" __global__ void sb_attention_split_scores(
    const float* q, SbStrides qs, float* k, SbStrides ks, float* v, SbStrides vs,
    const float* k_new, SbStrides kns, const float* v_new, SbStrides vns, int past, int new_len,
    int stride, const int* counter, int d, int dv, int group, int rows, int causal, float scale,
    int kv_heads, int vec4, int chunk_tiles, float* scores_ws, float* maxima)
{
  extern __shared__ float smem[];
  const int chunks = (stride + SB_TILE * chunk_tiles - 1) / (SB_TILE * chunk_tiles);
  const int i = blockIdx.x / chunks, c = blockIdx.x % chunks;
  const int queries = gridDim.x / chunks, q_heads = gridDim.y * rows;
  const int h0 = blockIdx.y * rows;
  const long long b = blockIdx.z;
  const int g = h0 / group;
  if (counter) past = *(volatile const int*)counter;
  const int total = past + new_len;
  const int j_begin = c * chunk_tiles * SB_TILE, j_end = min(total, j_begin + chunk_tiles * SB_TILE);
  const int keys = max(0, j_end - j_begin);
  float* q_rows = smem;
  float* chunk_scores = q_rows + rows * d;
  const float* kb = k + b * ks.b + (long long)g * ks.h;
  const float* knb = k_new ? k_new + b * kns.b + (long long)g * kns.h : nullptr;
  auto key = [&](int j) {
    return (knb && j >= past) ? knb + (long long)(j - past) * kns.s : kb + (long long)j * ks.s;
  };
  const int visible = causal ? min(total, i + past + 1) : total;
  sb_attention_prefetch(key, key, j_begin, j_end, visible, d, 0);

  if (k_new) {
    const long long block = blockIdx.x + (long long)gridDim.x * (blockIdx.y + (long long)gridDim.y * blockIdx.z);
    sb_attention_append(k, ks, v, vs, k_new, kns, v_new, vns, gridDim.z, kv_heads, new_len, past, d,
                        dv, block, (long long)gridDim.x * gridDim.y * gridDim.z);
  }
  sb_attention_load_queries(q, qs, b, h0, i, rows, d, q_rows);
  __syncthreads();
  const int width = chunk_tiles * SB_TILE;
  for (int jj = threadIdx.x; jj < keys; jj += blockDim.x) {
    const int j = j_begin + jj;
    if (j >= visible) {
      for (int r = 0; r < rows; ++r) chunk_scores[r * width + jj] = -sb_inff();
      continue;
    }
    sb_attention_key_scores(q_rows, key(j), d, rows, vec4, scale, chunk_scores + jj, width);
  }
  __syncthreads();
  // Per row: the scores out, the chunk's maximum by one warp.
  const int lane = threadIdx.x & 31;
  for (int r = threadIdx.x >> 5; r < rows; r += blockDim.x >> 5) {
    const long long row = ((b * q_heads + h0 + r) * queries + i);
    float m = -sb_inff();
    for (int jj = lane; jj < keys; jj += 32) {
      const float s = chunk_scores[r * width + jj];
      scores_ws[row * stride + j_begin + jj] = s;
      m = sb_canonical_max(m, s);
    }
    for (int offset = 16; offset > 0; offset >>= 1)
      m = sb_canonical_max(m, __shfl_xor_sync(0xffffffffu, m, offset));
    if (lane == 0) maxima[row * chunks + c] = m;
  }
}

// sb_attention_split_values: per row, m = max of the chunk maxima; every block computes all
// e_j = exp(s_j - m), the tile sums and their fold (the same sum in every block), then the
// probabilities p_j = e_j / sum of its own keys and the value partials of its own tiles. The
// last block of a query row group to finish (a ticket per group decides WHO) folds the
// partials of every tile in order into y, and the last of all advances the cache counter.
// Dynamic shared memory, in floats: rows * stride (scores, exps, probabilities) +
// rows * tiles(stride) (tile sums) + 2 * rows (maxima, sums).
extern "C" __global__ void sb_attention_split_values(
    float* v, SbStrides vs, const float* v_new, SbStrides vns, float* y, SbStrides ys, int past,
    int new_len, int stride, int* counter, int dv, int group, int rows, int chunk_tiles,
    const float* scores_ws, const float* maxima, float* partials, unsigned* tickets,
    SbAttentionProduct product, int tile_bytes)
{
  extern __shared__ float smem[];
  const int chunks = (stride + SB_TILE * chunk_tiles - 1) / (SB_TILE * chunk_tiles);
  const int i = blockIdx.x / chunks, c = blockIdx.x % chunks;
  const int queries = gridDim.x / chunks, q_heads = gridDim.y * rows;
  const int h0 = blockIdx.y * rows;
  const long long b = blockIdx.z;
  const int g = h0 / group;
  if (counter) past = *(volatile const int*)counter;
  const int total = past + new_len;
  const int tiles = (total + SB_TILE - 1) / SB_TILE;
  const int tiles_cap = (stride + SB_TILE - 1) / SB_TILE;
  const int t_begin = c * chunk_tiles, t_end = min(tiles, t_begin + chunk_tiles);
  float* probs = smem;
  float* tile_sums = probs + (long long)rows * stride;
  float* row_max = tile_sums + rows * tiles_cap;
  float* row_sum = row_max + rows;
  auto row_index = [&](int r) { return (b * q_heads + h0 + r) * queries + i; };
  const float* vb = v + b * vs.b + (long long)g * vs.h;
  const float* vnb = v_new ? v_new + b * vns.b + (long long)g * vns.h : nullptr;
  auto value = [&](int j) {
    return (vnb && j >= past) ? vnb + (long long)(j - past) * vns.s : vb + (long long)j * vs.s;
  };
  sb_attention_prefetch(value, value, t_begin * SB_TILE, min(total, t_end * SB_TILE), 0, 0, dv);
  if (product.w) sb_attention_product_prefetch(product, h0, tile_bytes);

  if (t_begin < t_end) {
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
      float m = -sb_inff();
      for (int cc = 0; cc < chunks; ++cc) m = sb_canonical_max(m, maxima[row_index(r) * chunks + cc]);
      row_max[r] = m;
    }
    __syncthreads();
    for (int n = threadIdx.x; n < rows * total; n += blockDim.x) {
      const int r = n / total, j = n % total;
      probs[(long long)r * stride + j] = sb_expf(scores_ws[row_index(r) * stride + j] - row_max[r]);
    }
    __syncthreads();
    for (int n = threadIdx.x; n < rows * tiles; n += blockDim.x) {
      const int r = n / tiles, t = n % tiles;
      const float* e = probs + (long long)r * stride;
      const int j_end = min(t * SB_TILE + SB_TILE, total);
      float p = 0.0f;
      for (int j = t * SB_TILE; j < j_end; ++j) p = p + e[j];
      tile_sums[r * tiles_cap + t] = p;
    }
    __syncthreads();
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
      float s = 0.0f;
      for (int t = 0; t < tiles; ++t) s = sb_fold_sum(s, tile_sums[r * tiles_cap + t], t == 0);
      row_sum[r] = s;
    }
    __syncthreads();
    const int j_begin = t_begin * SB_TILE, j_end = min(total, t_end * SB_TILE);
    for (int n = threadIdx.x; n < rows * (j_end - j_begin); n += blockDim.x) {
      const int r = n / (j_end - j_begin), j = j_begin + n % (j_end - j_begin);
      probs[(long long)r * stride + j] = probs[(long long)r * stride + j] / row_sum[r];
    }
    __syncthreads();
    for (int item = threadIdx.x; item < (t_end - t_begin) * dv; item += blockDim.x) {
      const int t = t_begin + item / dv, e = item % dv;
      sb_attention_tile_values(probs, stride, t * SB_TILE, min(SB_TILE, total - t * SB_TILE), e,
                               rows, value, partials + (row_index(0) * tiles_cap + t) * dv + e,
                               (long long)queries * tiles_cap * dv);
    }
  }
  // The last block of this (batch, head group, query) folds every tile's partials in order.
  __threadfence();
  __syncthreads();
  __shared__ bool last;
  __shared__ float y_head[SB_TILE];
  if (threadIdx.x == 0) {
    unsigned* ticket = tickets + (b * gridDim.y + blockIdx.y) * queries + i;
    last = atomicAdd(ticket, 1u) == (unsigned)chunks - 1;
    if (last) *ticket = 0u;  // ready for the next launch
  }
  __syncthreads();
  if (last) {
    __threadfence();
    for (int f = threadIdx.x; f < rows * dv; f += blockDim.x) {
      const int r = f / dv, e = f % dv;
      const float* pr = partials + row_index(r) * tiles_cap * dv + e;
      float s = 0.0f;
      for (int t = 0; t < tiles; ++t) s = sb_fold_sum(s, __ldcg(pr + (long long)t * dv), t == 0);
      y[b * ys.b + (long long)(h0 + r) * ys.h + (long long)i * ys.s + e] = s;
      if (product.w) y_head[f] = s;  // a product has one row of 64 (checked by the host)
    }
    if (product.w) {
      __syncthreads();
      sb_attention_product(product, y_head, h0, gridDim.y, b * queries + i);
    }
  }
  sb_attention_advance(counter, total, gridDim.x * gridDim.y * gridDim.z);
}
