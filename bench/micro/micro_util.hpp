// Host helpers the bench/micro programs share: a CUDA error check, and 2-D TMA tensor maps through the driver's
// cuTensorMapEncodeTiled (resolved through the runtime, so the programs link no driver library).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>

static void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// A 2-D map over a row-major [rows, cols] tensor of `esize`-byte elements, box inner x box_rows.
static CUtensorMap make_map(void* ptr, CUtensorMapDataType dt, int esize, long long rows, long long cols, int inner,
                            int box_rows, CUtensorMapSwizzle sw, CUtensorMapL2promotion promo) {
  using EncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static const EncodeFn encode = [] {
    cudaDriverEntryPointQueryResult q;
    void* p = nullptr;
    check(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q), "entry point");
    return reinterpret_cast<EncodeFn>(p);
  }();
  CUtensorMap m;
  const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
  const cuuint64_t strides[1] = {(cuuint64_t)(cols * esize)};
  const cuuint32_t box[2] = {(cuuint32_t)inner, (cuuint32_t)box_rows};
  const cuuint32_t es[2] = {1, 1};
  const CUresult r = encode(&m, dt, 2, ptr, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, sw, promo,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed (%d)\n", (int)r);
    std::exit(1);
  }
  return m;
}

// As jit::encode_tma_2d, into a program's TmaDesc (the kernels' headers define it): [rows, cols] of 1- or 2-byte
// elements, box box_cols x box_rows, the 32- or 128-byte swizzle.
template <typename Desc>
static void map2d(Desc* out, void* base, int esize, long long cols, long long rows, int box_cols, int box_rows,
                  int swizzle) {
  const CUtensorMap m = make_map(base, esize == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                                 esize, rows, cols, box_cols, box_rows,
                                 swizzle == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_32B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  static_assert(sizeof(CUtensorMap) == sizeof(Desc), "a tensor map is 128 bytes");
  std::memcpy(out, &m, sizeof(m));
}

// Three launches of `launch` (a warm-up, then cold-L2 ones: 256 MiB of `flush` rewritten before each), `before_last`
// called before the last (the trace micros clear their event buffer there); returns the last launch's CUDA-event
// time in ms (launch overhead included).
template <typename Launch, typename BeforeLast>
static float cold_launches(void* flush, const char* label, Launch&& launch, BeforeLast&& before_last) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  float ms = 0;
  for (int rep = 0; rep < 3; ++rep) {
    cudaMemset(flush, rep, 256u << 20);
    if (rep == 2) before_last();
    cudaEventRecord(e0);
    launch();
    cudaEventRecord(e1);
    check(cudaEventSynchronize(e1), label);
    cudaEventElapsedTime(&ms, e0, e1);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms;
}

// Means of y - x over the tiles where both events were recorded (a trace slot left 0 was not).
struct GapMeans {
  double sum[10] = {0};
  int cnt[10] = {0};
  void add(int i, long long x, long long y) {
    if (x != 0 && y != 0) {
      sum[i] += (double)(y - x);
      ++cnt[i];
    }
  }
  double mean(int i) const { return cnt[i] ? sum[i] / cnt[i] : 0.0; }
};

// One row of a raw timeline: events first..last of a tile as cycles from t0 ("-" where not recorded).
template <typename At>
static void print_events(At&& at, int it, int first, int last, long long t0) {
  for (int e = first; e <= last; ++e) {
    if (at(e, it) != 0) std::printf(" %7lld", at(e, it) - t0);
    else std::printf("       -");
  }
}

// The globaltimer span of a launch: from the first CTA's start (span_begin, thread 0 of each CTA) to the last CTA's
// end (span_end); span_reset before the launch, span_read_us after it.
__device__ unsigned long long g_span_t0, g_span_t1;
__device__ __forceinline__ unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void span_begin() {
  if (threadIdx.x == 0) atomicMin(&g_span_t0, globaltimer_ns());
}
__device__ __forceinline__ void span_end() {
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(&g_span_t1, globaltimer_ns());
}
static void span_reset() {
  const unsigned long long hi = ~0ull, lo = 0;
  check(cudaMemcpyToSymbol(g_span_t0, &hi, 8), "span reset");
  check(cudaMemcpyToSymbol(g_span_t1, &lo, 8), "span reset");
}
static double span_read_us() {
  unsigned long long t0 = 0, t1 = 0;
  check(cudaMemcpyFromSymbol(&t0, g_span_t0, 8), "span read");
  check(cudaMemcpyFromSymbol(&t1, g_span_t1, 8), "span read");
  return (t1 - t0) * 1e-3;
}
