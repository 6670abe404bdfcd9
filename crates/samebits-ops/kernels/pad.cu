// Pad (samebits-ops families/shape.rs, `Pad`): one thread per output value, an exact move.
// buffers: X, then one table per axis mapping an output index to the input index it reads
// (-1: the fill), built on the host by the CPU's own per-axis maps (constant, reflect, edge,
// wrap); ints: rank, the output dims, the input dims; floats: the fill value.

extern "C" __global__ void sb_pad(const SbSourceKernel args)
{
  const int rank = (int)args.ints[0];
  const float* x = args.buffers[0];
  for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < args.count;
       o += (long long)gridDim.x * blockDim.x) {
    long long rest = o, src = 0, stride = 1;
    bool inside = true;
    for (int d = rank - 1; d >= 0; --d) {
      const long long out_len = args.ints[1 + d], in_len = args.ints[1 + rank + d];
      const float s = args.buffers[1 + d][rest % out_len];
      rest /= out_len;
      if (s < 0.0f) inside = false;
      else src += (long long)s * stride;
      stride *= in_len;
    }
    args.out[0][o] = inside ? x[src] : args.floats[0];
  }
}
