// Host emulation of the CUDA constructs that kernels/gemm.cu uses, for run.sh: thread and block
// indices per OS thread, __syncthreads as a std::barrier of the block's threads, one block's
// shared memory at a time, and cp.async copies that land either at issue (mode 0) or only at the
// wait that retires their group (mode 1), the two ends of what the hardware may do.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
using std::max;
using std::min;
struct Dim3 { unsigned x = 0, y = 0, z = 0; };
inline thread_local Dim3 threadIdx, blockIdx;
inline Dim3 blockDim, gridDim;
inline std::barrier<>* g_bar;
inline unsigned char g_smem[256 * 1024] __attribute__((aligned(16)));
#define __syncthreads() g_bar->arrive_and_wait()
#define __device__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(...)
#define __align__(x) alignas(x)
#define __shared__ static
struct float4 { float x, y, z, w; };
struct float2 { float x, y; };
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline float __fmaf_rn(float a, float b, float c) { return std::fmaf(a, b, c); }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
template <class T> T __ldg(const T* p) { return *p; }
template <class T> T __ldcg(const T* p) { return *p; }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_add(v); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline float sb_nanf() { return NAN; }
// The constants and argument structs of the kernels (SB_TILE, SbMat, SbEpilogue, ...).
#include "../kernels/device_abi.cuh"
inline float sb_fold_sum(float s, float p, bool first) { return first ? p : s + p; }

// cp.async: mode 0 lands each copy at issue (earliest), mode 1 at the wait that retires its
// group (latest).
inline int g_mode = 0;
struct Pending { void* dst; const void* src; int bytes, size; };
inline thread_local std::vector<std::vector<Pending>> t_groups;
inline thread_local std::vector<Pending> t_open;
inline void land(const Pending& c) {
  std::memcpy(c.dst, c.src, c.bytes);
  std::memset((char*)c.dst + c.bytes, 0, c.size - c.bytes);
}
inline void copy_async(void* dst, const void* src, int bytes, int size) {
  if (((uintptr_t)dst) % size || (bytes && ((uintptr_t)src) % size)) { fprintf(stderr, "misaligned cp.async\n"); abort(); }
  Pending c{dst, src, bytes, size};
  if (g_mode == 0) land(c); else t_open.push_back(c);
}
inline void sb_cp_async4(void* dst, const void* src, int bytes) { copy_async(dst, src, bytes, 4); }
inline void sb_cp_async16(void* dst, const void* src, int bytes) { copy_async(dst, src, bytes, 16); }
inline void sb_cp_async_commit() { t_groups.push_back(t_open); t_open.clear(); }
template <int N> void sb_cp_async_wait() {
  while (t_groups.size() > (size_t)N) { for (auto& c : t_groups.front()) land(c); t_groups.erase(t_groups.begin()); }
}
