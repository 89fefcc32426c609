// Quantization alone (nvfp4_quantize_smooth: kernels/quantize/smxx_quant_lora.cuh) in the forms it can take: the
// kernel compiled with d (smxx_quant_lora_s3: 128 registers, four CTAs per SM, the K cut in d's chunks) against the
// kernel compiled for quantization alone (LORA = false) under launch bounds of 8 / 6 / 5 CTAs per SM, each with K
// cut into one wave of CTAs of equal K ranges (src/programs/quant_lora.cpp, written out here: the micro links no
// library) or into two waves. Random BF16 x (every form's codes and scales must be byte-equal to the first's), pqs
// in [0.5, 2), swizzled scales; cold L2 (256 MiB rewritten before each launch), CUDA events, median of 15 launches;
// the share of the copy rate (a 1 GiB device-to-device cudaMemcpy, read + written, in the same run).
// Arguments: MxK ... (default: the quantize bench's rows and a held-out sample).
//
// Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels bench/micro/quantize_forms.cu -o q
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <cuda_runtime.h>

#include "quantize/smxx_quant_lora.cuh"
#include "micro_util.hpp"

using namespace svdq_k;

extern "C" __global__ void __launch_bounds__(128, 4) with_d4(const QuantLoraParams p) { smxx_quant_lora<3>(p); }
extern "C" __global__ void __launch_bounds__(128, 8) alone8(const QuantLoraParams p) { smxx_quant_lora<3, false>(p); }
extern "C" __global__ void __launch_bounds__(128, 6) alone6(const QuantLoraParams p) { smxx_quant_lora<3, false>(p); }
extern "C" __global__ void __launch_bounds__(128, 5) alone5(const QuantLoraParams p) { smxx_quant_lora<3, false>(p); }

__global__ void fill_random(u16* x, long long n, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    // sign, exponent 2^-6 .. 2^5 around 1, 7 mantissa bits
    x[i] = (u16)((h & 0x8000u) | ((121u + (h >> 16) % 12u) << 7) | (h & 0x7Fu));
  }
}

struct Form {
  const char* name;
  void (*kernel)(const QuantLoraParams);
  int ctas_per_sm;  // 0: the with-d kernel's plan (d's chunks, about eight CTAs per SM)
  int waves;
};

int main(int argc, char** argv) {
  std::vector<std::pair<long long, long long>> shapes;
  for (int i = 1; i < argc; ++i) {
    long long m = 0, k = 0;
    if (std::sscanf(argv[i], "%lldx%lld", &m, &k) == 2) shapes.push_back({m, k});
  }
  if (shapes.empty())
    shapes = {{4096, 3072}, {4608, 3072}, {4608, 12288}, {512, 12288}, {1, 4096},  // the bench's rows
              {2048, 5120}, {1024, 8192}, {8192, 4096}, {333, 2816}, {3000, 14336}, {16384, 3072}, {77, 3104}};
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attr");
  void *flush = nullptr, *big = nullptr;
  check(cudaMalloc(&flush, 256u << 20), "malloc");
  check(cudaMalloc(&big, 2u << 30), "malloc");
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  float ms = 0;
  std::vector<float> cms;
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(e0);
    cudaMemcpy(static_cast<char*>(big) + (1u << 30), big, 1u << 30, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    cudaEventElapsedTime(&ms, e0, e1);
    cms.push_back(ms);
  }
  std::sort(cms.begin(), cms.end());
  const double copy_gbs = 2.0 * (1u << 30) / (cms[2] * 1e-3) / 1e9;
  cudaFree(big);
  std::printf("# %d SMs, copy rate %.1f GB/s\n", sms, copy_gbs);
  const Form forms[] = {{"with_d4 (d's chunks)", with_d4, 0, 0}, {"alone8 1 wave", alone8, 8, 1},
                        {"alone8 2 waves", alone8, 8, 2},        {"alone6 1 wave", alone6, 6, 1},
                        {"alone6 2 waves", alone6, 6, 2},        {"alone5 1 wave", alone5, 5, 1}};
  std::printf("%-8s %-6s %-22s %6s %6s %9s %8s %s\n", "M", "K", "form", "grid", "ktiles", "us", "of_copy", "bytes");
  for (auto [M, K] : shapes) {
    const long long sf_rows = (M + 127) / 128 * 128, sf_cols = (K / 16 + 3) / 4 * 4;
    u16 *x = nullptr, *pqs = nullptr;
    float* gs = nullptr;
    u8 *xq = nullptr, *sf = nullptr;
    check(cudaMalloc(&x, M * K * 2), "malloc");
    check(cudaMalloc(&pqs, K * 2), "malloc");
    check(cudaMalloc(&gs, 4), "malloc");
    check(cudaMalloc(&xq, M * K / 2), "malloc");
    check(cudaMalloc(&sf, sf_rows * sf_cols), "malloc");
    fill_random<<<1024, 256>>>(x, M * K, 12345u);
    std::vector<u16> hp(K);
    for (long long i = 0; i < K; ++i) hp[i] = (u16)(0x3F00u + (unsigned)((i * 37) % 256));  // [0.5, 2)
    cudaMemcpy(pqs, hp.data(), K * 2, cudaMemcpyHostToDevice);
    const float g = 37.5f;
    cudaMemcpy(gs, &g, 4, cudaMemcpyHostToDevice);
    const double bytes = double(M) * K * 2 + K * 2 + double(M) * K / 2 + double(sf_rows) * sf_cols;
    std::vector<u8> ref_q, ref_sf;
    const int ktiles = (int)((K + 63) / 64);
    const long long row_tiles = (M + 63) / 64;
    for (const Form& f : forms) {
      QuantLoraParams p{};
      p.x = x;
      p.pqs = pqs;
      p.global_scale = gs;
      p.xq = xq;
      p.sf = sf;
      p.m = M;
      p.k = K;
      p.sf_rows = sf_rows;
      p.sf_cols = sf_cols;
      p.swizzled = 1;
      p.row_tiles = row_tiles;
      p.rank_tiles = 1;
      int splits = 1;
      if (f.ctas_per_sm == 0) {  // the with-d kernel's plan: d's chunks, about eight CTAs per SM
        p.chunk_tiles = (ktiles + 31) / 32;
        p.chunks = (ktiles + p.chunk_tiles - 1) / p.chunk_tiles;
        p.chunks_per_split = p.chunks;
        if (row_tiles < 8LL * sms) {
          const long long want = (8LL * sms + row_tiles - 1) / row_tiles;
          const int s = (int)std::min<long long>(want, p.chunks);
          p.chunks_per_split = (p.chunks + s - 1) / s;
          splits = (p.chunks + p.chunks_per_split - 1) / p.chunks_per_split;
        }
      } else {  // K tiles in equal ranges, at most `waves` waves of CTAs
        p.chunk_tiles = 1;
        p.chunks = ktiles;
        p.chunks_per_split = ktiles;
        const long long wave = (long long)f.ctas_per_sm * sms * f.waves;
        if (row_tiles < wave) {
          const long long most = std::max<long long>(1, wave / row_tiles);
          p.chunks_per_split = (int)((ktiles + most - 1) / most);
          splits = (ktiles + p.chunks_per_split - 1) / p.chunks_per_split;
        }
      }
      p.group_chunks = 1;
      p.splits = splits;
      const long long grid = row_tiles * splits;
      const int smem = 3 * (128 * 64 + 4 * 128) + 128 * 4;
      check(cudaFuncSetAttribute(f.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem attr");
      std::vector<float> t;
      for (int r = 0; r < 16; ++r) {
        cudaMemsetAsync(flush, r, 256u << 20);
        if (r == 0) {
          cudaMemset(xq, 0xAB, M * K / 2);
          cudaMemset(sf, 0xAB, sf_rows * sf_cols);
        }
        cudaEventRecord(e0);
        f.kernel<<<(unsigned)grid, 128, smem>>>(p);
        cudaEventRecord(e1);
        check(cudaEventSynchronize(e1), f.name);
        cudaEventElapsedTime(&ms, e0, e1);
        if (r > 0) t.push_back(ms * 1e3f);
      }
      std::sort(t.begin(), t.end());
      std::vector<u8> hq(M * K / 2), hs(sf_rows * sf_cols);
      cudaMemcpy(hq.data(), xq, hq.size(), cudaMemcpyDeviceToHost);
      cudaMemcpy(hs.data(), sf, hs.size(), cudaMemcpyDeviceToHost);
      const char* same = "first";
      if (ref_q.empty()) {
        ref_q = hq;
        ref_sf = hs;
      } else {
        same = (hq == ref_q && hs == ref_sf) ? "equal" : "DIFFER";
      }
      const double us = t[t.size() / 2];
      std::printf("%-8lld %-6lld %-22s %6lld %6d %9.2f %8.3f %s\n", M, K, f.name, grid, p.chunks_per_split * p.chunk_tiles,
                  us, bytes / (us * 1e-6) / 1e9 / copy_gbs, same);
    }
    cudaFree(x);
    cudaFree(pqs);
    cudaFree(gs);
    cudaFree(xq);
    cudaFree(sf);
  }
  return 0;
}
