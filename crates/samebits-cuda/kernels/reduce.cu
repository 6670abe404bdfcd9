// Row kernels: reductions along an axis, softmax / log-softmax, LayerNorm and RMSNorm.
//
// Each follows its contract section (docs/contract.md): `reduce-axes` (sum, sum of squares,
// product: canonical-sum; max, min: reduce-extrema), `softmax` and `normalization`. Canonical
// sums go through sb_block_canonical (canonical.cu): tiles in parallel, fold left to right by
// one thread, so a row's bits depend neither on the block size nor on the number of rows.
// Row kernels take one block per row and `tiles` floats of dynamic shared memory.

// Reduction codes SB_REDUCE_*: `kind_code` of src/reduce.rs, in the device ABI.

// y[i] = y[i] / d, IEEE division: ReduceMean's and GlobalAveragePool's count (contract
// `reduce-mean`, `pool`).
extern "C" __global__ void sb_divide_by(float* y, long long n, float d)
{
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    y[i] = y[i] / d;
  }
}

// One thread per output (o, i) of x viewed as [outer, len, inner]: the whole canonical order in
// one thread; adjacent threads read adjacent i (coalesced when inner > 1).
extern "C" __global__ void sb_reduce_axis_per_thread(const float* x, float* y, long long outer,
                                                     int len, long long inner, int kind)
{
  const long long out = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (out >= outer * inner) return;
  const float* base = x + (out / inner) * len * inner + out % inner;
  const float init = kind == SB_REDUCE_PROD ? 1.0f
                     : kind == SB_REDUCE_MAX ? -sb_inff()
                     : kind == SB_REDUCE_MIN ? sb_inff()
                                             : 0.0f;
  float s = init;
  for (int k0 = 0; k0 < len; k0 += SB_TILE) {
    const int k_end = min(k0 + SB_TILE, len);
    float p = init;
    for (int k = k0; k < k_end; ++k) {
      const float v = base[(long long)k * inner];
      switch (kind) {
        case SB_REDUCE_SUM: p = p + v; break;
        case SB_REDUCE_SUM_SQUARES: p = __fmaf_rn(v, v, p); break;
        case SB_REDUCE_PROD: p = p * v; break;
        case SB_REDUCE_MAX: p = sb_canonical_max(p, v); break;
        default: p = sb_canonical_min(p, v); break;
      }
    }
    if (k0 == 0) {
      s = p;
    } else {
      switch (kind) {
        case SB_REDUCE_SUM:
        case SB_REDUCE_SUM_SQUARES: s = s + p; break;
        case SB_REDUCE_PROD: s = s * p; break;
        case SB_REDUCE_MAX: s = sb_canonical_max(s, p); break;
        default: s = sb_canonical_min(s, p); break;
      }
    }
  }
  y[out] = s;
}

// One block per contiguous row of `len` (inner == 1): tile partials in parallel.
extern "C" __global__ void sb_reduce_rows(const float* x, float* y, int len, int kind)
{
  extern __shared__ float partials[];
  const float* row = x + (long long)blockIdx.x * len;
  float r;
  switch (kind) {
    case SB_REDUCE_SUM:
      r = sb_block_canonical(len, 0.0f, [&](float p, int k) { return p + row[k]; },
                             [](float s, float p) { return s + p; }, partials);
      break;
    case SB_REDUCE_SUM_SQUARES:
      r = sb_block_canonical(len, 0.0f, [&](float p, int k) { return __fmaf_rn(row[k], row[k], p); },
                             [](float s, float p) { return s + p; }, partials);
      break;
    case SB_REDUCE_PROD:
      r = sb_block_canonical(len, 1.0f, [&](float p, int k) { return p * row[k]; },
                             [](float s, float p) { return s * p; }, partials);
      break;
    case SB_REDUCE_MAX:
      r = sb_block_extremum(row, len, -sb_inff(), [](float a, float b) { return sb_canonical_max(a, b); });
      break;
    default:
      r = sb_block_extremum(row, len, sb_inff(), [](float a, float b) { return sb_canonical_min(a, b); });
      break;
  }
  if (threadIdx.x == 0) y[blockIdx.x] = r;
}

// contract: softmax. m = max(x) from -inf; e_k = exp(x_k - m); s = canonical_sum(e);
// softmax y_k = e_k / s, log-softmax y_k = (x_k - m) - log(s).
extern "C" __global__ void sb_softmax_rows(const float* x, float* y, int len, int log_softmax)
{
  extern __shared__ float partials[];
  const float* xr = x + (long long)blockIdx.x * len;
  float* yr = y + (long long)blockIdx.x * len;
  const float m = sb_block_extremum(xr, len, -sb_inff(),
                                    [](float a, float b) { return sb_canonical_max(a, b); });
  if (log_softmax) {
    const float s = sb_block_canonical(len, 0.0f, [&](float p, int k) { return p + sb_expf(xr[k] - m); },
                                       [](float s, float p) { return s + p; }, partials);
    const float log_s = sb_logf(s);
    for (int k = threadIdx.x; k < len; k += blockDim.x) yr[k] = (xr[k] - m) - log_s;
  } else {
    for (int k = threadIdx.x; k < len; k += blockDim.x) yr[k] = sb_expf(xr[k] - m);
    __syncthreads();
    const float s = sb_block_canonical(len, 0.0f, [&](float p, int k) { return p + yr[k]; },
                                       [](float s, float p) { return s + p; }, partials);
    for (int k = threadIdx.x; k < len; k += blockDim.x) yr[k] = yr[k] / s;
  }
}

// contract: normalization (LayerNormalization). mean = canonical_sum(x) / n; d_k = x_k - mean;
// var = canonical_dot(d, d) / n; rstd = 1 / sqrt(var + eps); y_k = (d_k * rstd) * scale_k + bias_k
// (no bias term when has_bias == 0). mean and rstd of each row go to `stats` ([rows, 2]).
extern "C" __global__ void sb_layer_norm_rows(const float* x, const float* scale, const float* bias,
                                              int has_bias, float* y, float* stats, int len, float eps)
{
  extern __shared__ float partials[];
  const float* xr = x + (long long)blockIdx.x * len;
  float* yr = y + (long long)blockIdx.x * len;
  const float n = (float)len;
  const float mean = sb_block_canonical(len, 0.0f, [&](float p, int k) { return p + xr[k]; },
                                        [](float s, float p) { return s + p; }, partials) / n;
  for (int k = threadIdx.x; k < len; k += blockDim.x) yr[k] = xr[k] - mean;
  __syncthreads();
  const float var = sb_block_canonical(len, 0.0f, [&](float p, int k) { return __fmaf_rn(yr[k], yr[k], p); },
                                       [](float s, float p) { return s + p; }, partials) / n;
  const float rstd = 1.0f / sb_sqrtf(var + eps);
  for (int k = threadIdx.x; k < len; k += blockDim.x) {
    const float scaled = (yr[k] * rstd) * scale[k];
    yr[k] = has_bias ? scaled + bias[k] : scaled;
  }
  if (threadIdx.x == 0) {
    stats[2 * (long long)blockIdx.x] = mean;
    stats[2 * (long long)blockIdx.x + 1] = rstd;
  }
}

// contract: normalization (RMSNormalization). ms = canonical_dot(x, x) / n;
// rrms = 1 / sqrt(ms + eps); y_k = (x_k * rrms) * scale_k.
extern "C" __global__ void sb_rms_norm_rows(const float* x, const float* scale, float* y, int len,
                                            float eps)
{
  extern __shared__ float partials[];
  const float* xr = x + (long long)blockIdx.x * len;
  float* yr = y + (long long)blockIdx.x * len;
  const float ms = sb_block_canonical(len, 0.0f, [&](float p, int k) { return __fmaf_rn(xr[k], xr[k], p); },
                                      [](float s, float p) { return s + p; }, partials) / (float)len;
  const float rrms = 1.0f / sb_sqrtf(ms + eps);
  for (int k = threadIdx.x; k < len; k += blockDim.x) yr[k] = (xr[k] * rrms) * scale[k];
}
