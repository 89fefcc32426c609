// Does the order of the 16 K positions inside one wgmma.m64n128k16 (FP16 inputs, FP32 accumulators) change its
// result bits? The programs' determinism contract fixes which K element sits at which position of every k16 step;
// a program that places them differently (another fragment pairing) stays bitwise equal to the others only if the
// tensor core sums the 16 products and the accumulator order-independently.
//
// Each block is one warpgroup and one trial: random A [64 x 16], B [128 x 16] (FP16 with a wide exponent spread, so
// that any alignment or truncation inside the sum shows) and a random FP32 accumulator; the K positions of A and B
// are permuted by the same permutation (so the product set is the same), one SS wgmma runs, and the 8192 FP32
// results are compared bit for bit with the identity order's.
//
// Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels bench/micro/k16_order.cu -o k16_order
// Run:   ./k16_order   (one row per permutation: outputs that differ from the identity order's, of trials x 8192)
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include "common/sm90_wgmma.cuh"
#include "micro_util.hpp"

using namespace svdq_k;

constexpr int kRowsA = 64, kRowsB = 128, kK = 16, kOut = kRowsA * kRowsB;

// a: [trials][64][16] FP16 bits, b: [trials][128][16], c/out: [trials][64][128] FP32 (row-major).
__global__ void k16_kernel(const uint16_t* a, const uint16_t* b, const float* c, float* out, int zero_acc) {
  __shared__ __align__(1024) unsigned char smem[(kRowsB + kRowsA) * 128];
  const int trial = blockIdx.x, t = threadIdx.x;
  const uint16_t* at = a + (size_t)trial * kRowsA * kK;
  const uint16_t* bt = b + (size_t)trial * kRowsB * kK;
  // K-major rows of 128 bytes in the 128-byte swizzle; only K 0..15 (16-byte chunks 0 and 1) are used.
  for (int i = t; i < (kRowsB + kRowsA) * 64; i += blockDim.x) reinterpret_cast<uint16_t*>(smem)[i] = 0;
  __syncthreads();
  for (int i = t; i < kRowsB * kK; i += blockDim.x) {
    const int r = i / kK, k = i % kK, chunk = (k / 8) ^ (r & 7);
    reinterpret_cast<uint16_t*>(smem + r * 128 + chunk * 16)[k % 8] = bt[i];
  }
  for (int i = t; i < kRowsA * kK; i += blockDim.x) {
    const int r = i / kK, k = i % kK, chunk = (k / 8) ^ (r & 7);
    reinterpret_cast<uint16_t*>(smem + kRowsB * 128 + r * 128 + chunk * 16)[k % 8] = at[i];
  }
  fence_proxy_async_shared();
  __syncthreads();
  const u32 base = (u32)__cvta_generic_to_shared(smem);
  const int warp = t >> 5, lane = t & 31;
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) {  // the m64nN accumulator layout: row 16 warp + lane / 4 (+8), column 8 j + 2 (lane % 4) (+1)
    const int row = 16 * warp + lane / 4 + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
    acc[i] = zero_acc ? 0.0f : c[(size_t)trial * kOut + row * kRowsB + col];
  }
  wgmma_fence();
  wgmma_m64n128k16_f16(acc, wgmma_desc_sw128(base + kRowsB * 128), wgmma_desc_sw128(base));
  wgmma_commit();
  wgmma_wait_all(acc);
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const int row = 16 * warp + lane / 4 + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
    out[(size_t)trial * kOut + row * kRowsB + col] = acc[i];
  }
}

int main() {
  const int trials = 512;
  std::mt19937 rng(12345);
  // FP16 values: random sign, exponent 2^-12 .. 2^8, random mantissa (A: the few mantissa bits of e2m1 x e4m3).
  auto rand_half = [&](int mant_bits) {
    const int e = (int)(rng() % 21) - 12;
    const float m = 1.0f + (float)(rng() % (1u << mant_bits)) / (float)(1u << mant_bits);
    const float v = std::ldexp(m, e) * ((rng() & 1) ? -1.0f : 1.0f);
    const __half h = __float2half_rn(v);
    uint16_t bits;
    std::memcpy(&bits, &h, 2);
    return bits;
  };
  std::vector<uint16_t> a((size_t)trials * kRowsA * kK), b((size_t)trials * kRowsB * kK);
  std::vector<float> c((size_t)trials * kOut);
  for (auto& x : a) x = rand_half(4);
  for (auto& x : b) x = rand_half(10);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& x : c) x = std::ldexp(u(rng), (int)(rng() % 21) - 4);
  const std::vector<std::pair<const char*, std::vector<int>>> perms = {
      {"identity", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
      {"pairs swapped (2j <-> 2j+1)", {1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14}},
      {"reversed inside each half", {7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8}},
      {"quads swapped inside each half", {4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11}},
      {"halves swapped", {8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7}},
      {"halves mixed (quads 1 and 2 swapped)", {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15}},
      {"interleaved (0,8,1,9,...)", {0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15}},
      {"reversed", {15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}},
      {"pairs of the two halves swapped (2,3 <-> 8,9)", {0, 1, 8, 9, 4, 5, 6, 7, 2, 3, 10, 11, 12, 13, 14, 15}},
  };
  uint16_t *da, *db;
  float *dc, *dout;
  check(cudaMalloc(&da, a.size() * 2), "malloc");
  check(cudaMalloc(&db, b.size() * 2), "malloc");
  check(cudaMalloc(&dc, c.size() * 4), "malloc");
  check(cudaMalloc(&dout, c.size() * 4), "malloc");
  check(cudaMemcpy(dc, c.data(), c.size() * 4, cudaMemcpyHostToDevice), "copy");
  for (int zero_acc = 0; zero_acc < 2; ++zero_acc) {
    std::printf("accumulator %s: outputs (of %d) whose bits differ from the identity order's\n",
                zero_acc ? "zero" : "random FP32", trials * kOut);
    std::vector<float> ref;
    for (const auto& [name, p] : perms) {
      std::vector<uint16_t> pa(a.size()), pb(b.size());
      for (size_t r = 0; r < a.size() / kK; ++r)
        for (int k = 0; k < kK; ++k) pa[r * kK + k] = a[r * kK + p[k]];
      for (size_t r = 0; r < b.size() / kK; ++r)
        for (int k = 0; k < kK; ++k) pb[r * kK + k] = b[r * kK + p[k]];
      check(cudaMemcpy(da, pa.data(), pa.size() * 2, cudaMemcpyHostToDevice), "copy");
      check(cudaMemcpy(db, pb.data(), pb.size() * 2, cudaMemcpyHostToDevice), "copy");
      k16_kernel<<<trials, 128>>>(da, db, dc, dout, zero_acc);
      check(cudaDeviceSynchronize(), "kernel");
      std::vector<float> out(c.size());
      check(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost), "copy");
      if (ref.empty()) ref = out;
      long long diff = 0;
      for (size_t i = 0; i < out.size(); ++i) diff += std::memcmp(&out[i], &ref[i], 4) != 0;
      std::printf("  %-48s %lld\n", name, diff);
    }
  }
  return 0;
}
