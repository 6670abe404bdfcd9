// Recurrent layers (samebits-ops families/recurrent.rs, `Recurrent`: RNN, GRU, LSTM): one block
// per sequence (direction d, batch row n: block d * batch + n). Each step, one lane per gate
// row computes the row's products with x_t and h (a warp per 32 rows, the rows' pieces staged
// through shared memory so that reads are coalesced), then one thread per hidden unit its gates
// and states; shared memory holds the products and the states, and barriers separate the
// phases. Each gate's pre-activation is
// canonical-dot(x_t, W row) + canonical-dot(h, R row), then the peephole term, Wb and Rb added
// left to right, clipped, then the activation (contract section `recurrent`): `Recurrent::pre`
// and `run_sequence` operation for operation, with --fmad=false.
//
// buffers: X, W, R, then B, initial_h, initial_c, P where present (ints 8 to 11: each one's
// buffer, -1 when absent), then the table (buffer ints[12]): the batch rows' sequence lengths,
// then per direction its three functions as (code, p0, p1), code >= 0 the activation of
// sb_activation, -1 Relu, -2 Tanh. ints: cell (0 RNN, 1 GRU, 2 GRU with linear_before_reset,
// 3 LSTM), directions, seq, batch, input, hidden, batch_first, clip on, the four optional
// buffers, the table's buffer, whether a one-direction layer runs in reverse; floats: clip.
// Outputs Y, Y_h, Y_c (LSTM). Dynamic shared memory: 2 * rows + 4 * hidden floats, then each
// warp's staging area.

// One function of the cell's table at `v`.
__device__ __forceinline__ float sb_recurrent_function(const float* f, float v)
{
  const int code = (int)f[0];
  if (code == -1) return sb_relu(v);
  if (code == -2) return sb_tanhf(v);
  return sb_activation(code, v, f[1], f[2]);
}

// A warp reduces SB_RECURRENT_ROWS rows at once and stages pieces of SB_RECURRENT_COLS columns
// of them (one padding column against bank conflicts); both from samebits-ops
// (RECURRENT_STAGE_ROWS / _COLS, the device ABI). A reduction tile is a whole number of pieces.
#define SB_RECURRENT_PER_LANE (SB_RECURRENT_ROWS * SB_RECURRENT_COLS / 32)
static_assert(SB_TILE % SB_RECURRENT_COLS == 0, "a reduction tile ends at a piece's end");
static_assert(SB_RECURRENT_ROWS == 32, "one row per lane of a warp");

// canonical-dot(row, v) of `len` terms for the rows row0 + lane of the row-major matrix `m`
// (`count` rows of `len` columns; lanes past `count` return 0): each lane one row's chain of
// fused products in index order, tiles of SB_TILE terms folded left to right (samebits-kernels
// `canonical_dot`). The warp stages the rows' pieces through `stage` (shared memory,
// SB_RECURRENT_ROWS * (SB_RECURRENT_COLS + 1) floats) so that global reads are coalesced, and
// loads the next piece while it reduces this one; the staging moves values and never changes
// the order of a chain.
__device__ float sb_recurrent_dots(const float* m, int row0, int count, const float* v, int len,
                                   float* stage)
{
  const int lane = threadIdx.x & 31;
  const int pitch = SB_RECURRENT_COLS + 1;
  float piece[SB_RECURRENT_PER_LANE];
  // Element e = lane + 32 * q of the piece at column k0: row e / COLS, column e % COLS.
  const auto load = [&](int k0) {
#pragma unroll
    for (int q = 0; q < SB_RECURRENT_PER_LANE; ++q) {
      const int e = lane + 32 * q, i = e / SB_RECURRENT_COLS, k = k0 + e % SB_RECURRENT_COLS;
      piece[q] = (row0 + i < count && k < len) ? m[(long long)(row0 + i) * len + k] : 0.0f;
    }
  };
  float s = 0.0f, p = 0.0f;
  if (len > 0) load(0);
  for (int k0 = 0; k0 < len; k0 += SB_RECURRENT_COLS) {
#pragma unroll
    for (int q = 0; q < SB_RECURRENT_PER_LANE; ++q) {
      const int e = lane + 32 * q;
      stage[(e / SB_RECURRENT_COLS) * pitch + e % SB_RECURRENT_COLS] = piece[q];
    }
    __syncwarp();
    if (k0 + SB_RECURRENT_COLS < len) load(k0 + SB_RECURRENT_COLS);
    const float* row = stage + lane * pitch;
    const int cols = min(SB_RECURRENT_COLS, len - k0);
    if (cols == SB_RECURRENT_COLS) {
#pragma unroll
      for (int kk = 0; kk < SB_RECURRENT_COLS; ++kk) p = __fmaf_rn(row[kk], v[k0 + kk], p);
    } else {
      for (int kk = 0; kk < cols; ++kk) p = __fmaf_rn(row[kk], v[k0 + kk], p);
    }
    const int end = k0 + cols;
    if (end % SB_TILE == 0 || end == len) {
      s = sb_fold_sum(s, p, end <= SB_TILE);
      p = 0.0f;
    }
    __syncwarp();
  }
  return row0 + lane < count ? s : 0.0f;
}

extern "C" __global__ void sb_recurrent(const SbSourceKernel args)
{
  extern __shared__ float sb_recurrent_state[];
  const int cell = (int)args.ints[0], directions = (int)args.ints[1], seq = (int)args.ints[2];
  const int batch = (int)args.ints[3], input = (int)args.ints[4], hidden = (int)args.ints[5];
  const bool batch_first = args.ints[6] != 0, clip_on = args.ints[7] != 0;
  const float clip = args.floats[0];
  const int d = blockIdx.x / batch, n = blockIdx.x % batch;
  const float* table = args.buffers[args.ints[12]];
  const int len = (int)table[n];
  const float* f = table + batch + d * 9;
  const bool reverse = directions == 2 ? d == 1 : args.ints[13] != 0;
  const int rows = (cell == 3 ? 4 : cell == 0 ? 1 : 3) * hidden;
  const float* w = args.buffers[1] + (long long)d * rows * input;
  const float* r = args.buffers[2] + (long long)d * rows * hidden;
  const float* wb = args.ints[8] >= 0 ? args.buffers[args.ints[8]] + (long long)d * 2 * rows : nullptr;
  const float* h0 = args.ints[9] >= 0 ? args.buffers[args.ints[9]] : nullptr;
  const float* c0 = args.ints[10] >= 0 ? args.buffers[args.ints[10]] : nullptr;
  const float* p = args.ints[11] >= 0 ? args.buffers[args.ints[11]] + (long long)d * 3 * hidden : nullptr;
  float* xw = sb_recurrent_state;  // per row: canonical-dot(x_t, W row)
  float* hr = xw + rows;           // per row: canonical-dot(h, R row)
  float* h = hr + rows;
  float* next = h + hidden;
  float* c = next + hidden;  // LSTM: the cell state; GRU: the update gate z
  float* g = c + hidden;     // GRU: the reset gate r (r * h without linear_before_reset)
  float* stage = g + hidden + (threadIdx.x / 32) * SB_RECURRENT_ROWS * (SB_RECURRENT_COLS + 1);
  const int warp_rows = (blockDim.x / 32) * SB_RECURRENT_ROWS;
  const long long state_at = batch_first ? ((long long)n * directions + d) * hidden
                                         : ((long long)d * batch + n) * hidden;
  const auto y_at = [&](int t) {
    return batch_first ? (((long long)n * seq + t) * directions + d) * hidden
                       : (((long long)t * directions + d) * batch + n) * hidden;
  };
  for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
    h[j] = h0 ? h0[state_at + j] : 0.0f;
    c[j] = c0 ? c0[state_at + j] : 0.0f;
    for (int t = len; t < seq; ++t) args.out[0][y_at(t) + j] = 0.0f;
  }
  __syncthreads();
  const auto clipped = [&](float v) {
    return clip_on ? (v < -clip ? -clip : (v > clip ? clip : v)) : v;
  };
  // The pre-activation of row `row` from its two products and the peephole term `extra`.
  const auto pre = [&](int row, float x_w, float h_r, float extra) {
    return clipped((((x_w + h_r) + extra) + (wb ? wb[row] : 0.0f)) + (wb ? wb[rows + row] : 0.0f));
  };
  // GRU without linear_before_reset takes its candidate rows' R product with r * h, later.
  const int h_rows = cell == 1 ? 2 * hidden : rows;
  for (int step = 0; step < len; ++step) {
    const int t = reverse ? len - 1 - step : step;
    const float* x = args.buffers[0] +
                     (batch_first ? (long long)n * seq + t : (long long)t * batch + n) * input;
    // Every row's products, one lane per row, a warp per SB_RECURRENT_ROWS rows.
    for (int row0 = (threadIdx.x / 32) * SB_RECURRENT_ROWS; row0 < rows; row0 += warp_rows) {
      const int row = row0 + (threadIdx.x & 31);
      const float x_w = sb_recurrent_dots(w, row0, rows, x, input, stage);
      const float h_r = sb_recurrent_dots(r, row0, h_rows, h, hidden, stage);
      if (row < rows) xw[row] = x_w;
      if (row < h_rows) hr[row] = h_r;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
      if (cell == 3) {
        const float cj = c[j];
        const float i = sb_recurrent_function(f, pre(j, xw[j], hr[j], p ? p[j] * cj : 0.0f));
        const int fr = 2 * hidden + j, cr = 3 * hidden + j, orow = hidden + j;
        const float forget =
            sb_recurrent_function(f, pre(fr, xw[fr], hr[fr], p ? p[2 * hidden + j] * cj : 0.0f));
        const float candidate = sb_recurrent_function(f + 3, pre(cr, xw[cr], hr[cr], 0.0f));
        const float state = forget * cj + i * candidate;
        const float o =
            sb_recurrent_function(f, pre(orow, xw[orow], hr[orow], p ? p[hidden + j] * state : 0.0f));
        next[j] = o * sb_recurrent_function(f + 6, state);
        c[j] = state;  // read by this unit only
      } else if (cell == 0) {
        next[j] = sb_recurrent_function(f, pre(j, xw[j], hr[j], 0.0f));
      } else {
        c[j] = sb_recurrent_function(f, pre(j, xw[j], hr[j], 0.0f));
        const int rr = hidden + j;
        const float reset = sb_recurrent_function(f, pre(rr, xw[rr], hr[rr], 0.0f));
        g[j] = cell == 2 ? reset : reset * h[j];
      }
    }
    if (cell == 1 || cell == 2) {
      __syncthreads();
      if (cell == 1) {
        // The candidate rows' R products with r * h.
        const float* rc = r + (long long)2 * hidden * hidden;
        for (int row0 = (threadIdx.x / 32) * SB_RECURRENT_ROWS; row0 < hidden; row0 += warp_rows) {
          const float h_r = sb_recurrent_dots(rc, row0, hidden, g, hidden, stage);
          if (row0 + (threadIdx.x & 31) < hidden) hr[2 * hidden + row0 + (threadIdx.x & 31)] = h_r;
        }
        __syncthreads();
      }
      for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
        const int row = 2 * hidden + j;
        const float v =
            cell == 2
                ? clipped((xw[row] + g[j] * (hr[row] + (wb ? wb[rows + row] : 0.0f))) + (wb ? wb[row] : 0.0f))
                : pre(row, xw[row], hr[row], 0.0f);
        const float candidate = sb_recurrent_function(f + 3, v);
        next[j] = (1.0f - c[j]) * candidate + c[j] * h[j];
      }
    }
    __syncthreads();
    for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
      h[j] = next[j];
      args.out[0][y_at(t) + j] = next[j];
    }
    __syncthreads();
  }
  for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
    args.out[1][state_at + j] = h[j];
    if (cell == 3) args.out[2][state_at + j] = c[j];
  }
}
