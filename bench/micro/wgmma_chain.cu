// Microbenchmark: how fast does one warpgroup's chain of dependent wgmma.m64nNk16 run (every instruction
// accumulates into the registers the previous one wrote, as the determinism contract's single K order requires),
// and how much do independent chains (more accumulators in one warpgroup, more warpgroups, more CTAs per SM)
// overlap? Operands are zeros in shared memory / registers (the last rows: 64 words of random FP16 pairs, repeated):
// only the tensor-core pipeline is timed (clock64 around the loop, per CTA). The loop has the shape of the programs' K loop: 4 k16 parts per "K tile" in one commit group,
// then wait_group 1 (or no wait inside the loop).
//
// Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels bench/micro/wgmma_chain.cu -o wgmma_chain
// Run:   ./wgmma_chain   (prints one row per configuration; cycles per k16 step of each chain)
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include "common/sm90_wgmma.cuh"
#include "common/sm90_wgmma_rs.cuh"
#include "micro_util.hpp"

using namespace svdq_k;

__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }

constexpr int kSmem = 48 * 1024 + 1024;  // B tile (up to 256 rows x 128 B = 32 KB) + A tile (8 KB) + alignment

template <int N, int CHAINS, bool SS, int WAIT>
__global__ void chain_kernel(const u32* zeros, long long* cycles, float* sink, int steps) {
  extern __shared__ __align__(1024) unsigned char smem[];
  for (int i = threadIdx.x; i < kSmem / 4; i += blockDim.x) reinterpret_cast<u32*>(smem)[i] = zeros[i & 63];
  fence_proxy_async_shared();
  __syncthreads();
  const u32 base = (smem_u32(smem) + 1023u) & ~1023u;
  const u64 bdesc = wgmma_desc_sw128(base), adesc = wgmma_desc_sw128(base + 32768);
  u32 f[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) f[i] = zeros[i];
  float acc[CHAINS][N / 2];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) acc[c][i] = 0.0f;
  __syncthreads();
  const long long t0 = clock64();
  for (int it = 0; it < steps; it += 4) {
    wgmma_fence();
#pragma unroll
    for (int part = 0; part < 4; ++part)
#pragma unroll
      for (int c = 0; c < CHAINS; ++c) {
        if constexpr (SS) wgmma_ss_f16<N>(acc[c], adesc + 2 * part, bdesc + 2 * part);
        else wgmma_rs_f16<N>(acc[c], f + 4 * part, bdesc + 2 * part);
      }
    wgmma_commit();
    if constexpr (WAIT >= 0) {
#pragma unroll
      for (int c = 0; c < CHAINS; ++c) wgmma_wait_acc<N, WAIT>(acc[c]);
    }
  }
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) wgmma_wait_acc<N, 0>(acc[c]);
  const long long t1 = clock64();
  __syncthreads();
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
  float s = 0.0f;
#pragma unroll
  for (int c = 0; c < CHAINS; ++c)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) s += acc[c][i];
  if (s != 0.0f) sink[threadIdx.x] = s;  // zeros in, zeros out: never taken, keeps the chain alive
}


template <int N, int CHAINS, bool SS, int WAIT>
static void run(const char* label, int wgs, int grid, const u32* zeros, long long* cyc, float* sink, int sms) {
  auto k = chain_kernel<N, CHAINS, SS, WAIT>;
  check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem), "smem attribute");
  const int steps = 4096;
  for (int rep = 0; rep < 2; ++rep) {  // the first launch warms up
    k<<<grid, 128 * wgs, kSmem>>>(zeros, cyc, sink, steps);
    check(cudaGetLastError(), label);
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0);
  k<<<grid, 128 * wgs, kSmem>>>(zeros, cyc, sink, steps);
  cudaEventRecord(e1);
  check(cudaDeviceSynchronize(), label);
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, e0, e1);
  std::vector<long long> h(grid);
  check(cudaMemcpy(h.data(), cyc, grid * sizeof(long long), cudaMemcpyDeviceToHost), "copy");
  long long mx = 0;
  double mean = 0.0;
  for (long long v : h) {
    mx = v > mx ? v : mx;
    mean += (double)v / grid;
  }
  // Tensor-core work of one k16 step of one chain: 64 x N x 16 FMAs at 2048 dense FP16 FMA per SM cycle (989
  // TFLOP/s at 132 SMs and 1.83 GHz).
  const double work = 64.0 * N * 16 / 2048.0;
  const int chains_per_sm = CHAINS * wgs * ((grid + sms - 1) / sms);
  const double per_step = mean / steps;  // cycles per k16 step of each chain, one CTA's view
  // Busy share of the SM's tensor cores if every chain on the SM runs at this CTA's pace.
  const double busy = 100.0 * work * chains_per_sm / per_step;
  std::printf("%-28s N=%3d chains/wg=%d wgs=%d grid=%4d  %7.1f cyc/k16 (slowest CTA %7.1f)  work %5.1f cyc  "
              "tensor busy %5.1f%% (%d chains/SM)  %.3f ms\n",
              label, N, CHAINS, wgs, grid, per_step, (double)mx / steps, work, busy, chains_per_sm, ms);
}

int main() {
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("device: %s, %d SMs\n", prop.name, sms);
  u32* zeros = nullptr;
  long long* cyc = nullptr;
  float* sink = nullptr;
  check(cudaMalloc(&zeros, 64 * 4), "malloc");
  check(cudaMemset(zeros, 0, 64 * 4), "memset");
  check(cudaMalloc(&cyc, 4096 * sizeof(long long)), "malloc");
  check(cudaMalloc(&sink, 1024 * 4), "malloc");
  // One chain per warpgroup, one CTA per SM: the programs' K loop.
  run<24, 1, false, 1>("rs chain", 1, 1, zeros, cyc, sink, sms);
  run<72, 1, false, 1>("rs chain", 1, 1, zeros, cyc, sink, sms);
  run<128, 1, false, 1>("rs chain", 1, 1, zeros, cyc, sink, sms);
  run<136, 1, false, 1>("rs chain", 1, 1, zeros, cyc, sink, sms);
  run<256, 1, false, 1>("rs chain", 1, 1, zeros, cyc, sink, sms);
  run<72, 1, true, 1>("ss chain", 1, 1, zeros, cyc, sink, sms);
  run<136, 1, true, 1>("ss chain", 1, 1, zeros, cyc, sink, sms);
  run<72, 1, false, -1>("rs chain, no wait in loop", 1, 1, zeros, cyc, sink, sms);
  run<72, 1, false, 0>("rs chain, wait 0 per tile", 1, 1, zeros, cyc, sink, sms);
  // Independent chains in one warpgroup (separate accumulators, interleaved per k16 part).
  run<72, 2, false, 1>("rs 2 chains in a wg", 1, 1, zeros, cyc, sink, sms);
  run<72, 3, false, 1>("rs 3 chains in a wg", 1, 1, zeros, cyc, sink, sms);
  run<24, 3, false, 1>("rs 3 chains in a wg", 1, 1, zeros, cyc, sink, sms);
  run<24, 6, false, 1>("rs 6 chains in a wg", 1, 1, zeros, cyc, sink, sms);
  // More warpgroups per CTA, and several CTAs per SM.
  run<72, 1, false, 1>("rs chain, 2 wgs", 2, 1, zeros, cyc, sink, sms);
  run<72, 1, false, 1>("rs chain, 3 wgs", 3, 1, zeros, cyc, sink, sms);
  run<72, 1, false, 1>("rs chain, all SMs", 1, sms, zeros, cyc, sink, sms);
  run<72, 1, false, 1>("rs chain, 2 CTAs per SM", 1, 2 * sms, zeros, cyc, sink, sms);
  run<256, 1, false, 1>("rs chain, 2 wgs, all SMs", 2, sms, zeros, cyc, sink, sms);
  run<128, 1, false, 1>("rs chain, 2 wgs, all SMs", 2, sms, zeros, cyc, sink, sms);
  // The same chains on nonzero operands (FP16 pairs of magnitude ~1e-3, random signs and mantissas): does the
  // tensor-core rate depend on the data?
  std::vector<u32> h(64);
  unsigned seed = 12345u;
  for (u32& w : h) {
    auto half = [&] {
      seed = seed * 1664525u + 1013904223u;
      return (u32)(0x1400u | ((seed >> 8) & 0x03FFu) | ((seed >> 20) & 0x8000u));  // ~1e-3, random sign
    };
    w = half() | (half() << 16);
  }
  u32* rnd = nullptr;
  check(cudaMalloc(&rnd, 64 * 4), "malloc");
  check(cudaMemcpy(rnd, h.data(), 64 * 4, cudaMemcpyHostToDevice), "copy");
  run<72, 1, false, 1>("rs chain, random data", 1, 1, rnd, cyc, sink, sms);
  run<72, 1, false, 1>("rs chain, random, all SMs", 1, sms, rnd, cyc, sink, sms);
  run<72, 1, true, 1>("ss chain, random data", 1, 1, rnd, cyc, sink, sms);
  run<256, 1, false, 1>("rs chain, random, 2 wgs, all", 2, sms, rnd, cyc, sink, sms);
  return 0;
}
