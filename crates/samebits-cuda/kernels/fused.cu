// Fused elementwise steps (the executor's fusions, src/executor/fusion.rs): each computes the
// operations of the steps it replaces, in their order, each rounded once (contract:
// activation, arithmetic), so the bits are the unfused steps' bits.

// The SiLU gate of a llama MLP: Sigmoid(g), Mul(g, s), Mul(t, u): h = (g * sigmoid(g)) * u.
extern "C" __global__ void sb_silu_mul(const float* g, const float* u, float* h, long long n)
{
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const float v = g[i];
    h[i] = (v * sb_sigmoidf(v)) * u[i];
  }
}
