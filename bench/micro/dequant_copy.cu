// The FP16 copy launch (kernels/quantize/smxx_dequant_fp16.cuh) at the suite's weight shapes with W = 1, 2, 4, 8
// words per thread (the registry's build takes 2), and in the PAIRS order at W = 2, 4: CUDA-event time per launch
// (median of 20, each after a 256 MiB flush: cold L2) and the bandwidth it reaches (bytes read + written). The
// PAIRS output is checked against the plain one (every 16-byte half of each 32-byte group where it belongs).
// Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels bench/micro/dequant_copy.cu -o t
#include <algorithm>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>
#include "quantize/smxx_dequant_fp16.cuh"
#include "micro_util.hpp"

using namespace svdq_k;

template <int W, bool PAIRS>
__global__ void __launch_bounds__(256) copy_w(const DequantParams p) {
  smxx_dequant_fp16_words<W, PAIRS>(p);
}

static std::vector<unsigned> g_plain;  // the last plain W = 2 run's output (for the PAIRS check)

template <int W, bool PAIRS = false>
static void run(long long rows, long long K, void* flush) {
  const long long sf_rows = (rows + 127) / 128 * 128, sf_cols = (K / 16 + 3) / 4 * 4;
  void *a, *sf, *out;
  check(cudaMalloc(&a, rows * K / 2), "malloc");
  check(cudaMalloc(&sf, sf_rows * sf_cols), "malloc");
  check(cudaMalloc(&out, rows * K * 2), "malloc");
  {
    std::vector<unsigned> codes(rows * K / 8);
    unsigned x = 12345;
    for (auto& c : codes) c = x = x * 1664525u + 1013904223u;
    check(cudaMemcpy(a, codes.data(), codes.size() * 4, cudaMemcpyHostToDevice), "codes");
  }
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
    copy_w<W, PAIRS><<<grid, 256>>>(p);
    cudaEventRecord(e1);
    check(cudaEventSynchronize(e1), "copy");
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (r > 0) t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  const double us = t[t.size() / 2] * 1e3, bytes = rows * K * 0.5 + sf_rows * sf_cols + rows * K * 2.0;
  std::vector<unsigned> got(rows * K / 2);
  check(cudaMemcpy(got.data(), out, got.size() * 4, cudaMemcpyDeviceToHost), "out");
  long long bad = -1;
  if (!PAIRS && W == 2) g_plain = got;
  if (PAIRS && g_plain.size() == got.size()) {  // group g: plain (w0 p0..p3, w1 p0..p3) -> (w0 p0 p1, w1 p0 p1, w0 p2 p3, w1 p2 p3)
    bad = 0;
    const int from[8] = {0, 1, 4, 5, 2, 3, 6, 7};
    for (size_t g = 0; g < got.size() / 8; ++g)
      for (int i = 0; i < 8; ++i) bad += got[8 * g + i] != g_plain[8 * g + from[i]];
  }
  std::printf("%lld x %lld, %d word(s) per thread%s: %.2f us, %.2f TB/s", rows, K, W, PAIRS ? ", PAIRS" : "", us,
              bytes / us * 1e-6);
  if (bad >= 0) std::printf(" (%lld words differ from the plain copy's, reordered)", bad);
  std::printf("\n");
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
      run<2>(R, K, flush);
      run<2, true>(R, K, flush);
      run<4, true>(R, K, flush);
      run<4>(R, K, flush);
    }
  return 0;
}
