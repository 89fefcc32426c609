// The FP16 copy launch (kernels/quantize/smxx_dequant_fp16.cuh) at the suite's weight shapes with W = 1, 2, 4, 8
// words per thread (the registry's build takes 2): CUDA-event time per launch (median of 20, each after a 256 MiB
// flush: cold L2) and the bandwidth it reaches (bytes read + written).
// Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels bench/micro/dequant_copy.cu -o t
#include <algorithm>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>
#include "quantize/smxx_dequant_fp16.cuh"
#include "micro_util.hpp"

using namespace svdq_k;

template <int W>
__global__ void __launch_bounds__(256) copy_w(const DequantParams p) {
  smxx_dequant_fp16_words<W>(p);
}

template <int W>
static void run(long long rows, long long K, void* flush) {
  const long long sf_rows = (rows + 127) / 128 * 128, sf_cols = (K / 16 + 3) / 4 * 4;
  void *a, *sf, *out;
  check(cudaMalloc(&a, rows * K / 2), "malloc");
  check(cudaMalloc(&sf, sf_rows * sf_cols), "malloc");
  check(cudaMalloc(&out, rows * K * 2), "malloc");
  cudaMemset(a, 0x5a, rows * K / 2);
  cudaMemset(sf, 0x38, sf_rows * sf_cols);
  DequantParams p{};
  p.a = static_cast<const u8*>(a);
  p.a_sf = static_cast<const u8*>(sf);
  p.out = static_cast<u16*>(out);
  p.m = rows;
  p.k = K;
  const long long words = rows * K / 8;
  const unsigned grid = (unsigned)((words + 256LL * W - 1) / (256LL * W));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> t;
  for (int r = 0; r < 21; ++r) {
    check(cudaMemset(flush, r, 256u << 20), "flush");
    cudaEventRecord(e0);
    copy_w<W><<<grid, 256>>>(p);
    cudaEventRecord(e1);
    check(cudaEventSynchronize(e1), "copy");
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (r > 0) t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  const double us = t[t.size() / 2] * 1e3, bytes = rows * K * 0.5 + sf_rows * sf_cols + rows * K * 2.0;
  std::printf("%lld x %lld, %d word(s) per thread: %.2f us, %.2f TB/s\n", rows, K, W, us, bytes / us * 1e-6);
  cudaFree(a);
  cudaFree(sf);
  cudaFree(out);
}

int main() {
  void* flush;
  check(cudaMalloc(&flush, 256u << 20), "malloc");
  const long long shapes[3][2] = {{3072, 3072}, {3072, 12288}, {12288, 3072}};  // rows, K
  for (int rep = 0; rep < 2; ++rep)
    for (const auto& s : shapes) {
      const long long R = s[0], K = s[1];
      run<1>(R, K, flush);
      run<2>(R, K, flush);
      run<4>(R, K, flush);
      run<8>(R, K, flush);
    }
  return 0;
}
