// Timeline of the narrow small-M program's pipeline (kernels/sm90/sm90_svdq_narrow.cuh, unchanged) compiled with its
// SVDQ_TRACE hooks recording clock64() per event and K tile for three CTAs (the first, the middle column tile of row
// tile 0, the last), at M x 3072 x K (rank 32, with bias), cold L2. Prints the mean cycles between events over the
// steady-state tiles (the first and last 8 left out) and the first CTA's raw timeline of a few tiles.
//
// Events (tile it): 0 a producer found the slot free, 1 it issued the slot's loads, 2 the tile's dequant team saw
// the data, 3 found its FP16 tile free, 4 wrote it; consumer warp 0: 5 saw the slot, 6 built its fragments (slot
// released), 7 saw the FP16 tile, 8 issued the wgmmas, 9 released the FP16 tile (its wgmmas retired); 10: after the
// start-up (it 0), main loop done (1), epilogue stored (2).
//
// Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels bench/micro/narrow_trace.cu -o t
#include <algorithm>
#include <vector>

constexpr int kTraceCtas = 3, kEvents = 11, kMaxTiles = 256;
__device__ long long g_trace[kTraceCtas][kEvents][kMaxTiles];

// Producer / team events from lane 0 of any warp (each tile has one producer and one team); consumer events from
// warp 0 only.
__device__ __forceinline__ void trace_point(int point, int it) {
  const int cta = blockIdx.y * gridDim.x + blockIdx.x;
  const int sel = cta == 0 ? 0 : cta == (int)gridDim.x / 2 ? 1 : cta == (int)(gridDim.x * gridDim.y) - 1 ? 2 : -1;
  const bool who = (point >= 5 && point <= 9) ? threadIdx.x == 0 : (threadIdx.x & 31) == 0;
  if (sel >= 0 && who && it >= 0 && it < kMaxTiles) g_trace[sel][point][it] = clock64();
}
#define SVDQ_TRACE(point, it) trace_point(point, it)
#include "sm90/sm90_svdq_narrow.cuh"
#include "micro_util.hpp"

using namespace svdq_k;

#define KERNEL(name, ...)                                                                   \
  extern "C" __global__ void __launch_bounds__(Sm90NarrowConfig<__VA_ARGS__>::kThreads, 1) \
      name(const __grid_constant__ Sm90WsParams p) {                                       \
    sm90_svdq_narrow<__VA_ARGS__>(p);                                                      \
  }
// WGS, BN, STAGES, BSTAGES, DQW, PRODUCERS, TEAMS: the registry's sm90_nw_w3_bn32_s8_b4_dq4_p4_t4 and
// sm90_nw_w1_bn32_s8_b4_dq4_p4_t4.
KERNEL(w3_bn32_p4_t4, 3, 32, 8, 4, 4, 4, 4)
KERNEL(w1_bn32_p4_t4, 1, 32, 8, 4, 4, 4, 4)

template <typename Kern>
static void run(const char* label, Kern kern, int smem, int threads, int rows, int bn, long long M, long long K,
                void* flush) {
  const long long N = 3072, R = 32;
  void *a, *asf, *b, *bsf, *alpha, *d, *l1, *bias, *out;
  const long long sf_cols = (K / 16 + 3) / 4 * 4, asf_rows = (M + 127) / 128 * 128, bsf_rows = (N + 127) / 128 * 128;
  check(cudaMalloc(&a, M * K / 2), "malloc");
  check(cudaMalloc(&asf, asf_rows * sf_cols), "malloc");
  check(cudaMalloc(&b, N * K / 2), "malloc");
  check(cudaMalloc(&bsf, bsf_rows * sf_cols), "malloc");
  check(cudaMalloc(&alpha, 4), "malloc");
  check(cudaMalloc(&d, M * R * 2), "malloc");
  check(cudaMalloc(&l1, N * R * 2), "malloc");
  check(cudaMalloc(&out, M * N * 2), "malloc");
  check(cudaMalloc(&bias, N * 2), "malloc");
  cudaMemset(a, 0x11, M * K / 2);
  cudaMemset(asf, 0x38, asf_rows * sf_cols);
  cudaMemset(b, 0x11, N * K / 2);
  cudaMemset(bsf, 0x38, bsf_rows * sf_cols);
  cudaMemset(bias, 0, N * 2);
  const float one = 1.0f;
  cudaMemcpy(alpha, &one, 4, cudaMemcpyHostToDevice);
  cudaMemset(d, 0, M * R * 2);
  cudaMemset(l1, 0, N * R * 2);
  Sm90WsParams p{};
  p.mm.a = static_cast<const u8*>(a);
  p.mm.a_sf = static_cast<const u8*>(asf);
  p.mm.b = static_cast<const u8*>(b);
  p.mm.b_sf = static_cast<const u8*>(bsf);
  p.mm.alpha = static_cast<const float*>(alpha);
  p.mm.d = static_cast<const u16*>(d);
  p.mm.l1 = static_cast<const u16*>(l1);
  p.mm.out = static_cast<u16*>(out);
  p.mm.bias = static_cast<const u16*>(bias);
  p.mm.m = M;
  p.mm.n = N;
  p.mm.k = K;
  p.mm.rank = R;
  map2d(&p.tma_a, a, 1, K / 2, M, 32, rows, 32);
  map2d(&p.tma_b, b, 1, K / 2, N, 32, bn, 32);
  map2d(&p.tma_l1, l1, 2, R, N, 64, bn, 128);
  check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem attribute");
  const dim3 grid((unsigned)(N / bn), (unsigned)((M + rows - 1) / rows));
  std::vector<long long> t(kTraceCtas * kEvents * kMaxTiles);
  const float ms = cold_launches(flush, label, [&] { kern<<<grid, threads, smem>>>(p); }, [&] {  // the last is printed
    std::fill(t.begin(), t.end(), 0LL);
    check(cudaMemcpyToSymbol(g_trace, t.data(), t.size() * sizeof(long long)), "trace reset");
  });
  check(cudaMemcpyFromSymbol(t.data(), g_trace, t.size() * sizeof(long long)), "trace");
  const int tiles = (int)(K / 64);
  std::printf("== %s, M = %lld, K = %lld (%d main tiles): kernel %.2f us (events, incl. launch)\n", label, M, K, tiles,
              ms * 1e3f);
  for (int c = 0; c < kTraceCtas; ++c) {
    auto at = [&](int e, int it) { return t[(c * kEvents + e) * kMaxTiles + it]; };
    const long long t0 = at(10, 0);
    GapMeans g;
    auto add = [&](int i, long long x, long long y) { g.add(i, x, y); };
    for (int it = 8; it < tiles - 8; ++it) {
      add(0, at(1, it), at(2, it));       // loads issued -> team saw the data
      add(1, at(2, it), at(4, it));       // team: data -> tile written
      add(2, at(2, it), at(3, it));       //   of which waiting for its FP16 tile
      add(3, at(5, it), at(6, it));       // consumer: slot seen -> fragments built
      add(4, at(4, it), at(7, it));       // tile written -> consumer saw it
      add(5, at(7, it), at(8, it));       // consumer: tile seen -> wgmmas issued
      add(6, at(8, it), at(9, it));       // issued -> released
      add(7, at(8, it - 1), at(8, it));   // consumer period
      add(8, at(1, it - 1), at(1, it));   // producer issue period (all producers)
      add(9, at(1, it), at(5, it));       // loads issued -> consumer saw the slot
    }
    std::printf("  CTA %d: first loads issued %lld, first wgmma %lld, main loop done %lld, stored %lld cycles; %.0f "
                "cycles per K tile from the first wgmma to the loop's end\n", c, at(1, 0) - t0, at(8, 0) - t0,
                at(10, 1) - t0, at(10, 2) - t0, (double)(at(10, 1) - at(8, 0)) / tiles);
    std::printf("    means over tiles 8..%d: issued->team data %.0f | team %.0f (tile wait %.0f) | consumer build %.0f |"
                " written->consumer %.0f | consumer tile->issued %.0f | issued->released %.0f | consumer period %.0f |"
                " issue period %.0f | issued->consumer slot %.0f\n",
                tiles - 9, g.mean(0), g.mean(1), g.mean(2), g.mean(3), g.mean(4), g.mean(5), g.mean(6), g.mean(7),
                g.mean(8), g.mean(9));
    if (c == 0) {
      std::printf("    tile: free issued tdata tfree twritten c_slot c_built c_tile c_issued c_released\n");
      for (int it = 0; it < tiles; it += (it < 12 || (it >= 32 && it < 40) ? 1 : 8)) {
        std::printf("    %4d:", it);
        print_events(at, it, 0, 9, t0);
        std::printf("\n");
      }
    }
  }
  for (void* x : {a, asf, b, bsf, alpha, d, l1, out, bias}) cudaFree(x);
}

#define RUN(k, M, K, ...)                                                                                   \
  run(#k, k, Sm90NarrowConfig<__VA_ARGS__>::kSmem, Sm90NarrowConfig<__VA_ARGS__>::kThreads,                 \
      Sm90NarrowConfig<__VA_ARGS__>::kRows, 32, M, K, flush)

int main() {
  void* flush;
  check(cudaMalloc(&flush, 256u << 20), "malloc");
  for (long long K : {3072LL, 12288LL}) {
    RUN(w3_bn32_p4_t4, 129, K, 3, 32, 8, 4, 4, 4, 4);
    RUN(w1_bn32_p4_t4, 1, K, 1, 32, 8, 4, 4, 4, 4);
  }
  return 0;
}
