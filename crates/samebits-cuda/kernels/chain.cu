// `samebits::ElementwiseChain` and inference BatchNormalization (contract sections
// `elementwise-fusion` and `normalization`): for each output element the chain's steps run in
// order, each the single IEEE operation of its op (no contraction, --fmad=false), results
// kept in registers. Operands are chain inputs (the whole output shape, one element, or one
// value per channel = axis 1) or earlier steps' results.

#define SB_CHAIN_STEPS 16
#define SB_CHAIN_INPUTS 32
#define SB_CHAIN_ABSENT (-1000)

// Step codes: 0-5 the binary operations of sb_binary_op (elementwise.cu), 6 relu, 7 clip
// (operands x, lo, hi), 8 batch norm (operands x, scale, bias, mean, var), 16 + a the
// activation a of sb_activation (generated from samebits-math's list, src/program.rs) with
// parameters eps, p1.
struct SbChain {
  const float* in[SB_CHAIN_INPUTS];
  int layout[SB_CHAIN_INPUTS];  // 0 full, 1 one element, 2 one per channel
  int op[SB_CHAIN_STEPS];
  int arg[SB_CHAIN_STEPS][5];   // i >= 0: input i; -1 - j: step j; SB_CHAIN_ABSENT
  float eps[SB_CHAIN_STEPS];    // batch norm's epsilon, or an activation's first parameter
  float p1[SB_CHAIN_STEPS];     // an activation's second parameter
  int steps, channels;
  long long inner;              // elements per (image, channel) row
};

__device__ __forceinline__ float sb_chain_operand(const SbChain& c, const float* t, int a,
                                                  long long i, long long ch)
{
  if (a < 0) return t[-1 - a];
  const float* p = c.in[a];
  return c.layout[a] == 0 ? p[i] : (c.layout[a] == 1 ? p[0] : p[ch]);
}

extern "C" __global__ void sb_chain(float* __restrict__ y, long long n, SbChain c)
{
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const long long ch = (i / c.inner) % c.channels;
    float t[SB_CHAIN_STEPS];
    for (int s = 0; s < c.steps; ++s) {
      const int* a = c.arg[s];
      const float x = sb_chain_operand(c, t, a[0], i, ch);
      float r;
      if (c.op[s] <= 5) {
        r = sb_binary_op(c.op[s], x, sb_chain_operand(c, t, a[1], i, ch));
      } else if (c.op[s] == 6) {
        r = (x > 0.0f || x != x) ? x : 0.0f;
      } else if (c.op[s] == 7) {
        r = x;
        if (a[1] != SB_CHAIN_ABSENT) r = sb_canonical_max(r, sb_chain_operand(c, t, a[1], i, ch));
        if (a[2] != SB_CHAIN_ABSENT) r = sb_canonical_min(r, sb_chain_operand(c, t, a[2], i, ch));
      } else if (c.op[s] >= 16) {
        r = sb_activation(c.op[s] - 16, x, c.eps[s], c.p1[s]);
      } else {
        const float scale = sb_chain_operand(c, t, a[1], i, ch);
        const float bias = sb_chain_operand(c, t, a[2], i, ch);
        const float mean = sb_chain_operand(c, t, a[3], i, ch);
        const float var = sb_chain_operand(c, t, a[4], i, ch);
        const float rstd = 1.0f / sb_sqrtf(var + c.eps[s]);
        r = ((x - mean) * rstd) * scale + bias;
      }
      t[s] = r;
    }
    y[i] = t[c.steps - 1];
  }
}
