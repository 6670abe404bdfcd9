// Convolution and transposed convolution (contract sections `conv` and `conv-transpose`,
// docs/contract.md). Every output is the canonical dot product over (input channel within the
// group, kernel taps row-major): tiles of 64 terms, each `p = fma(x, w, p)` from +0.0 with
// x = 0.0 for a tap in the padding (executed, never skipped), partials folded left to right,
// then `+ bias[m]` when there is a bias.
// - sb_conv_direct / sb_conv_transpose_direct: one thread per output runs its whole chain
//   (groups with few input channels: depthwise above all).
// - sb_im2col / sb_im2col_transposed: the column matrix of one image (of the convolution, or
//   of the transposed convolution's gather form), `[groups][cg * klen][out_len]`, padded
//   (unreached) taps written as 0.0; the reproducible GEMM (gemm.cu) then reduces each column
//   against its filter row in the same order, so both paths give the same bits (a transposed
//   convolution's filters rearranged by sb_conv_transpose_filters).
// Spatial sizes are widened to 3 axes (leading unit axes, zero padding).

// Output position `o` (row-major in the output plane) as per-axis coordinates.
__device__ __forceinline__ void sb_conv_position(const SbConv& g, long long o, int* p)
{
  p[2] = (int)(o % g.output[2]);
  p[1] = (int)((o / g.output[2]) % g.output[1]);
  p[0] = (int)(o / ((long long)g.output[2] * g.output[1]));
}

// Whether output position `op` reads an input at kernel tap `tap` (row-major over the kernel
// axes), and where in the channel plane (`*at`): a convolution reads `i = o * s + t * d - pad`,
// a transposed convolution (gather form) the `i` with `o + pad = i * s + t * d`; in range on
// every axis, else the term is 0.0.
__device__ __forceinline__ bool sb_conv_tap_source(const SbConv& g, const int* op, int tap,
                                                   bool transposed, long long* at)
{
  const int t[3] = {tap / (g.kernel[2] * g.kernel[1]), (tap / g.kernel[2]) % g.kernel[1],
                    tap % g.kernel[2]};
  long long a = 0;
  bool ok = true;
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    int i;
    if (transposed) {
      const int q = op[k] + g.pads[k] - t[k] * g.dilations[k];
      ok = ok && q >= 0 && q % g.strides[k] == 0;
      i = q / g.strides[k];
    } else {
      i = op[k] * g.strides[k] + t[k] * g.dilations[k] - g.pads[k];
    }
    ok = ok && i >= 0 && i < g.input[k];
    a = a * g.input[k] + (ok ? i : 0);
  }
  *at = a;
  return ok;
}

// One step of a canonical chain: `p = fma(x, w, p)`; after 64 terms the tile is folded.
__device__ __forceinline__ void sb_conv_term(float x, float w, float& p, float& s, int& terms, bool& first)
{
  p = __fmaf_rn(x, w, p);
  if (++terms == SB_TILE) {
    s = sb_fold_sum(s, p, first);
    first = false;
    p = 0.0f;
    terms = 0;
  }
}

// y[n, m, o] for every output of `total`; x `[N, groups * cg, in...]`, w `[M, cg, k...]`.
extern "C" __global__ void sb_conv_direct(const float* __restrict__ x, const float* __restrict__ w,
                                          const float* __restrict__ bias, int has_bias,
                                          float* __restrict__ y, long long total, SbConv g)
{
  const long long out_len = (long long)g.output[0] * g.output[1] * g.output[2];
  const long long in_len = (long long)g.input[0] * g.input[1] * g.input[2];
  const int klen = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int channels_out = g.groups * g.mg;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long o = e % out_len, nm = e / out_len;
    const int m = (int)(nm % channels_out);
    const long long n = nm / channels_out;
    const int grp = m / g.mg;
    int op[3];
    sb_conv_position(g, o, op);
    const float* wr = w + (long long)m * g.cg * klen;
    const float* xg = x + (n * g.groups + grp) * g.cg * in_len;
    float p = 0.0f, s = 0.0f;
    int terms = 0;
    bool first = true;
    for (int c = 0; c < g.cg; ++c) {
      const float* xc = xg + c * in_len;
      for (int k0 = 0; k0 < g.kernel[0]; ++k0) {
        const int i0 = op[0] * g.strides[0] + k0 * g.dilations[0] - g.pads[0];
        for (int k1 = 0; k1 < g.kernel[1]; ++k1) {
          const int i1 = op[1] * g.strides[1] + k1 * g.dilations[1] - g.pads[1];
          for (int k2 = 0; k2 < g.kernel[2]; ++k2) {
            const int i2 = op[2] * g.strides[2] + k2 * g.dilations[2] - g.pads[2];
            float xv = 0.0f;
            if (i0 >= 0 && i0 < g.input[0] && i1 >= 0 && i1 < g.input[1] && i2 >= 0 && i2 < g.input[2])
              xv = xc[((long long)i0 * g.input[1] + i1) * g.input[2] + i2];
            sb_conv_term(xv, *wr++, p, s, terms, first);
          }
        }
      }
    }
    if (terms > 0) s = sb_fold_sum(s, p, first);
    y[e] = has_bias ? s + bias[m] : s;
  }
}

// The column matrix of the image at `x + x_offset`: cols[grp][c * klen + tap][o] is the input
// term of output `o` at (channel c, tap) of a convolution, 0.0 where it reads the padding.
// Block row y walks matrix rows, x the outputs of a row (coalesced writes, 32-bit position
// arithmetic: the host checks that a plane fits).
extern "C" __global__ void sb_im2col(const float* __restrict__ x, long long x_offset,
                                     float* __restrict__ cols, int rows, int out_len, SbConv g)
{
  const long long in_len = (long long)g.input[0] * g.input[1] * g.input[2];
  const int klen = g.kernel[0] * g.kernel[1] * g.kernel[2];
  for (int row = blockIdx.y; row < rows; row += gridDim.y) {  // row = (grp * cg + c) * klen + tap
    const int tap = row % klen;
    const float* plane = x + x_offset + (row / klen) * in_len;
    float* dst = cols + (long long)row * out_len;
    for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < out_len; o += gridDim.x * blockDim.x) {
      const int op[3] = {o / (g.output[2] * g.output[1]), (o / g.output[2]) % g.output[1], o % g.output[2]};
      long long at;
      dst[o] = sb_conv_tap_source(g, op, tap, false, &at) ? plane[at] : 0.0f;
    }
  }
}

// The column matrix of the gather form of a transposed convolution, into `cols` zeroed by the
// caller: for each input position i and tap t the one output o with o + pad = i * s + t * d
// (when inside the output) takes x[i] at cols[grp][c * klen + t][o]; outputs no input reaches
// keep 0.0. The same matrix as the gather (sb_conv_tap_source's transposed form), without a
// division per output.
extern "C" __global__ void sb_im2col_transposed(const float* __restrict__ x, long long x_offset,
                                                float* __restrict__ cols, int rows, int in_len,
                                                int out_len, SbConv g)
{
  const int klen = g.kernel[0] * g.kernel[1] * g.kernel[2];
  for (int row = blockIdx.y; row < rows; row += gridDim.y) {
    const int tap = row % klen;
    const int t[3] = {tap / (g.kernel[2] * g.kernel[1]), (tap / g.kernel[2]) % g.kernel[1], tap % g.kernel[2]};
    const float* plane = x + x_offset + (long long)(row / klen) * in_len;
    float* dst = cols + (long long)row * out_len;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < in_len; i += gridDim.x * blockDim.x) {
      const int ip[3] = {i / (g.input[2] * g.input[1]), (i / g.input[2]) % g.input[1], i % g.input[2]};
      int o = 0;
      bool ok = true;
#pragma unroll
      for (int k = 0; k < 3; ++k) {
        const int ok_k = ip[k] * g.strides[k] + t[k] * g.dilations[k] - g.pads[k];
        ok = ok && ok_k >= 0 && ok_k < g.output[k];
        o = o * g.output[k] + ok_k;
      }
      if (ok) dst[o] = plane[i];
    }
  }
}

// Transposed convolution, gather form: y[n, m, o] over (c, tap) of w[grp * cg + c, mm, tap]
// times x[n, grp * cg + c, i] with o + pad_begin = i * s + tap * d on every axis, else 0.0.
// Here `in` / `out` are the input / output spatial sizes, x `[N, groups * cg, in...]`,
// w `[groups * cg, mg, k...]`, y `[N, groups * mg, out...]`.
extern "C" __global__ void sb_conv_transpose_direct(const float* __restrict__ x,
                                                    const float* __restrict__ w,
                                                    const float* __restrict__ bias, int has_bias,
                                                    float* __restrict__ y, long long total, SbConv g)
{
  const long long out_len = (long long)g.output[0] * g.output[1] * g.output[2];
  const long long in_len = (long long)g.input[0] * g.input[1] * g.input[2];
  const int klen = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int channels_out = g.groups * g.mg;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long o = e % out_len, nm = e / out_len;
    const int m = (int)(nm % channels_out);
    const long long n = nm / channels_out;
    const int grp = m / g.mg, mm = m % g.mg;
    int op[3];
    sb_conv_position(g, o, op);
    float p = 0.0f, s = 0.0f;
    int terms = 0;
    bool first = true;
    for (int c = 0; c < g.cg; ++c) {
      const int ci = grp * g.cg + c;
      const float* xc = x + (n * g.groups * g.cg + ci) * in_len;
      const float* wc = w + ((long long)ci * g.mg + mm) * klen;
      for (int tap = 0; tap < klen; ++tap) {
        long long at;
        const float xv = sb_conv_tap_source(g, op, tap, true, &at) ? xc[at] : 0.0f;
        sb_conv_term(xv, wc[tap], p, s, terms, first);
      }
    }
    if (terms > 0) s = sb_fold_sum(s, p, first);
    y[e] = has_bias ? s + bias[m] : s;
  }
}

// The transposed convolution's weight [groups * cg, mg, klen] rearranged as the GEMM's filters
// [groups][mg][cg * klen] (an exact move).
extern "C" __global__ void sb_conv_transpose_filters(const float* __restrict__ w,
                                                     float* __restrict__ filters, long long total,
                                                     SbConv g)
{
  const int klen = g.kernel[0] * g.kernel[1] * g.kernel[2];
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    // e = ((grp * mg + mm) * cg + c) * klen + tap
    const int tap = (int)(e % klen);
    const long long rest = e / klen;
    const int c = (int)(rest % g.cg);
    const long long gm = rest / g.cg;
    const int mm = (int)(gm % g.mg);
    const long long grp = gm / g.mg;
    filters[e] = w[((grp * g.cg + c) * g.mg + mm) * klen + tap];
  }
}
