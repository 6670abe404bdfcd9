// Gather (samebits-ops families/indexing.rs, `Gather`): one thread per output value, an exact
// move. buffers: the data, seen as [outer, len, inner] around the axis, then the index picked
// along the axis for each index element (resolved and range-checked on the host by the CPU's
// code; floats, exact below 2^24); ints: outer, len, inner, the index count.

extern "C" __global__ void sb_gather(const SbSourceKernel args)
{
  const long long len = args.ints[1], inner = args.ints[2], count = args.ints[3];
  const float* data = args.buffers[0];
  const float* picked = args.buffers[1];
  for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < args.count;
       o += (long long)gridDim.x * blockDim.x) {
    const long long e = o % inner, rest = o / inner;
    const long long k = rest % count, outer = rest / count;
    args.out[0][o] = data[(outer * len + (long long)picked[k]) * inner + e];
  }
}
