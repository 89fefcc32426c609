// Timeline of the one pass (kernels/quantize/smxx_quant_lora.cuh, unchanged, STAGES = 3 as the registry's build) at
// decode-sized M, where it lasts ~15 us while its CTAs are active ~6 us on average (ncu, H100, 2026-12-07): every
// CTA's SVDQ_TRACE events on the GPU's global timer (ns, comparable across SMs), relative to the first CTA's start,
// for M = 1 and 16 at K = 4096 and 14336, rank 32, with the FP16 copy written (as svdquant_linear before the GEMV).
// Events: 0 start, 1 first K tile in (after its wait and barrier), 2 K loop done, 3 sums published (split CTAs) /
// about to wait (the last), 4 the others' flags seen (last), 5 d stored (last). Also the launch's span on CUDA
// events and a busy kernel before it, so the host's launch latency does not set its start.
//
// The split plan is src/programs/quant_lora.cpp's for 132 SMs (written out here: the micro links no library).
//
// Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels bench/micro/pass_trace.cu -o t
#include <algorithm>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

constexpr int kMaxCtas = 64, kEvents = 6;
__device__ unsigned long long g_ns[kMaxCtas][kEvents];
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void trace_point(int point, int it) {
  if (threadIdx.x == 0 && blockIdx.x < kMaxCtas && (point != 1 || it == 0)) g_ns[blockIdx.x][point] = global_ns();
}
#define SVDQ_TRACE(point, it) trace_point(point, it)
#include "quantize/smxx_quant_lora.cuh"
#include "pass_micro.hpp"

using namespace svdq_k;
using C = QuantLoraConfig<3>;

extern "C" __global__ void __launch_bounds__(128) pass(const QuantLoraParams p) { smxx_quant_lora<3>(p); }
extern "C" __global__ void busy(unsigned ns) {
  const unsigned long long t0 = global_ns();
  while (global_ns() - t0 < ns) {
  }
}

static void run(long long M, long long K, int R) {
  // plan_quant_lora(M <= 64, K, R = 32, 132 SMs): one row tile and rank tile; K tiles of 64 in <= 32 chunks, <= 8
  // groups; 528 CTAs wanted, more than the groups: one chunk per split.
  const int ktiles = (int)((K + 63) / 64), chunk_tiles = (ktiles + 31) / 32, chunks = (ktiles + chunk_tiles - 1) / chunk_tiles;
  const int group_chunks = (chunks + 7) / 8, splits = chunks;
  PassBuffers buf(M, K, R, (size_t)chunks * 64 * R * 4, (size_t)splits, true);
  QuantLoraParams& p = buf.p;
  void* flush;
  const size_t flush_bytes = 256ull << 20;
  check(cudaMalloc(&flush, flush_bytes), "malloc");
  p.row_tiles = 1;
  p.splits = splits;
  p.chunk_tiles = chunk_tiles;
  p.chunks = chunks;
  p.group_chunks = group_chunks;
  p.chunks_per_split = 1;
  check(cudaFuncSetAttribute(pass, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem), "smem");
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> span;
  std::vector<unsigned long long> ns(kMaxCtas * kEvents);
  for (int rep = 0; rep < 6; ++rep) {
    cudaMemset(flush, rep, flush_bytes);  // cold L2
    p.epoch = 1000 + rep;
    busy<<<1, 32>>>(20000);
    cudaEventRecord(e0);
    pass<<<splits, 128, C::kSmem>>>(p);
    cudaEventRecord(e1);
    check(cudaEventSynchronize(e1), "pass");
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    span.push_back(ms * 1000.0f);
    check(cudaMemcpyFromSymbol(ns.data(), g_ns, sizeof(unsigned long long) * ns.size()), "copy");
  }
  std::sort(span.begin(), span.end());
  std::printf("M %lld K %lld r %d: %d CTAs (one chunk of %d K tiles each), CUDA-event span median %.2f us\n", M, K,
              R, splits, chunk_tiles, span[span.size() / 2]);
  unsigned long long t0 = ~0ull;
  for (int c = 0; c < splits && c < kMaxCtas; ++c) t0 = std::min(t0, ns[c * kEvents + 0]);
  std::printf("  last run, ns from the first CTA's start: cta: start, first tile in, loop done, published/waits, "
              "flags seen, d stored\n");
  for (int c = 0; c < splits && c < kMaxCtas; ++c) {
    if (c > 3 && c + 3 < splits) continue;  // the first and last few
    const unsigned long long* e = &ns[c * kEvents];
    std::printf("  %3d:", c);
    for (int k = 0; k < kEvents; ++k) {
      if (k >= 4 && c + 1 != splits) break;
      std::printf(" %7lld", (long long)(e[k] - t0));
    }
    std::printf("\n");
  }
  unsigned long long first_pub = ~0ull, last_pub = 0, last_start = 0;
  for (int c = 0; c + 1 < splits && c < kMaxCtas; ++c) {
    first_pub = std::min(first_pub, ns[c * kEvents + 3]);
    last_pub = std::max(last_pub, ns[c * kEvents + 3]);
    last_start = std::max(last_start, ns[c * kEvents + 0]);
  }
  std::printf("  latest CTA start %lld ns; split sums published %lld..%lld ns\n", (long long)(last_start - t0),
              (long long)(first_pub - t0), (long long)(last_pub - t0));
  cudaFree(flush);
}

int main() {
  for (long long m : {1LL, 16LL})
    for (long long k : {4096LL, 14336LL}) run(m, k, 32);
  return 0;
}
