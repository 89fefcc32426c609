// Timeline of the small-M swap-A16 program's pipeline: the program itself (kernels/sm90/sm90_svdq_swap_a16.cuh,
// unchanged) compiled with its SVDQ_TRACE hooks recording clock64() per event and K tile for three CTAs, at
// 129 x 3072 x K (rank 32, with bias), cold L2. Prints, per configuration, the mean cycles between the events over
// the steady-state tiles (the first and last 8 left out) and a few tiles' raw timelines.
//
// Events (tile it): 0 producer found the slot free, 1 producer issued the slot's loads, 2 dequant team saw the data,
// 3 team found its FP16 tile free, 4 team wrote it, 5 consumer saw the FP16 tile, 6 consumer saw the A tile,
// 7 consumer issued the tile's wgmmas, 8 consumer released the slot (its wgmmas retired); 9: kernel start (it 0),
// main loop and rank steps done (1), epilogue stored (2), dependents launched (3), tensor maps prefetched (4);
// 10 consumer about to wait for an FP16 tile.
//
// With the copy (the second set of runs): the op as svdq launches it, the FP16 copy of A (smxx_dequant_fp16, from
// packed codes and scales) and then the GEMM by programmatic dependent launch, and on the GPU's global timer (ns,
// comparable across SMs and kernels): when the copy's first CTA started and its last one ended, and when the traced
// GEMM CTAs started, issued their first A load (after griddepcontrol.wait), issued their first wgmma and finished.
//
// Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels bench/micro/swap_a16_trace.cu -o t
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda.h>
#include <cuda_runtime.h>

constexpr int kTraceCtas = 3, kEvents = 11, kMaxTiles = 256;
__device__ long long g_trace[kTraceCtas][kEvents][kMaxTiles];
// Global-timer stamps: [cta][0] start, [1] first A load issued, [2] first wgmma, [3] epilogue stored; copy start / end.
__device__ unsigned long long g_gt[kTraceCtas][4], g_copy_start, g_copy_end;
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// CTA 0, the middle column tile of row tile 0, and the last CTA.
__device__ __forceinline__ void trace_point(int point, int it) {
  const int cta = blockIdx.y * gridDim.x + blockIdx.x;
  const int sel = cta == 0 ? 0 : cta == (int)gridDim.x / 2 ? 1 : cta == (int)(gridDim.x * gridDim.y) - 1 ? 2 : -1;
  if (sel >= 0 && (threadIdx.x & 31) == 0 && it >= 0 && it < kMaxTiles) g_trace[sel][point][it] = clock64();
  if (sel >= 0 && (threadIdx.x & 31) == 0) {
    const int g = point == 9 && it == 0 ? 0 : point == 1 && it == 0 ? 1 : point == 7 && it == 0 ? 2 : point == 9 && it == 2 ? 3 : -1;
    if (g >= 0) g_gt[sel][g] = global_ns();
  }
}
#define SVDQ_TRACE(point, it) trace_point(point, it)
#include "sm90/sm90_svdq_swap_a16.cuh"
#include "quantize/smxx_dequant_fp16.cuh"
#include "micro_util.hpp"

using namespace svdq_k;

// Keeps the GPU busy for ~`ns` so that the launches after it are queued before it ends (otherwise the host's launch
// latency, not the GPU, sets when the GEMM starts after the ~1 us copy).
extern "C" __global__ void busy(unsigned ns) {
  const unsigned long long t0 = global_ns();
  while (global_ns() - t0 < ns) {
  }
}
// The op's FP16 copy of A, as the registry's smxx_dequant_fp16 build (2 words per thread), with the copy's first
// start and last end.
extern "C" __global__ void __launch_bounds__(256) copy_a(const DequantParams p) {
  if (blockIdx.x == 0 && threadIdx.x == 0) g_copy_start = global_ns();
  smxx_dequant_fp16_words<2>(p);
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(&g_copy_end, global_ns());
}

#define KERNEL(name, ...)                                                                            \
  extern "C" __global__ void __launch_bounds__(Sm90SwapA16Config<__VA_ARGS__>::kThreads, 1)          \
      name(const __grid_constant__ Sm90WsParams p) {                                                  \
    sm90_svdq_swap_a16<__VA_ARGS__>(p);                                                               \
  }
// BM, STAGES, B_REGS, DQW, TSTAGES, FUSED
// The registry's sm90_swap_m72_s8_dq8_t8_fused and _s16_t4_dq8_g4_p4_x2, and a 12-slot ring with 8 FP16 tiles.
// (Measured slower, and no forms of the program now: one K tile per consumer step, the former
// sm90_a16_bm72_s8_t8_dq8_g4_p4; 2 teams of 4 warps; docs/lab/results/2026-12-01_h200_small_m_trace.md.)
KERNEL(s8_f_g4_p4_x2, 72, 8, false, 8, 8, true)
KERNEL(s12_t8_g4_p4_x2, 72, 12, false, 8, 8)
KERNEL(s16_t4_g4_p4_x2, 72, 16, false, 8, 4)
KERNEL(bm24_s16_t4_g4_p4_x2, 24, 16, false, 8, 4)  // the registry's 24-row build (104 registers)

template <typename Kern>
static void run(const char* label, Kern kern, int smem, int threads, long long K, void* flush, bool with_copy = false,
                int copy_carveout = -1, bool pdl = true, long long M = 129, long long BM = 72) {
  const long long N = 3072, R = 32;
  void *a16, *b, *bsf, *alpha, *d, *l1, *bias, *out, *a4, *asf;
  const long long sf_rows = (N + 127) / 128 * 128, sf_cols = (K / 16 + 3) / 4 * 4;
  check(cudaMalloc(&a4, M * K / 2), "malloc");
  check(cudaMalloc(&asf, (M + 127) / 128 * 128 * sf_cols), "malloc");
  cudaMemset(a4, 0x11, M * K / 2);
  cudaMemset(asf, 0x38, (M + 127) / 128 * 128 * sf_cols);
  DequantParams q{};
  q.a = static_cast<const u8*>(a4);
  q.a_sf = static_cast<const u8*>(asf);
  q.m = M;
  q.k = K;
  check(cudaMalloc(&a16, M * K * 2), "malloc");
  q.out = static_cast<u16*>(a16);
  check(cudaMalloc(&b, N * K / 2), "malloc");
  check(cudaMalloc(&bsf, sf_rows * sf_cols), "malloc");
  check(cudaMalloc(&alpha, 4), "malloc");
  check(cudaMalloc(&d, M * R * 2), "malloc");
  check(cudaMalloc(&l1, N * R * 2), "malloc");
  check(cudaMalloc(&out, M * N * 2), "malloc");
  check(cudaMalloc(&bias, N * 2), "malloc");
  cudaMemset(bias, 0, N * 2);
  cudaMemset(a16, 0, M * K * 2);
  cudaMemset(b, 0x11, N * K / 2);
  cudaMemset(bsf, 0x38, sf_rows * sf_cols);
  const float one = 1.0f;
  cudaMemcpy(alpha, &one, 4, cudaMemcpyHostToDevice);
  cudaMemset(d, 0, M * R * 2);
  cudaMemset(l1, 0, N * R * 2);
  Sm90WsParams p{};
  p.mm.a_sf = nullptr;
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
  map2d(&p.tma_a, a16, 2, K, M, 64, BM, 128);
  map2d(&p.tma_b, b, 1, K / 2, N, 32, 64, 32);
  map2d(&p.tma_d, d, 2, R, M, 64, BM, 128);
  map2d(&p.tma_l1, l1, 2, R, N, 64, 64, 128);
  map2d(&p.tma_out, out, 2, N, M, 64, BM, 128);
  check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem attribute");
  const dim3 grid((unsigned)(N / 64), (unsigned)((M + BM - 1) / BM));
  std::vector<long long> t(kTraceCtas * kEvents * kMaxTiles);
  auto launch = [&] {
    if (with_copy) {  // as ops.cpp: the copy, then the GEMM by programmatic dependent launch
      const unsigned long long zero = 0;
      check(cudaMemcpyToSymbol(g_copy_end, &zero, sizeof(zero)), "copy end reset");
      check(cudaFuncSetAttribute(copy_a, cudaFuncAttributePreferredSharedMemoryCarveout, copy_carveout), "carveout");
      busy<<<1, 32>>>(100000u);
      copy_a<<<(unsigned)((M * K / 8 + 511) / 512), 256>>>(q);
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = grid;
      cfg.blockDim = dim3((unsigned)threads);
      cfg.dynamicSmemBytes = (size_t)smem;
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr.val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = &attr;
      cfg.numAttrs = pdl ? 1 : 0;
      check(cudaLaunchKernelEx(&cfg, kern, p), "PDL launch");
    } else {
      kern<<<grid, threads, smem>>>(p);
    }
  };
  // The last launch's trace is printed; events a form does not record (pairs: the odd tiles' 6 and 7) stay 0.
  const float ms = cold_launches(flush, label, launch, [&] {
    std::fill(t.begin(), t.end(), 0LL);
    check(cudaMemcpyToSymbol(g_trace, t.data(), t.size() * sizeof(long long)), "trace reset");
  });
  check(cudaMemcpyFromSymbol(t.data(), g_trace, t.size() * sizeof(long long)), "trace");
  const int tiles = (int)(K / 64);
  std::printf("== %s, M = %lld, K = %lld (%d main tiles)%s: %.2f us (events, incl. launch)\n", label, M, K, tiles,
              !with_copy ? "" : pdl ? (copy_carveout < 0 ? ", after the FP16 copy of A (PDL)" :
                                       ", after the FP16 copy of A with the shared-memory carveout at its maximum (PDL)")
                                    : ", after the FP16 copy of A (no PDL)", ms * 1e3f);
  if (with_copy) {
    unsigned long long gt[kTraceCtas][4], c0, c1;
    check(cudaMemcpyFromSymbol(gt, g_gt, sizeof(gt)), "gt");
    check(cudaMemcpyFromSymbol(&c0, g_copy_start, sizeof(c0)), "gt");
    check(cudaMemcpyFromSymbol(&c1, g_copy_end, sizeof(c1)), "gt");
    std::printf("  global timer, ns from the copy's start: copy ends %lld\n", (long long)(c1 - c0));
    for (int c = 0; c < kTraceCtas; ++c)
      std::printf("  CTA %d: starts %lld, first A load issued %lld, first wgmma %lld, stored %lld\n", c,
                  (long long)(gt[c][0] - c0), (long long)(gt[c][1] - c0), (long long)(gt[c][2] - c0),
                  (long long)(gt[c][3] - c0));
  }
  for (int c = 0; c < kTraceCtas; ++c) {
    auto at = [&](int e, int it) { return t[(c * kEvents + e) * kMaxTiles + it]; };
    const long long t0 = at(9, 0);
    // Mean of b - a over the steady-state tiles where both events were recorded (pairs: 6 and 7 on even tiles;
    // their consumer period is then per pair).
    GapMeans g;
    auto add = [&](int i, long long a, long long b) { g.add(i, a, b); };
    for (int it = 8; it < tiles - 8; ++it) {
      add(0, at(0, it), at(1, it));  // producer: free -> issued
      add(1, at(1, it), at(2, it));  // issued -> team saw data
      add(2, at(2, it), at(4, it));  // team: data -> tile written
      add(3, at(2, it), at(3, it));  //   of which waiting for its FP16 tile
      add(4, at(4, it), at(5, it));  // written -> consumer saw it
      add(5, at(5, it), at(7, it));  // consumer: saw tile -> wgmma issued
      add(6, at(7, it), at(8, it));  // issued -> slot released
      add(7, at(7, it - 1) != 0 ? at(7, it - 1) : at(7, it - 2), at(7, it));  // consumer period (per step)
      add(9, at(1, it - 1), at(1, it));  // producer issue period (all producers)
    }
    std::printf("  CTA %d: start->first tile issued %lld, first wgmma %lld, main loop done %lld, stored %lld cycles; "
                "%.0f cycles per K tile from the first wgmma to the loop's end; maps prefetched %lld, dependents "
                "launched %lld\n", c, at(1, 0) - t0, at(7, 0) - t0, at(9, 1) - t0, at(9, 2) - t0,
                (double)(at(9, 1) - at(7, 0)) / tiles, at(9, 4) - t0, at(9, 3) - t0);
    std::printf("    means over tiles 8..%d: free->issued %.0f | issued->data seen %.0f | team %.0f (waiting for its"
                " tile %.0f) | written->consumer %.0f | consumer->issued %.0f | issued->released %.0f | consumer "
                "period %.0f | issue period %.0f\n",
                tiles - 9, g.mean(0), g.mean(1), g.mean(2), g.mean(3), g.mean(4), g.mean(5), g.mean(6), g.mean(7),
                g.mean(9));
    if (c == 0) {
      std::printf("    tile: free issued data tfree written cons_t cons_a issued released | cons_wait (cycles from start)\n");
      for (int it = 0; it < tiles; it += (it < 12 || (it >= 32 && it < 44) ? 1 : 4)) {
        if (it >= 44 && it < tiles - 4) continue;
        std::printf("    %4d:", it);
        print_events(at, it, 0, 8, t0);
        if (at(10, it) != 0) std::printf(" | %7lld", at(10, it) - t0);
        else std::printf(" |       -");
        std::printf("\n");
      }
    }
  }
  cudaFree(a16);
  cudaFree(a4);
  cudaFree(asf);
  cudaFree(b);
  cudaFree(bsf);
  cudaFree(alpha);
  cudaFree(d);
  cudaFree(l1);
  cudaFree(out);
  cudaFree(bias);
}

#define RUN(k, K, ...)                                                                                      \
  run(#k, k, Sm90SwapA16Config<__VA_ARGS__>::kSmem, Sm90SwapA16Config<__VA_ARGS__>::kThreads, K, flush)
#define RUN_COPY(k, K, M, carveout, pdl, bm, ...)                                                                 \
  run(#k, k, Sm90SwapA16Config<bm, __VA_ARGS__>::kSmem, Sm90SwapA16Config<bm, __VA_ARGS__>::kThreads, K, flush, true, \
      carveout, pdl, M, bm)

int main() {
  void* flush;
  check(cudaMalloc(&flush, 256u << 20), "malloc");
  for (long long K : {3072LL, 12288LL}) {
    RUN(s8_f_g4_p4_x2, K, 72, 8, false, 8, 8, true);
    RUN(s12_t8_g4_p4_x2, K, 72, 12, false, 8, 8);
    RUN(s16_t4_g4_p4_x2, K, 72, 16, false, 8, 4);
  }
  for (long long K : {3072LL, 12288LL}) {
    RUN_COPY(s16_t4_g4_p4_x2, K, 129, -1, true, 72, 16, false, 8, 4);
    RUN_COPY(s16_t4_g4_p4_x2, K, 129, 100, true, 72, 16, false, 8, 4);
    RUN_COPY(s16_t4_g4_p4_x2, K, 129, -1, false, 72, 16, false, 8, 4);
  }
  // The 24-row build at M = 16 (its CTAs leave room in the register file for copy CTAs; the carveout decides).
  for (int carveout : {-1, 100}) RUN_COPY(bm24_s16_t4_g4_p4_x2, 3072LL, 16, carveout, true, 24, 16, false, 8, 4);
  return 0;
}
