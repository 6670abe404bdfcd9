// `samebits::ElementwiseChain` and inference BatchNormalization (contract sections
// `elementwise-fusion` and `normalization`): for each output element the chain's steps run in
// order, each the single IEEE operation of its op (no contraction, --fmad=false), results
// kept in registers. Operands are chain inputs (the whole output shape, one element, one value
// per channel = axis 1, per row of the last axis or per position along it) or earlier steps'
// results.

// SbChain, its limits and its codes are in the device ABI (src/chain.rs, src/device_abi.rs).
// Step codes: below SB_CHAIN_RELU the binary operations of sb_binary_op (elementwise.cu),
// SB_CHAIN_RELU, SB_CHAIN_CLIP (operands x, lo, hi), SB_CHAIN_BATCH_NORM (operands x, scale,
// bias, mean, var), SB_CHAIN_ACTIVATION + a the activation a of sb_activation (generated from
// samebits-math's list, src/program.rs) with parameters eps, p1.

template <typename I>
__device__ __forceinline__ float sb_chain_operand(const SbChain& c, const float* t, int a, I i, I ch)
{
  if (a < 0) return t[-1 - a];
  const float* p = c.inputs[a];
  switch (c.layout[a]) {
    case SB_CHAIN_FULL: return p[i];
    case SB_CHAIN_SCALAR: return p[0];
    case SB_CHAIN_CHANNEL: return p[ch];
    case SB_CHAIN_ROW: return p[i / (I)c.last];
    default: return p[i % (I)c.last];
  }
}

// The chain's loop with the index arithmetic in `I` (32-bit whenever `n` fits).
template <typename I>
__device__ __forceinline__ void sb_chain_loop(float* __restrict__ y, I n, const SbChain& c)
{
  for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
    const I ch = (i / (I)c.inner) % (I)c.channels;
    float t[SB_CHAIN_STEPS];
    for (int s = 0; s < c.steps; ++s) {
      const int* a = c.arg[s];
      const float x = sb_chain_operand(c, t, a[0], i, ch);
      float r;
      if (c.op[s] < SB_CHAIN_RELU) {
        r = sb_binary_op(c.op[s], x, sb_chain_operand(c, t, a[1], i, ch));
      } else if (c.op[s] == SB_CHAIN_RELU) {
        r = (x > 0.0f || x != x) ? x : 0.0f;
      } else if (c.op[s] == SB_CHAIN_CLIP) {
        r = x;
        if (a[1] != SB_CHAIN_ABSENT) r = sb_canonical_max(r, sb_chain_operand(c, t, a[1], i, ch));
        if (a[2] != SB_CHAIN_ABSENT) r = sb_canonical_min(r, sb_chain_operand(c, t, a[2], i, ch));
      } else if (c.op[s] >= SB_CHAIN_ACTIVATION) {
        r = sb_activation(c.op[s] - SB_CHAIN_ACTIVATION, x, c.eps[s], c.p1[s]);
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

extern "C" __global__ void sb_chain(float* __restrict__ y, long long n, SbChain c)
{
  if (n <= 0x7fffffffLL) sb_chain_loop<unsigned>(y, (unsigned)n, c);
  else sb_chain_loop<long long>(y, n, c);
}
