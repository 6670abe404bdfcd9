// Resize (contract section `resize`). The host computes each axis' taps (samebits-ops
// `Resize::taps`, the CPU's own code); per output element this kernel forms the row-major
// product of its axes' tap lists (first axis slowest), each weight the product of the axes'
// weights left to right, and writes: the extrapolation value when an axis has none for its
// coordinate; the input element itself for a single tap of weight 1; otherwise the canonical
// dot product of the weights with the tap values (tiles of 64, `p = fma(w, v, p)` from +0.0,
// folded left to right; no taps give +0.0).

// first[c] / count[c]: the taps of coordinate entry c in `offsets` / `weights` (count -1: the
// extrapolation value).
extern "C" __global__ void sb_resize(const float* __restrict__ x, float* __restrict__ y,
                                     long long total, const int* __restrict__ first,
                                     const int* __restrict__ count,
                                     const long long* __restrict__ offsets,
                                     const float* __restrict__ weights, SbResize r)
{
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    int fst[SB_MAX_RANK], cnt[SB_MAX_RANK], idx[SB_MAX_RANK];
    long long rest = e, taps = 1;
    bool extrapolate = false;
    for (int a = r.rank - 1; a >= 0; --a) {
      const int c = r.coord_base[a] + (int)(rest % r.out[a]);
      rest /= r.out[a];
      fst[a] = first[c];
      cnt[a] = count[c];
      idx[a] = 0;
      extrapolate = extrapolate || cnt[a] < 0;
      taps *= cnt[a] < 0 ? 0 : cnt[a];
    }
    if (extrapolate) {
      y[e] = r.extrapolation;
      continue;
    }
    float p = 0.0f, s = 0.0f;
    int terms = 0;
    bool folded = false;
    for (long long t = 0; t < taps; ++t) {
      long long at = 0;
      float w = 1.0f;
      for (int a = 0; a < r.rank; ++a) {
        at += offsets[fst[a] + idx[a]];
        const float wa = weights[fst[a] + idx[a]];
        w = a == 0 ? wa : w * wa;
      }
      if (taps == 1 && w == 1.0f) {
        s = x[at];
        folded = true;
        terms = 0;
        break;
      }
      p = __fmaf_rn(w, x[at], p);
      if (++terms == SB_TILE) {
        s = sb_fold_sum(s, p, !folded);
        folded = true;
        p = 0.0f;
        terms = 0;
      }
      for (int a = r.rank - 1; a >= 0; --a) {  // odometer, last axis fastest
        if (++idx[a] < cnt[a]) break;
        idx[a] = 0;
      }
    }
    if (terms > 0) s = sb_fold_sum(s, p, !folded);
    y[e] = s;
  }
}
