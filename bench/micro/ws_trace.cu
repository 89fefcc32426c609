// Timeline of the large-M program's persistent FP16-B form (kernels/sm90/sm90_svdq_ws.cuh, unchanged: the former
// build sm90_ws16_bn256_s8_b5_lean_pers, deleted as unrouted) through its SVDQ_TRACE hooks: clock64() per event for
// three CTAs (first, middle, last of the persistent grid) at M x 3072 x K, rank 32, with bias, cold L2, the FP16
// copy of B given (this measures the GEMM launch alone). Prints where each CTA's cycles go: per output tile the main
// loop, the rank steps and the epilogue of each consumer warpgroup, the steady-state period between a warpgroup's K
// tiles, and how far the producer's loads run ahead.
//
// Events (index: ring position q of a K tile, or the CTA's output tile number for 8-13): 0 producer issued packed
// slot q (A codes + scales), 1 producer issued B tile q, 2 / 3 consumer warpgroup 0 / 1 issued K tile q's wgmmas,
// 4 / 5 warpgroup 0 / 1 built K tile q's fragments, 6 / 7 saw B tile q, 16 / 17 began building K tile q's fragments
// (its wait for the group before the previous one has returned), 8 / 9 main K loop retired, 10 / 11 rank steps done, 12 / 13
// epilogue stored; 14 kernel start. Point 15 (consumer start, index = warpgroup) makes warpgroup 1 wait g_skew
// cycles first in every CTA (0: as the program runs): what a skew between the warpgroups would do to the epilogue.
//
// Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels bench/micro/ws_trace.cu -o t
// Modes (./t MODE; none: the timeline rows): --skip-only the loads skipped (below), --bias with / without the bias,
// --power (with -DWS_TRACE_NONE) the routed build and its PAIRS form on zero and on random operands, and cuBLAS BF16
// on random operands, each launched back to back for a second while a host thread samples the SM clock and the
// board power through NVML (libnvidia-ml and libcublas are opened with dlopen: no link flags),
// --time the routed build and its PAIRS form at three shapes, three rounds (with -DWS_TRACE_NONE or -DWS_TRACE_OFF,
// and -DFAKE_BUILD=1 / 2: what the fragment build's instructions cost; -DFAKE_STORE=1: what the epilogue's stores cost),
// --epi / --epi2 (-DWS_TRACE_NONE) the TMA-store epilogue forms against the routed build: bits on random operands,
// then times; --epi-trace (traced) their timeline. Results: docs/lab/results/2026-12-02_h200_ws_what_costs.md,
// docs/lab/results/2026-12-02_h200_epi_tma.md.
#include <dlfcn.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>

constexpr int kTraceCtas = 3, kEvents = 18, kMaxPos = 640;
__device__ long long g_trace[kTraceCtas][kEvents][kMaxPos];
__device__ long long g_skew;

__device__ __forceinline__ void trace_point(int point, int it) {
  if (point == 15) {  // consumer start: warpgroup 1 waits g_skew cycles (every thread of it)
    if (it == 1 && g_skew > 0) {
      const long long t0 = clock64();
      while (clock64() - t0 < g_skew) {
      }
    }
    return;
  }
  const int cta = blockIdx.x;
  const int sel = cta == 0 ? 0 : cta == (int)gridDim.x / 2 ? 1 : cta == (int)gridDim.x - 1 ? 2 : -1;
  // (the loads' events from whichever lane 0 issues them, the consumers' from warp 0 of each warpgroup)
  const int filter = point <= 1 || point == 14 ? 31 : 127;
  if (sel >= 0 && (threadIdx.x & filter) == 0 && it >= 0 && it < kMaxPos) g_trace[sel][point][it] = clock64();
}
#if defined(WS_TRACE_NONE)  // (-DWS_TRACE_NONE: no hooks at all, the registry builds' code)
#define SVDQ_TRACE(point, it)
#elif defined(WS_TRACE_OFF)  // (-DWS_TRACE_OFF: the skew hook only, for the programs' untraced times)
#define SVDQ_TRACE(point, it) \
  if (point == 15) trace_point(point, it)
#else
#define SVDQ_TRACE(point, it) trace_point(point, it)
#endif
// Loads skipped (g_skip, timing only: the consumers read whatever the ring holds): bit 0 the packed slots (A codes,
// scales: 4 608 bytes), bit 1 the B ring (FP16 B tiles and l1: 32 KiB); the d tile (16 KiB) is always loaded. A
// skipped load's barrier gets a plain arrival (its only one) instead of arrive_expect_tx + the copies, so the
// pipeline runs as before without those shared-memory writes: what they cost the tensor pipe.
#include "common/sm90_async.cuh"
#include "common/sm90_ws_parts.cuh"
#include "common/smxx_epilogue.cuh"
__device__ int g_skip;
namespace svdq_k {
__device__ __forceinline__ int& skipping() {  // the issuing warp's last decision
  __shared__ int s[16];
  return s[threadIdx.x >> 5];
}
__device__ __forceinline__ void expect_or_skip(u32 bar, u32 bytes) {
  const int kind = bytes == 32768 ? 2 : bytes == 16384 ? 0 : 1;
  skipping() = (g_skip & kind) != 0;
  if (skipping()) mbar_arrive(bar);
  else mbar_arrive_expect_tx(bar, bytes);
}
__device__ __forceinline__ void tma_or_skip(u32 dst, const TmaDesc* map, int c0, int c1, u32 bar) {
  if (!skipping()) tma_load_2d(dst, map, c0, c1, bar);
}
__device__ __forceinline__ void bulk_or_skip(u32 dst, const void* src, u32 bytes, u32 bar) {
  if (!skipping()) bulk_load(dst, src, bytes, bar);
}
}  // namespace svdq_k
// -DFAKE_BUILD=1 / 2 (timing only, wrong results): the consumers' fragment build without its conversion (the code
// words' shared-memory loads, one logic op per fragment register) / without anything (the scale words only): what
// the dequantization instructions cost the main loop.
#ifdef FAKE_BUILD
namespace svdq_k {
SVDQ_DEV void fake_build(u32 tile, int ra, int rb, u32 swa, u32 swb, u32 rot, u32* af) {
#if FAKE_BUILD == 1
  u32 qa[8], qb[8];
  load_packed_row(tile, ra, qa);
  load_packed_row(tile, rb, qb);
#pragma unroll
  for (int i = 0; i < 16; ++i) af[i] = ((i & 1) ? qb[i >> 1] : qa[i >> 1]) ^ swa;
#else
#pragma unroll
  for (int i = 0; i < 16; ++i) af[i] = swa ^ (swb << i) ^ rot;
#endif
}
}  // namespace svdq_k
#define rs_fragment_tile_lean fake_build
#endif
// -DFAKE_STORE=1 (timing only, nothing written): the epilogue's arithmetic (alpha, the sum of a thread's values) but
// none of its stores: what the output tile's 64 KiB of stores per tile cost (132 CTAs store at about the same time).
#ifdef FAKE_STORE
namespace svdq_k {
template <int N>
SVDQ_DEV void fake_store_tile(const MmParams& p, float alpha, i64 m0, i64 n0, int rows, i64 row0, int c,
                              const float* acc) {
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) s = __fmaf_rn(alpha, acc[i], s);
  if (s == 12345.0f) p.out[row0 * p.n + n0 + c] = 1;  // (never, with zero operands; keeps the arithmetic)
}
}  // namespace svdq_k
#define store_acc_tile fake_store_tile
#endif
#define mbar_arrive_expect_tx expect_or_skip
#define tma_load_2d tma_or_skip
#define bulk_load bulk_or_skip
#include "sm90/sm90_svdq_ws.cuh"
#undef mbar_arrive_expect_tx
#undef tma_load_2d
#undef bulk_load
#include "micro_util.hpp"

using namespace svdq_k;

// The former build sm90_ws16_bn256_s8_b5_lean_pers (BN, STAGES, BSTAGES, DQ_WGS, B16, CLUSTER, ATILES, A16, PERSIST,
// A_SS, LEAN, FUSE_B), then with the B ring loaded by warp 2 (SPLIT_B).
#define LEAN_PERS 256, 8, 5, 1, true, 1, 0, false, true, false, true, false
using Cfg = Sm90WsConfig<LEAN_PERS>;
#define KERNEL(name, ...)                                                                                   \
  extern "C" __global__ void __launch_bounds__(Cfg::kThreads, 1) name(const __grid_constant__ Sm90WsParams p) { \
    sm90_svdq_ws<__VA_ARGS__>(p);                                                                           \
  }
KERNEL(lean_pers, LEAN_PERS)
KERNEL(lean_pers_split, LEAN_PERS, true)
KERNEL(lean_pers_pairs, LEAN_PERS, false, true)  // the PAIRS fragment order (timing only here: B's copy is zeros)
static_assert(Sm90WsConfig<LEAN_PERS, true>::kSmem == Cfg::kSmem, "same shared memory");
// EPI_TMA (--epi): the output tile staged in shared memory and stored by warp 3 with TMA while the consumers go on;
// its room comes from one B tile and two packed slots fewer (B4: 6 packed slots, 4 B tiles), so the same ring sizes
// without it are timed too.
#define LEAN_PERS_B4 256, 6, 4, 1, true, 1, 0, false, true, false, true, false
KERNEL(pairs_b4, LEAN_PERS_B4, false, true)
KERNEL(pairs_b4_epi, LEAN_PERS_B4, false, true, 1, true)
KERNEL(split_pairs_b4_epi, LEAN_PERS_B4, true, true, 1, true)
KERNEL(pairs_b4_epi_d2, LEAN_PERS_B4, false, true, 2, true)  // (--epi2) the second d buffer a staging box
constexpr int kSmemEpi = Sm90WsConfig<LEAN_PERS_B4, false, true, 1, true>::kSmem, kSmemEpiD2 = kSmemEpi + 16;
static_assert(kSmemEpi <= 232448, "fits");
static_assert(Sm90WsConfig<LEAN_PERS_B4, false, true, 2, true>::kSmem == kSmemEpiD2, "two barriers more");

// Random operands (--power): A codes any bytes, scale codes 0x30-0x3F (E4M3 0.5-0.94), B's FP16 copy random signs,
// magnitudes 2^-4 .. 2^2 with random mantissas, d and l1 BF16 around 2^-7; the zero operands (default) leave the
// tensor cores multiplying zeros, which draws less power.
__global__ void fill_random(u32* p, long long words, u32 seed, int kind) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < words; i += (long long)gridDim.x * blockDim.x) {
    u32 x = (u32)i * 0x9E3779B9u ^ seed;
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    if (kind == 1) x = (x & 0x0F0F0F0Fu) | 0x30303030u;                              // E4M3 scale codes
    if (kind == 2) x = (x & 0x83FF83FFu) | ((11u + (x >> 10) % 6u) << 10) | ((11u + (x >> 26) % 6u) << 26);  // FP16
    if (kind == 3) x = (x & 0x807F807Fu) | 0x3C003C00u;                              // BF16 ~2^-7
    p[i] = x;
  }
}
static bool g_random = false;
static int g_smem = 0;          // (0: Cfg::kSmem) the launch's dynamic shared memory
static long long g_rank = 32;   // (--epi2: 128 too)
static std::vector<unsigned short>* g_capture = nullptr;  // (--epi) the output of the last cold launch
// (--epi, --epi2) outputs of `got` that differ from `ref`
static long long count_diffs(const std::vector<unsigned short>& ref, const std::vector<unsigned short>& got) {
  long long diffs = 0;
  for (size_t i = 0; i < ref.size(); ++i) diffs += ref[i] != got[i];
  return diffs;
}

// NVML through dlopen: the SM clock (MHz) and board power (mW) sampled every 5 ms while `launch` runs back to back
// for `ms` milliseconds (after 3 warm-up launches; warm L2: this is about clocks, not the cold-L2 method).
struct Nvml {
  int (*init)() = nullptr;
  int (*handle)(unsigned, void**) = nullptr;
  int (*clock)(void*, int, unsigned*) = nullptr;
  int (*power)(void*, unsigned*) = nullptr;
  void* dev = nullptr;
  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!lib) return;
    init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    handle = reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    clock = reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    power = reinterpret_cast<int (*)(void*, unsigned*)>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
    if (!init || !handle || !clock || !power || init() != 0 || handle(0, &dev) != 0) dev = nullptr;
  }
};
template <typename Launch>
static void sustained(const char* label, long long M, long long N, long long K, bool random, int ms, Launch&& launch) {
  static Nvml nvml;
  for (int i = 0; i < 3; ++i) launch();
  check(cudaDeviceSynchronize(), label);
  std::atomic<bool> on{true};
  double clk = 0, pw = 0;
  int samples = 0;
  std::thread sampler([&] {
    while (on) {
      unsigned c = 0, w = 0;
      if (nvml.dev && nvml.clock(nvml.dev, 1 /* NVML_CLOCK_SM */, &c) == 0 && nvml.power(nvml.dev, &w) == 0) {
        clk += c;
        pw += w;
        ++samples;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  int n = 0;
  const auto t0 = std::chrono::steady_clock::now();
  cudaEventRecord(e0);
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(ms)) {
    for (int i = 0; i < 8; ++i, ++n) launch();
    check(cudaStreamSynchronize(0), label);
  }
  cudaEventRecord(e1);
  check(cudaEventSynchronize(e1), label);
  on = false;
  sampler.join();
  float el = 0;
  cudaEventElapsedTime(&el, e0, e1);
  std::printf("%-18s %lld x %lld x %lld, %s operands: %8.2f us per launch (%d back to back), SM clock %6.0f MHz, "
              "power %5.0f W (%d NVML samples)\n", label, M, N, K, random ? "random" : "zero  ", el * 1e3 / n, n,
              samples ? clk / samples : 0.0, samples ? pw / samples / 1e3 : 0.0, samples);
}

// cuBLAS BF16 (through dlopen) on random operands: out[M, N] = A[M, K] B[N, K]^T, FP32 compute, as the bench's baseline.
static void cublas_power(long long M, long long N, long long K, int ms) {
  void* lib = dlopen("libcublas.so", RTLD_NOW);
  if (!lib) lib = dlopen("/usr/local/cuda/lib64/libcublas.so", RTLD_NOW);
  if (!lib) {
    std::printf("cuBLAS: cannot open libcublas.so (%s)\n", dlerror());
    return;
  }
  auto create = reinterpret_cast<decltype(&cublasCreate_v2)>(dlsym(lib, "cublasCreate_v2"));
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  auto gemm = reinterpret_cast<GemmEx>(dlsym(lib, "cublasGemmEx"));
  cublasHandle_t h;
  if (!create || !gemm || create(&h) != CUBLAS_STATUS_SUCCESS) {
    std::printf("cuBLAS: no handle\n");
    return;
  }
  void *a, *b, *c;
  check(cudaMalloc(&a, M * K * 2), "malloc");
  check(cudaMalloc(&b, N * K * 2), "malloc");
  check(cudaMalloc(&c, M * N * 2), "malloc");
  fill_random<<<1024, 256>>>(static_cast<u32*>(a), M * K / 2, 6u, 3);
  fill_random<<<1024, 256>>>(static_cast<u32*>(b), N * K / 2, 7u, 3);
  check(cudaDeviceSynchronize(), "fill");
  const float one = 1.0f, zero = 0.0f;
  sustained("cublas_bf16", M, N, K, true, ms, [&] {
    gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, b, CUDA_R_16BF, (int)K, a, CUDA_R_16BF, (int)K,
         &zero, c, CUDA_R_16BF, (int)N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  });
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

template <typename Kern>
static void run(const char* label, Kern kern, long long M, long long K, long long skew, void* flush, int ctas = 0,
                int skip = 0, bool bias_on = true, int power_ms = 0) {
  const long long N = 3072, R = g_rank;
  const long long sf_cols = (K / 16 + 3) / 4 * 4;
  void *a, *asf, *b16, *alpha, *d, *l1, *bias, *out;
  check(cudaMalloc(&a, M * K / 2), "malloc");
  check(cudaMalloc(&asf, (M + 127) / 128 * 128 * sf_cols), "malloc");
  check(cudaMalloc(&b16, N * K * 2), "malloc");
  check(cudaMalloc(&alpha, 4), "malloc");
  check(cudaMalloc(&d, M * R * 2), "malloc");
  check(cudaMalloc(&l1, N * R * 2), "malloc");
  check(cudaMalloc(&bias, N * 2), "malloc");
  check(cudaMalloc(&out, M * N * 2), "malloc");
  cudaMemset(a, 0x11, M * K / 2);
  cudaMemset(asf, 0x38, (M + 127) / 128 * 128 * sf_cols);
  cudaMemset(b16, 0, N * K * 2);
  cudaMemset(d, 0, M * R * 2);
  cudaMemset(l1, 0, N * R * 2);
  cudaMemset(bias, 0, N * 2);
  if (g_random) {
    fill_random<<<1024, 256>>>(static_cast<u32*>(a), M * K / 8, 1u, 0);
    fill_random<<<1024, 256>>>(static_cast<u32*>(asf), (M + 127) / 128 * 128 * sf_cols / 4, 2u, 1);
    fill_random<<<1024, 256>>>(static_cast<u32*>(b16), N * K / 2, 3u, 2);
    fill_random<<<1024, 256>>>(static_cast<u32*>(d), M * R / 2, 4u, 3);
    fill_random<<<1024, 256>>>(static_cast<u32*>(l1), N * R / 2, 5u, 3);
    check(cudaDeviceSynchronize(), "fill");
  }
  const float one = 1.0f;
  cudaMemcpy(alpha, &one, 4, cudaMemcpyHostToDevice);
  Sm90WsParams p{};
  p.mm.a = static_cast<const u8*>(a);
  p.mm.a_sf = static_cast<const u8*>(asf);
  p.mm.alpha = static_cast<const float*>(alpha);
  p.mm.d = static_cast<const u16*>(d);
  p.mm.l1 = static_cast<const u16*>(l1);
  p.mm.bias = bias_on ? static_cast<const u16*>(bias) : nullptr;
  p.mm.out = static_cast<u16*>(out);
  p.mm.m = M;
  p.mm.n = N;
  p.mm.k = K;
  p.mm.rank = R;
  map2d(&p.tma_a, a, 1, K / 2, M, 32, 128, 32);
  map2d(&p.tma_b, b16, 2, K, N, 64, 256, 128);
  map2d(&p.tma_l1, l1, 2, R, N, 64, 256, 128);
  map2d(&p.tma_d, d, 2, R, M, 64, 128, 128);
  map2d(&p.tma_out, out, 2, N, M, 64, 128, 128);  // (EPI_TMA)
  const int smem = g_smem > 0 ? g_smem : Cfg::kSmem;
  if (g_random) {  // a nonzero alpha of 1/64 and a random bias, so the epilogue's arithmetic shows in the output
    const float a64 = 1.0f / 64.0f;
    cudaMemcpy(alpha, &a64, 4, cudaMemcpyHostToDevice);
    if (bias_on) fill_random<<<16, 256>>>(static_cast<u32*>(bias), N / 2, 8u, 3);
  }
  check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem attribute");
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const long long tiles = (M + 127) / 128 * (N / 256);
  const unsigned grid = (unsigned)std::min<long long>(tiles, ctas > 0 ? ctas : sms);  // (ctas: fewer SMs)
  check(cudaMemcpyToSymbol(g_skew, &skew, sizeof(skew)), "skew");
  check(cudaMemcpyToSymbol(g_skip, &skip, sizeof(skip)), "skip");
  if (power_ms > 0) {
    sustained(label, M, N, K, g_random, power_ms, [&] { kern<<<grid, Cfg::kThreads, smem>>>(p); });
    for (void* x : {a, asf, b16, alpha, d, l1, bias, out}) cudaFree(x);
    return;
  }
  std::vector<long long> t(kTraceCtas * kEvents * kMaxPos);
  std::vector<float> times;  // five cold launches' CUDA-event times (the median printed; the last one traced)
  for (int r = 0; r < 5; ++r)
    times.push_back(cold_launches(flush, label, [&] { kern<<<grid, Cfg::kThreads, smem>>>(p); }, [&] {
      std::fill(t.begin(), t.end(), 0LL);
      check(cudaMemcpyToSymbol(g_trace, t.data(), t.size() * sizeof(long long)), "trace reset");
    }));
  std::sort(times.begin(), times.end());
  const float ms = times[2];
  check(cudaMemcpyFromSymbol(t.data(), g_trace, t.size() * sizeof(long long)), "trace");
  if (g_capture) {
    g_capture->assign(M * N, 0);
    check(cudaMemcpy(g_capture->data(), out, M * N * 2, cudaMemcpyDeviceToHost), "capture");
  }
  const int num_main = (int)(K / 64), total = num_main + 1;
  std::printf("== %s %lld x %lld x %lld r%lld b%d, grid %u, warpgroup 1 starts %lld cycles late, loads "
              "skipped %d: %.2f us (events, incl. launch; median of 5)\n", label, M, N, K, R, bias_on ? 1 : 0, grid, skew,
              skip, ms * 1e3f);
  for (int c = 0; c < kTraceCtas; ++c) {
    auto at = [&](int e, int q) { return t[(c * kEvents + e) * kMaxPos + q]; };
    const long long t0 = at(14, 0);
    const int cta = c == 0 ? 0 : c == 1 ? (int)grid / 2 : (int)grid - 1;
    const int ntiles = (int)((tiles - cta + grid - 1) / grid);
    long long end = 0;
    for (int lt = 0; lt < ntiles; ++lt) end = std::max({end, at(12, lt), at(13, lt)});
    std::printf("  CTA %d (%d tiles): %lld cycles start -> last store\n", cta, ntiles, end - t0);
    GapMeans g, g2;
    for (int lt = 0; lt < ntiles; ++lt) {
      const int q0 = lt * total;
      std::printf("    tile %d (cycles from start): WG0 first issue %lld, main retired %lld, rank done %lld, stored %lld"
                  " | WG1 %lld, %lld, %lld, %lld\n", lt, at(2, q0) - t0, at(8, lt) - t0, at(10, lt) - t0,
                  at(12, lt) - t0, at(3, q0) - t0, at(9, lt) - t0, at(11, lt) - t0, at(13, lt) - t0);
      for (int it = 4; it < num_main - 4; ++it) {
        const int q = q0 + it;
        g.add(0, at(2, q - 1), at(2, q));  // WG0 period
        g.add(1, at(3, q - 1), at(3, q));  // WG1 period
        g.add(2, at(4, q), at(6, q));      // WG0 built -> saw the B tile
        g.add(3, at(6, q), at(2, q));      // WG0 saw B -> issued (fence, 4 wgmma)
        g2.add(0, at(2, q - 1), at(16, q));  // WG0 issued q-1 -> began building q (wait for q-2 to retire)
        g2.add(1, at(16, q), at(4, q));      // WG0 building q
        g2.add(2, at(3, q - 1), at(17, q));  // WG1, same
        g2.add(3, at(17, q), at(5, q));
        g2.add(4, at(5, q), at(7, q));
        g2.add(5, at(7, q), at(3, q));
        g.add(4, at(1, q), at(2, q));      // producer's B load issued -> WG0 issued
        g.add(5, at(2, q), at(3, q));      // WG0 issued -> WG1 issued (the skew)
        g.add(6, at(0, q), at(4, q));      // producer's packed load issued -> WG0 built
      }
      if (lt + 1 < ntiles) {
        g.add(7, at(2, q0 + num_main - 1), at(2, q0 + total));  // WG0: last main issue -> next tile's first issue
        g.add(8, at(8, lt), at(12, lt));                         // WG0: main retired -> stored
        g.add(9, at(10, lt), at(12, lt));                        // WG0: epilogue alone
      }
    }
    std::printf("    steady state (K tiles 4..%d of each tile): period WG0 %.0f / WG1 %.0f cycles per K tile (tensor "
                "work 1024); B load issued->WG0 issued %.0f; WG0->WG1 issue %.0f; packed load issued->WG0 built %.0f\n",
                num_main - 5, g.mean(0), g.mean(1), g.mean(4), g.mean(5), g.mean(6));
    std::printf("      per K tile, WG0 / WG1: issued q-1 -> build q begins %.0f / %.0f | building %.0f / %.0f | built -> "
                "B tile seen %.0f / %.0f | B seen -> issued %.0f / %.0f\n", g2.mean(0), g2.mean(2), g2.mean(1),
                g2.mean(3), g.mean(2), g2.mean(4), g.mean(3), g2.mean(5));
    std::printf("    between tiles (WG0): last main issue -> next first issue %.0f; main retired -> stored %.0f, of "
                "which the epilogue %.0f\n", g.mean(7), g.mean(8), g.mean(9));
    if (c == 0) {
      std::printf("    q: pk_issued b_issued wg0_build wg0_built wg0_bseen wg0_issued wg1_build wg1_built wg1_bseen "
                "wg1_issued (cycles from start)\n");
      for (int q = 0; q < std::min(kMaxPos, ntiles * total); ++q) {
        const int it = q % total;
        if (!(q < 6 || (it >= num_main - 3) || it < 3)) continue;
        std::printf("    %4d:", q);
        for (int e : {0, 1, 16, 4, 6, 2, 17, 5, 7, 3}) print_events(at, q, e, e, t0);
        std::printf("\n");
      }
    }
  }
  cudaFree(a);
  cudaFree(asf);
  cudaFree(b16);
  cudaFree(alpha);
  cudaFree(d);
  cudaFree(l1);
  cudaFree(bias);
  cudaFree(out);
}

int main(int argc, char** argv) {
  void* flush;
  check(cudaMalloc(&flush, 256u << 20), "malloc");
  const bool skip_only = argc > 1 && std::string(argv[1]) == "--skip-only";  // the last section alone
  if (argc > 1 && std::string(argv[1]) == "--time") {  // the routed build alone, three times per shape (A/B runs)
    const long long shapes[3][2] = {{4096, 3072}, {4096, 12288}, {16384, 3072}};  // M, K
    for (int r = 0; r < 3; ++r)
      for (const auto& s : shapes) {
        run("lean_pers", lean_pers, s[0], s[1], 0, flush);
        run("lean_pers_pairs", lean_pers_pairs, s[0], s[1], 0, flush);
      }
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--power") {
    for (const long long K : {12288LL, 3072LL}) {
      for (int rnd = 0; rnd < 2; ++rnd) {
        g_random = rnd != 0;
        run("lean_pers", lean_pers, 4096, K, 0, flush, 0, 0, true, 1500);
        run("lean_pers_pairs", lean_pers_pairs, 4096, K, 0, flush, 0, 0, true, 1500);
      }
      cublas_power(4096, 3072, K, 1500);
    }
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--epi") {
    // Bits first (random operands, M = 4000 too: a partial row tile), then times: zero operands (three rounds) and
    // random ones (two), the four forms alternated.
    std::vector<unsigned short> ref, got;
    g_random = true;
    const long long bit_shapes[3][2] = {{4096, 3072}, {4000, 3072}, {1000, 12288}};
    for (const auto& s : bit_shapes) {
      g_capture = &ref;
      g_smem = 0;
      run("lean_pers_pairs", lean_pers_pairs, s[0], s[1], 0, flush);
      g_capture = &got;
      g_smem = kSmemEpi;
      for (int form = 0; form < 2; ++form) {
        if (form == 0) run("pairs_b4_epi", pairs_b4_epi, s[0], s[1], 0, flush);
        else run("split_pairs_b4_epi", split_pairs_b4_epi, s[0], s[1], 0, flush);
        const long long diffs = count_diffs(ref, got);
        const long long nonzero = (long long)ref.size() - (long long)std::count(ref.begin(), ref.end(), 0);
        std::printf("BITS %s %lld x 3072 x %lld: %lld of %zu outputs differ from lean_pers_pairs (%lld nonzero)\n",
                    form == 0 ? "pairs_b4_epi" : "split_pairs_b4_epi", s[0], s[1], diffs, ref.size(), nonzero);
      }
    }
    g_capture = nullptr;
    const long long shapes[3][2] = {{4096, 3072}, {4096, 12288}, {16384, 3072}};
    for (int r = 0; r < 5; ++r) {
      g_random = r >= 3;
      for (const auto& s : shapes) {
        g_smem = 0;
        run("lean_pers_pairs", lean_pers_pairs, s[0], s[1], 0, flush);
        g_smem = kSmemEpi;
        run("pairs_b4", pairs_b4, s[0], s[1], 0, flush);
        run("pairs_b4_epi", pairs_b4_epi, s[0], s[1], 0, flush);
        run("split_pairs_b4_epi", split_pairs_b4_epi, s[0], s[1], 0, flush);
      }
    }
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--epi2") {
    // The TMA-store epilogue with one / two d buffers: bits at r = 128 and 32 (random operands), then times (zero
    // operands, three rounds); traced: the timeline of the one-buffer form (build without -DWS_TRACE_NONE).
    std::vector<unsigned short> ref, got;
    for (long long r : {128LL, 32LL}) {
      g_rank = r;
      g_random = true;
      g_capture = &ref;
      g_smem = 0;
      run("lean_pers_pairs", lean_pers_pairs, 4000, 3072, 0, flush);
      g_capture = &got;
      g_smem = kSmemEpiD2;
      run("pairs_b4_epi_d2", pairs_b4_epi_d2, 4000, 3072, 0, flush);
      std::printf("BITS pairs_b4_epi_d2 4000 x 3072 x 3072 r%lld: %lld of %zu outputs differ from lean_pers_pairs\n", r,
                  count_diffs(ref, got), ref.size());
    }
    g_capture = nullptr;
    g_random = false;
    const long long shapes[2][2] = {{4096, 3072}, {16384, 3072}};
    for (int round = 0; round < 3; ++round)
      for (long long r : {128LL, 32LL}) {
        g_rank = r;
        for (const auto& s : shapes) {
          g_smem = kSmemEpiD2;
          run("pairs_b4_epi", pairs_b4_epi, s[0], s[1], 0, flush);
          run("pairs_b4_epi_d2", pairs_b4_epi_d2, s[0], s[1], 0, flush);
        }
      }
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--epi-trace") {  // (traced build) the timeline of the epi form
    g_smem = kSmemEpiD2;
    run("pairs_b4_epi", pairs_b4_epi, 4096, 3072, 0, flush);
    run("pairs_b4_epi", pairs_b4_epi, 4096, 12288, 0, flush);
    g_smem = 0;
    run("lean_pers_pairs", lean_pers_pairs, 4096, 3072, 0, flush);
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--bias") {  // the epilogue with and without the bias loads
    for (int b : {1, 0}) run("lean_pers", lean_pers, 4096, 3072, 0, flush, 0, 0, b != 0);
    return 0;
  }
#define RUN(k, M, K, skew) \
  if (!skip_only) run(#k, k, M, K, skew, flush)
  // (Starting warpgroup 1 1500 / 3000 cycles late: the warpgroups fall back into step within the first tile.)
  RUN(lean_pers, 4096, 3072, 3000);
  for (long long K : {3072LL, 12288LL}) {
    RUN(lean_pers, 4096, K, 0);
    RUN(lean_pers_split, 4096, K, 0);
  }
  RUN(lean_pers, 16384, 3072, 0);
  RUN(lean_pers_split, 16384, 3072, 0);
  // Half and a quarter of the SMs: does the period per K tile depend on what the other SMs load (L2)?
  for (int ctas : {66, 33}) {
    if (skip_only) break;
    run("lean_pers", lean_pers, 4096, 3072, 0, flush, ctas);
    run("lean_pers_split", lean_pers_split, 4096, 3072, 0, flush, ctas);
  }
  // Without the shared-memory writes of the packed slots (1), of the B ring (2), of both (3).
  for (long long K : {3072LL, 12288LL})
    for (int skip : {0, 1, 2, 3}) run("lean_pers", lean_pers, 4096, K, 0, flush, 0, skip);
  return 0;
}
