// How fast a few SMs can write B's FP16 copy (the IDLE converter CTAs' question: 12 of 132 SMs convert while the
// others run the GEMM's first round). G CTAs of 384 threads (one per SM) walk items of 32 packed words (128 bytes
// in, 512 bytes of FP16 out, contiguous) grid-stride, W items per warp step, over a 3072 x 3072 B:
//   ldst W    : lane l loads word l of each of its W items (W loads in flight), converts, stores 16 bytes per item
//               (each warp store 512 contiguous bytes: the copy launch's pattern);
//   bulk W    : the same loads and conversion into shared memory (two W x 512-byte buffers per warp), then one
//               cp.async.bulk store of the warp's W x 512 contiguous bytes (the async proxy writes them);
//   write only: the ldst stores of constants, no loads;  read only: the ldst loads, no stores.
// Span: globaltimer from the first CTA's start to the last CTA's end, cold L2 (clean-flushed), median of 7.
// Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels bench/micro/cvt_rate.cu -o t
#include <algorithm>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>
#include "common/smxx_dequant.cuh"
#include "micro_util.hpp"

using namespace svdq_k;

__device__ unsigned g_sink;

// kind: 0 ldst, 1 bulk, 2 write only, 3 read only
template <int W, int KIND>
__global__ void __launch_bounds__(384, 1) cvt(const u32* in, uint4* out, long long items) {
  extern __shared__ __align__(128) unsigned char smem[];
  span_begin();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long nwarps = (long long)gridDim.x * 12, gw = (long long)blockIdx.x * 12 + warp;
  const u32 sc = 0x38003800u;  // FP16 0.5 pairs: any scale, the arithmetic is what counts here
  unsigned acc = 0;
  int buf = 0;
  for (long long i0 = gw * W; i0 < items; i0 += nwarps * W) {
    u32 q[W];
#pragma unroll
    for (int j = 0; j < W; ++j) {
      q[j] = 0u;
      if (KIND != 2 && i0 + j < items) q[j] = __ldg(in + (i0 + j) * 32 + lane);
    }
    if constexpr (KIND == 3) {
#pragma unroll
      for (int j = 0; j < W; ++j) acc ^= q[j];
      continue;
    }
    if constexpr (KIND == 1) {
      const unsigned st = (unsigned)__cvta_generic_to_shared(smem) + (warp * 2 + buf) * W * 512;
      // the buffer's previous bulk store must have read it
      if (lane == 0) asm volatile("cp.async.bulk.wait_group.read 1;\n" ::: "memory");
      __syncwarp();
#pragma unroll
      for (int j = 0; j < W; ++j) {
        u32 o[4];
        dequant8_f16(q[j], sc, o);
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(st + j * 512 + lane * 16), "r"(o[0]), "r"(o[1]),
                     "r"(o[2]), "r"(o[3])
                     : "memory");
      }
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      __syncwarp();
      if (lane == 0) {
        const long long n = (i0 + W <= items ? W : items - i0) * 512;
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\ncp.async.bulk.commit_group;\n" ::"l"(
                         out + i0 * 32),
                     "r"(st), "r"((unsigned)n)
                     : "memory");
      }
      buf ^= 1;
    } else {
#pragma unroll
      for (int j = 0; j < W; ++j) {
        if (i0 + j >= items) continue;
        u32 o[4];
        if (KIND == 2) {
          o[0] = o[1] = o[2] = o[3] = (u32)(i0 + j);
        } else {
          dequant8_f16(q[j], sc, o);
        }
        out[(i0 + j) * 32 + lane] = make_uint4(o[0], o[1], o[2], o[3]);
      }
    }
  }
  if (KIND == 1 && lane == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
  if (acc == 0x9e3779b9u) g_sink = acc;
  span_end();
}

__global__ void sweep(const uint4* in, long long n16) {
  unsigned acc = 0;
  for (long long i = (long long)blockIdx.x * 256 + threadIdx.x; i < n16; i += (long long)gridDim.x * 256) {
    const uint4 v = in[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) g_sink = acc;
}

static void* g_flush;
static const size_t kFlush = 256u << 20;

template <int W, int KIND>
static double span_us(const u32* in, uint4* out, long long items, int ctas) {
  const int smem = KIND == 1 ? 12 * 2 * W * 512 : 0;
  check(cudaFuncSetAttribute(cvt<W, KIND>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem");
  std::vector<double> v;
  for (int t = 0; t < 7; ++t) {
    check(cudaMemset(g_flush, 1, kFlush), "flush");
    sweep<<<132 * 8, 256>>>(static_cast<const uint4*>(g_flush), kFlush / 16);
    span_reset();
    cvt<W, KIND><<<ctas, 384, smem>>>(in, out, items);
    check(cudaDeviceSynchronize(), "cvt");
    v.push_back(span_read_us());
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main() {
  const long long rows = 3072, K = 3072, words = rows * K / 8, items = words / 32;
  u32* in;
  uint4* out;
  check(cudaMalloc(&in, words * 4), "in");
  check(cudaMalloc(&out, words * 16), "out");
  check(cudaMalloc(&g_flush, kFlush), "flush");
  check(cudaMemset(in, 0x5a, words * 4), "in");
  std::printf("3072 x 3072 B: %.1f MB in, %.1f MB out; GB/s out per SM (span us)\n", words * 4e-6, words * 16e-6);
  for (int ctas : {12, 48, 132}) {
    auto show = [&](const char* name, double us) {
      std::printf("  %3d CTAs  %-14s %8.2f us  %7.1f GB/s per SM\n", ctas, name, us, words * 16.0 / (us * 1e3) / ctas);
    };
    show("ldst W=16", span_us<16, 0>(in, out, items, ctas));
    show("ldst W=32", span_us<32, 0>(in, out, items, ctas));
    show("bulk W=8", span_us<8, 1>(in, out, items, ctas));
    show("bulk W=16", span_us<16, 1>(in, out, items, ctas));
    show("write only", span_us<16, 2>(in, out, items, ctas));
    show("read only", span_us<16, 3>(in, out, items, ctas));
  }
  return 0;
}
