// The FP16 copy launch (kernels/quantize/smxx_dequant_fp16.cuh, PAIRS order) at W = 2 (the registry's build), 4, 8
// words per thread, against a write-only and a read-only kernel over the same bytes. (W = 8's ~5% shorter span
// did not show in the op's time: docs/lab/results/2026-12-03_h200_copy_words.md.) Per variant and shape, 11 trials
// after a clean-L2 flush (a 256 MiB memset, then a read sweep over it, so L2 holds clean lines only, as after ncu's
// --cache-control all): the globaltimer span from the first CTA's start to the last CTA's end (no launch overhead;
// median), and the CUDA-event time.
// Every copy's bytes are checked against the W = 2 form's.
// (Measured 2026-12-03, docs/lab/results/2026-12-03_h200_micro_copy_stream.txt: stores with an L2 evict_last policy
// made no difference (commit f66b309; ncu showed the copy's writes staying in L2 anyway, DRAM writes ~0, L2 at 64%
// and DRAM at 13% of peak: latency, not bandwidth), nor did a grid-stride form loading each thread's next chunk
// before storing the current one (commit 4d5e1e4, removed after).)
// Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels bench/micro/copy_words.cu -o t
#include <algorithm>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>
#include "quantize/smxx_dequant_fp16.cuh"
#include "micro_util.hpp"

using namespace svdq_k;

__device__ unsigned g_sink;

template <int W>
__global__ void __launch_bounds__(256) copy_words(const DequantParams p) {
  span_begin();
  smxx_dequant_fp16_words<W, true>(p);
  span_end();
}
// 16 bytes per thread, 2 per thread blockDim apart (the copy's output pattern), no reads.
__global__ void __launch_bounds__(256) write_k(uint4* out, long long n16) {
  span_begin();
  const long long i0 = (long long)blockIdx.x * 512 + threadIdx.x;
  for (int j = 0; j < 2; ++j) {
    const long long i = i0 + j * 256;
    if (i < n16) out[i] = make_uint4((unsigned)i, (unsigned)i, (unsigned)i, (unsigned)i);
  }
  span_end();
}

__global__ void __launch_bounds__(256) read_k(const uint4* in, long long n16) {
  span_begin();
  unsigned acc = 0;
  for (long long i = (long long)blockIdx.x * 256 + threadIdx.x; i < n16; i += (long long)gridDim.x * 256) {
    const uint4 v = in[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) g_sink = acc;
  span_end();
}

static void* g_flush;
static const size_t kFlush = 256u << 20;

static void clean_flush() {
  check(cudaMemset(g_flush, 1, kFlush), "flush memset");
  read_k<<<132 * 8, 256>>>(static_cast<const uint4*>(g_flush), kFlush / 16);
  check(cudaDeviceSynchronize(), "flush sweep");
}

struct Times { double span_us, event_us; };

template <typename Launch>
static Times timed(Launch&& launch) {
  span_reset();
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0);
  launch();
  cudaEventRecord(e1);
  check(cudaEventSynchronize(e1), "timed launch");
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return {span_read_us(), ms * 1e3};
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static void run(long long rows, long long K) {
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
  check(cudaMemset(sf, 0x38, sf_rows * sf_cols), "sf");
  DequantParams p{};
  p.a = static_cast<const u8*>(a);
  p.a_sf = static_cast<const u8*>(sf);
  p.out = static_cast<u16*>(out);
  p.m = rows;
  p.k = K;
  const long long n16 = rows * K / 8;  // 16-byte output words = packed 4-byte words
  const double bytes = rows * K * 0.5 + sf_rows * sf_cols + rows * K * 2.0;
  const unsigned sms = 132;
  struct Variant { const char* name; int kind, w; unsigned grid; };
  const Variant vs[] = {
      {"words W=2", 0, 2, (unsigned)((n16 + 511) / 512)}, {"words W=4", 0, 4, (unsigned)((n16 + 1023) / 1024)},
      {"words W=8", 0, 8, (unsigned)((n16 + 2047) / 2048)},
      {"write only", 2, 2, (unsigned)((n16 + 511) / 512)},           {"read only (codes)", 3, 0, 8 * sms}};
  std::vector<unsigned> ref;
  for (const Variant& v : vs) {
    std::vector<double> span, ev;
    for (int trial = 0; trial < 11; ++trial) {
      clean_flush();
      if (v.kind <= 1) check(cudaMemset(out, 0, rows * K * 2), "clear");
      if (v.kind <= 1) clean_flush();
      Times t{};
      const unsigned g = v.grid;
      switch (v.kind * 10 + v.w) {
        case 2: t = timed([&] { copy_words<2><<<g, 256>>>(p); }); break;
        case 4: t = timed([&] { copy_words<4><<<g, 256>>>(p); }); break;
        case 8: t = timed([&] { copy_words<8><<<g, 256>>>(p); }); break;
        case 22: t = timed([&] { write_k<<<g, 256>>>(static_cast<uint4*>(out), n16); }); break;
        default: t = timed([&] { read_k<<<g, 256>>>(static_cast<const uint4*>(a), rows * K / 32); }); break;
      }
      span.push_back(t.span_us);
      ev.push_back(t.event_us);
    }
    const char* verdict = "";
    if (v.kind <= 1) {
      std::vector<unsigned> got(rows * K / 2);
      check(cudaMemcpy(got.data(), out, got.size() * 4, cudaMemcpyDeviceToHost), "out");
      if (ref.empty()) ref = got;
      verdict = got == ref ? "  bytes = W=2's" : "  BYTES DIFFER from W=2's";
    }
    const double b = v.kind <= 1 ? bytes : v.kind == 2 ? rows * K * 2.0 : rows * K * 0.5;
    std::printf("%lld x %lld  %-22s grid %5u  span %6.2f us (%.2f TB/s)  event %6.2f us%s\n", rows, K, v.name, v.grid,
                median(span), b / median(span) * 1e-6, median(ev), verdict);
  }
  cudaFree(a);
  cudaFree(sf);
  cudaFree(out);
}

int main() {
  check(cudaMalloc(&g_flush, kFlush), "malloc");
  const long long shapes[4][2] = {{3072, 3072}, {4096, 3072}, {3072, 12288}, {12288, 3072}};  // rows, K
  for (const auto& s : shapes) run(s[0], s[1]);
  return 0;
}
