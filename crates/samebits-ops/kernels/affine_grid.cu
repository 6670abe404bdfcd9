// AffineGrid (samebits-ops families/resize.rs, `AffineGrid`): one thread per output value.
// buffers: theta [N, dims, dims + 1], then the base coordinates of W, H and (3-D) D, resolved
// on the host by the CPU's code; ints: N, D, H, W, dims. Each value is the canonical dot
// product (contract `canonical-sum`, one tile: fma from 0 in term order) of a theta row with
// (x, y[, z], 1).

extern "C" __global__ void sb_affine_grid(const SbSourceKernel args)
{
  const long long d_len = args.ints[1], h_len = args.ints[2], w_len = args.ints[3];
  const int dims = (int)args.ints[4];
  const float* theta = args.buffers[0];
  for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < args.count;
       o += (long long)gridDim.x * blockDim.x) {
    const long long cell = o / dims;
    const int j = (int)(o % dims);
    const long long n = cell / (d_len * h_len * w_len);
    float base[4];
    base[0] = args.buffers[1][cell % w_len];
    base[1] = args.buffers[2][cell / w_len % h_len];
    if (dims == 3) base[2] = args.buffers[3][cell / (w_len * h_len) % d_len];
    base[dims] = 1.0f;
    const float* row = theta + (n * dims + j) * (dims + 1);
    float p = 0.0f;
    for (int k = 0; k <= dims; ++k) p = __fmaf_rn(row[k], base[k], p);
    args.out[0][o] = p;
  }
}
