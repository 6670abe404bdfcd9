// Runs the warp-tiled GEMM kernels of kernels/gemm.cu on the host (shim.h) and compares each
// configuration, element-copied and 16-byte-copied B, both cp.async modes, bit for bit with a
// scalar canonical GEMM (contract: gemm, gemm-epilogue) on shapes with edge blocks, K = 0, 1,
// 63, 64, 65, 129, 1000, transposed operands, offsets, batches and every epilogue kind. Shared
// memory is poisoned with NaN before each block and fenced past the launch's size. Argument:
// run only shape number N.
#include <cstdio>
#include <random>
#include <thread>
#include "shim.h"
#include "gemm_emu.inc"

using Kernel = void (*)(int, int, int, const float*, SbMat, const float*, SbMat, float*, SbEpilogue, const float*);
struct Config { const char* name; Kernel e, v; int bm, bn, threads; size_t smem; };

// Runs the grid: blocks one after another, each block's threads as OS threads.
static void launch(Kernel k, unsigned gx, unsigned gy, unsigned gz, int threads, size_t smem, int M, int N, int K,
                   const float* A, SbMat a, const float* B, SbMat b, float* C, SbEpilogue ep, const float* c) {
  if (smem > sizeof(g_smem)) { fprintf(stderr, "smem too big\n"); abort(); }
  gridDim = {gx, gy, gz};
  blockDim = {(unsigned)threads, 1, 1};
  for (unsigned z = 0; z < gz; ++z)
    for (unsigned y = 0; y < gy; ++y)
      for (unsigned x = 0; x < gx; ++x) {
        // poison shared memory: stale words must never reach a stored output
        float nan = NAN;
        for (size_t i = 0; i < smem / 4; ++i) std::memcpy(g_smem + 4 * i, &nan, 4);
        std::memset(g_smem + smem, 0xab, sizeof(g_smem) - smem);
        std::barrier<> bar(threads);
        g_bar = &bar;
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t)
          ts.emplace_back([=] {
            threadIdx = {(unsigned)t, 0, 0};
            blockIdx = {x, y, z};
            t_groups.clear(); t_open.clear();
            k(M, N, K, A, a, B, b, C, ep, c);
            if (!t_open.empty()) { fprintf(stderr, "uncommitted copies at exit\n"); abort(); }
            for (auto& g : t_groups) if (!g.empty()) { fprintf(stderr, "copies pending at exit\n"); abort(); }
          });
        for (auto& t : ts) t.join();
        for (size_t i = smem; i < sizeof(g_smem); ++i)
          if (g_smem[i] != 0xab) { fprintf(stderr, "shared memory written past the launch's size\n"); abort(); }
      }
}

static float ref_dot(const float* A, SbMat a, const float* B, SbMat b, long long bt, int i, int j, int K) {
  float s = 0.0f;
  for (int t0 = 0; t0 < K; t0 += 64) {
    float p = 0.0f;
    for (int k = t0; k < std::min(K, t0 + 64); ++k)
      p = std::fmaf(A[a.offset + bt * a.batch_stride + i * a.row_stride + k * a.col_stride],
                    B[b.offset + bt * b.batch_stride + k * b.row_stride + j * b.col_stride], p);
    s = t0 == 0 ? p : s + p;
  }
  return s;
}

int main(int argc, char** argv) {
  // The launches of src/gemm.rs (`GemmLaunch::TILED`, `Tiled::shared_bytes`).
  std::vector<Config> configs = {
      {"warp128x256", sb_gemm_warp_128x256_e, sb_gemm_warp_128x256_v, 128, 256, 256, (3 * 16 * (132 + 260) + 128 * 256) * 4},
      {"warp64x128", sb_gemm_warp_64x128_e, sb_gemm_warp_64x128_v, 64, 128, 128, (4 * 8 * (68 + 132) + 64 * 128) * 4},
      {"warp64x64", sb_gemm_warp_64x64_e, sb_gemm_warp_64x64_v, 64, 64, 128, (4 * 8 * (68 + 68) + 64 * 64) * 4},
  };

  struct Shape { int batch, m, n, k; bool at, bt; int epi; int off; };
  std::vector<Shape> shapes = {
      {1, 300, 517, 777, false, false, 0, 0}, {1, 260, 516, 777, false, false, 0, 0}, {2, 130, 132, 200, true, false, 1, 0},
      {1, 9, 4, 1, false, false, 2, 0},        {3, 70, 68, 64, true, false, 0, 0},     {1, 256, 512, 640, false, false, 0, 0},
      {2, 64, 131, 1000, false, true, 1, 0},   {1, 31, 33, 129, true, true, 2, 0},     {3, 9, 64, 65, false, false, 0, 0},
      {1, 64, 7, 63, true, false, 1, 0},       {2, 5, 1, 0, false, false, 2, 0},       {1, 200, 300, 129, true, true, 0, 3},
      {1, 129, 260, 72, false, false, 2, 4},   {1, 128, 256, 128, false, false, 0, 0}, {2, 100, 200, 9, true, false, 1, 0},
  };
  int only = argc > 1 ? atoi(argv[1]) : -1;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  int failures = 0, runs = 0;
  for (size_t si = 0; si < shapes.size(); ++si) {
    if (only >= 0 && (int)si != only) continue;
    auto [batch, M, N, K, at, bt, epi, off] = shapes[si];
    std::vector<float> A(off + (size_t)batch * M * K + 1), B(off + (size_t)batch * K * N + 1), Cin((size_t)batch * M * N + 1);
    for (auto& v : A) v = dist(rng);
    for (auto& v : B) v = dist(rng);
    for (auto& v : Cin) v = dist(rng);
    SbMat a = at ? SbMat{off, (long long)M * K, 1, M} : SbMat{off, (long long)M * K, K, 1};
    SbMat b = bt ? SbMat{off, (long long)K * N, 1, K} : SbMat{off, (long long)K * N, N, 1};
    SbEpilogue ep{};
    if (epi == 1) { ep.kind = 1; ep.view = SbMat{0, 0, 0, 1}; }             // column bias
    if (epi == 2) { ep.kind = 3; ep.alpha = 1.5f; ep.beta = 0.25f; ep.view = SbMat{0, (long long)M * N, N, 1}; }
    std::vector<float> want((size_t)batch * M * N);
    for (int z = 0; z < batch; ++z)
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
          float acc = ref_dot(A.data(), a, B.data(), b, z, i, j, K);
          float cv = ep.kind ? Cin[ep.view.offset + z * ep.view.batch_stride + i * ep.view.row_stride + j * ep.view.col_stride] : 0;
          float o = ep.kind == 0 ? acc : ep.kind == 1 ? acc + cv : (ep.alpha * acc) + (ep.beta * cv);
          want[((size_t)z * M + i) * N + j] = o;
        }
    bool vec_ok = !bt && N % 4 == 0 && off % 4 == 0;
    for (auto& cfg : configs)
      for (int vec = 0; vec < 2; ++vec) {
        if (vec && !vec_ok) continue;
        for (int mode = 0; mode < 2; ++mode) {
          g_mode = mode;
          std::vector<float> C((size_t)batch * M * N, NAN);
          launch(vec ? cfg.v : cfg.e, (N + cfg.bn - 1) / cfg.bn, (M + cfg.bm - 1) / cfg.bm, batch, cfg.threads, cfg.smem, M, N,
                 K, A.data(), a, B.data(), b, C.data(), ep, Cin.data());
          size_t bad = 0, first = 0;
          for (size_t e = 0; e < C.size(); ++e)
            if (__float_as_uint(C[e]) != __float_as_uint(want[e])) { if (!bad) first = e; ++bad; }
          ++runs;
          if (bad) {
            ++failures;
            printf("FAIL %s %s mode %d shape #%zu [%d,%d,%d,%d] at=%d bt=%d: %zu differ, first %zu got %g want %g\n", cfg.name,
                   vec ? "v" : "e", mode, si, batch, M, N, K, at, bt, bad, first, C[first], want[first]);
          }
        }
      }
    printf("shape #%zu [%d,%d,%d,%d] done\n", si, batch, M, N, K);
    fflush(stdout);
  }
  printf("%d runs, %d failures\n", runs, failures);
  return failures != 0;
}
