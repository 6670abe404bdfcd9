// Max and average pooling (contract section `pool`): one thread per output walks its window's
// taps in row-major kernel order, exactly as samebits-kernels' pool_f32: taps in the input are
// terms (max: sb_canonical_max from -inf; average: the canonical sum `p = p + x` in tiles of 64
// from +0.0, folded left to right, then one division by the count), taps past the padded input
// are skipped, and taps in the padding count only for `count_include_pad`. Spatial sizes are
// widened to 3 axes (leading unit axes, zero padding).

extern "C" __global__ void sb_pool(const float* __restrict__ x, float* __restrict__ y,
                                   long long total, SbPool g)
{
  const long long out_len = (long long)g.output[0] * g.output[1] * g.output[2];
  const long long in_len = (long long)g.input[0] * g.input[1] * g.input[2];
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long o = e % out_len, plane = e / out_len;
    const int op[3] = {(int)(o / ((long long)g.output[2] * g.output[1])), (int)((o / g.output[2]) % g.output[1]),
                       (int)(o % g.output[2])};
    const float* xp = x + plane * in_len;
    float mx = -sb_inff(), p = 0.0f, s = 0.0f;
    int terms = 0, inside = 0, inside_padded = 0;
    bool first = true;
    for (int k0 = 0; k0 < g.kernel[0]; ++k0)
      for (int k1 = 0; k1 < g.kernel[1]; ++k1)
        for (int k2 = 0; k2 < g.kernel[2]; ++k2) {
          const int t[3] = {k0, k1, k2};
          int pos[3];
          bool beyond = false, in_input = true;
#pragma unroll
          for (int a = 0; a < 3; ++a) {
            const int padded = op[a] * g.strides[a] + t[a] * g.dilations[a];
            beyond = beyond || padded >= g.pads_begin[a] + g.input[a] + g.pads_end[a];
            pos[a] = padded - g.pads_begin[a];
            in_input = in_input && pos[a] >= 0 && pos[a] < g.input[a];
          }
          if (beyond) continue;
          ++inside_padded;
          if (!in_input) continue;
          ++inside;
          const float v = xp[((long long)pos[0] * g.input[1] + pos[1]) * g.input[2] + pos[2]];
          if (g.kind == 0) {
            mx = sb_canonical_max(mx, v);
          } else {
            p = p + v;
            if (++terms == SB_TILE) {
              s = sb_fold_sum(s, p, first);
              first = false;
              p = 0.0f;
              terms = 0;
            }
          }
        }
    if (g.kind == 0) {
      y[e] = mx;
    } else {
      if (terms > 0) s = sb_fold_sum(s, p, first);
      const int count = g.kind == 2 ? inside_padded : inside;
      y[e] = inside == 0 ? 0.0f : s / (float)count;
    }
  }
}
