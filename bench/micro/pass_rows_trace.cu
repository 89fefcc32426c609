// Timeline of the 64-row one pass (kernels/quantize/smxx_quant_lora.cuh, unchanged; STAGES = 3 as the registry's
// build, and 4 / 6 for comparison: more K tiles in flight per CTA, fewer CTAs per SM) at the M >= 512 rows of the
// layer table and the FLUX workload, rank 32, smoothed, swizzled scales, no FP16 copy (the routed GEMMs there read A
// as codes): every CTA's SVDQ_TRACE events and SM on the global timer, summed
// up as when the CTAs start (waves), how long a CTA's K loop takes per K tile, how long the split's last CTAs wait and
// add, and the span on CUDA events (cold L2, a busy kernel before it so the host's launch latency does not set the
// start). Arguments: M K [splits [stages]] (splits: the plan's override as SVDQ_PASS_SPLITS, 0 = the plan's own;
// stages 3, 4 or 6); none: the default rows at 3 stages, then at 4 and 6.
//
// The plan is src/programs/quant_lora.cpp's plan_quant_lora, written out here (the micro links no library); the launch
// always takes the kernel's shared memory (four CTAs per SM), also where svdquant_linear's launch asks for three.
//
// Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels bench/micro/pass_rows_trace.cu -o t
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

constexpr int kMaxCtas = 4096, kEvents = 7;  // events 0-5 of the program, 6: the SM
__device__ unsigned long long g_ns[kMaxCtas][kEvents];
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void trace_point(int point, int it) {
  if (threadIdx.x != 0 || blockIdx.x >= kMaxCtas || (point == 1 && it != 0)) return;
  g_ns[blockIdx.x][point] = global_ns();
  if (point == 0) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    g_ns[blockIdx.x][6] = sm;
  }
}
#define SVDQ_TRACE(point, it) trace_point(point, it)
#include "quantize/smxx_quant_lora.cuh"
#include "pass_micro.hpp"

using namespace svdq_k;

template <int S>
__global__ void __launch_bounds__(128, S == 3 ? 4 : 1) pass(const QuantLoraParams p) { smxx_quant_lora<S>(p); }
extern "C" __global__ void busy(unsigned ns) {
  const unsigned long long t0 = global_ns();
  while (global_ns() - t0 < ns) {
  }
}

struct Plan {
  int row_tiles, chunk_tiles, chunks, group_chunks, chunks_per_split, splits, grid, slots;
};
static Plan plan(long long m, long long k, int sms, int forced) {
  Plan p{};
  p.row_tiles = (int)((m + 63) / 64);
  const int ktiles = (int)((k + 63) / 64);
  p.chunk_tiles = (ktiles + 31) / 32;
  p.chunks = (ktiles + p.chunk_tiles - 1) / p.chunk_tiles;
  p.group_chunks = (p.chunks + 7) / 8;
  p.chunks_per_split = p.chunks;
  p.splits = 1;
  const int groups = (p.chunks + p.group_chunks - 1) / p.group_chunks;
  const long long units = p.row_tiles;  // rank 32: one rank tile
  if (forced > 0 || units < 3LL * sms) {
    const long long want = forced > 0 ? forced : (4LL * sms + units - 1) / units;
    if (want <= groups || units * groups >= sms) {
      const long long w = std::min<long long>(want, groups);
      p.chunks_per_split = (int)((groups + w - 1) / w) * p.group_chunks;
    } else {
      p.chunks_per_split = 1;
      for (int d = p.group_chunks; d > 1; --d)
        if (p.group_chunks % d == 0 && (p.chunks + d - 1) / d >= want) {
          p.chunks_per_split = d;
          break;
        }
    }
    p.splits = (p.chunks + p.chunks_per_split - 1) / p.chunks_per_split;
  }
  p.slots = p.chunks_per_split < p.group_chunks ? p.chunks : groups;
  p.grid = (int)(units * p.splits);
  return p;
}

static double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)(q * (v.size() - 1) + 0.5))];
}

template <int S>
static void run(long long M, long long K, int forced) {
  using C = QuantLoraConfig<S>;
  constexpr int R = 32;
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const Plan pl = plan(M, K, sms, forced);
  if (pl.grid > kMaxCtas) {
    std::printf("M %lld K %lld: grid %d > %d traced CTAs, skipped\n", M, K, pl.grid, kMaxCtas);
    return;
  }
  PassBuffers buf(M, K, R, (size_t)pl.slots * pl.row_tiles * 64 * R * 4 + 256, (size_t)pl.grid, false);
  QuantLoraParams& p = buf.p;
  const long long sf_rows = p.sf_rows, sf_cols = p.sf_cols;
  void* flush;
  const size_t flush_bytes = 256ull << 20;
  check(cudaMalloc(&flush, flush_bytes), "malloc");
  p.row_tiles = pl.row_tiles;
  p.splits = pl.splits;
  p.chunk_tiles = pl.chunk_tiles;
  p.chunks = pl.chunks;
  p.group_chunks = pl.group_chunks;
  p.chunks_per_split = pl.chunks_per_split;
  check(cudaFuncSetAttribute(pass<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem), "smem");
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pass<S>, 128, C::kSmem), "occupancy");
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> span;
  std::vector<unsigned long long> ns((size_t)kMaxCtas * kEvents);
  for (int rep = 0; rep < 6; ++rep) {
    cudaMemset(flush, rep, flush_bytes);  // cold L2
    p.epoch = 1000 + rep;
    busy<<<1, 32>>>(20000);
    cudaEventRecord(e0);
    pass<S><<<pl.grid, 128, C::kSmem>>>(p);
    cudaEventRecord(e1);
    check(cudaEventSynchronize(e1), "pass");
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    span.push_back(ms * 1000.0f);
    check(cudaMemcpyFromSymbol(ns.data(), g_ns, sizeof(unsigned long long) * ns.size()), "copy");
  }
  std::sort(span.begin(), span.end());
  const double x_mb = M * K * 2 / 1e6, out_mb = (M * K / 2 + sf_rows * sf_cols + M * R * 2) / 1e6;
  const int ktiles = (int)((K + 63) / 64);
  const int tiles_per_cta = std::min(ktiles, pl.chunks_per_split * pl.chunk_tiles);
  std::printf("STAGES %d, M %lld K %lld r %d: %d CTAs = %d row tiles x %d splits (%d K tiles each, %d partial slots), %d CTAs "
              "per SM fit (%d bytes of shared memory), %d SMs\n",
              S, M, K, R, pl.grid, pl.row_tiles, pl.splits, tiles_per_cta, pl.splits > 1 ? pl.slots : 0, per_sm,
              C::kSmem, sms);
  std::printf("  span (CUDA events, median of 6): %.2f us; x %.1f MB + outputs %.1f MB -> %.2f TB/s\n",
              span[span.size() / 2], x_mb, out_mb, (x_mb + out_mb) / span[span.size() / 2]);  // MB / us = TB / s
  // The last run, ns from the first CTA's start.
  unsigned long long t0 = ~0ull;
  for (int c = 0; c < pl.grid; ++c) t0 = std::min(t0, ns[(size_t)c * kEvents]);
  std::vector<double> start, loop, per_tile, end_loop, wait, add, first_in;
  double last_end = 0;
  for (int c = 0; c < pl.grid; ++c) {
    const unsigned long long* e = &ns[(size_t)c * kEvents];
    const bool last = pl.splits > 1 && c % pl.splits == pl.splits - 1;
    start.push_back((e[0] - t0) / 1e3);
    first_in.push_back((e[1] - e[0]) / 1e3);
    loop.push_back((e[2] - e[0]) / 1e3);
    per_tile.push_back((e[2] - e[1]) / 1e3 / std::max(1, tiles_per_cta - 1));
    end_loop.push_back((e[2] - t0) / 1e3);
    if (last) {
      wait.push_back((e[4] - e[3]) / 1e3);
      add.push_back((e[5] - e[4]) / 1e3);
      last_end = std::max(last_end, (e[5] - t0) / 1e3);
    } else {
      last_end = std::max(last_end, ((pl.splits > 1 ? e[3] : e[2]) - t0) / 1e3);
    }
  }
  const auto row = [](const char* name, const std::vector<double>& v) {
    std::printf("  %-34s min %7.2f  p10 %7.2f  p50 %7.2f  p90 %7.2f  max %7.2f us\n", name, pct(v, 0), pct(v, 0.1),
                pct(v, 0.5), pct(v, 0.9), pct(v, 1.0));
  };
  row("CTA start", start);
  row("start -> first K tile in", first_in);
  row("start -> K loop done", loop);
  row("per later K tile", per_tile);
  row("K loop done (from first start)", end_loop);
  if (!wait.empty()) {
    row("last CTAs: wait for the others", wait);
    row("last CTAs: add the slots, store d", add);
  }
  std::printf("  last event %.2f us after the first CTA's start\n", last_end);
  // CTAs resident at once: the most starts before the first end, and how the starts fall in waves.
  std::vector<double> s_sorted = start;
  std::sort(s_sorted.begin(), s_sorted.end());
  const double first_end = pct(end_loop, 0);
  const size_t first_wave = std::upper_bound(s_sorted.begin(), s_sorted.end(), first_end) - s_sorted.begin();
  std::printf("  CTAs started before the first K loop ended: %zu of %d\n", first_wave, pl.grid);
  cudaFree(flush);
}

int main(int argc, char** argv) {
  if (argc >= 3) {
    const long long m = std::atoll(argv[1]), k = std::atoll(argv[2]);
    const int splits = argc >= 4 ? std::atoi(argv[3]) : 0, stages = argc >= 5 ? std::atoi(argv[4]) : 3;
    if (stages == 4) run<4>(m, k, splits);
    else if (stages == 6) run<6>(m, k, splits);
    else run<3>(m, k, splits);
    return 0;
  }
  const long long rows[][2] = {{4096, 3072}, {4608, 3072}, {4608, 12288}, {512, 3072}, {512, 12288}};
  for (const auto& r : rows) run<3>(r[0], r[1], 0);
  for (const auto& r : rows) run<4>(r[0], r[1], 0);
  for (const auto& r : rows) run<6>(r[0], r[1], 0);
  return 0;
}
