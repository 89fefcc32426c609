// Microbenchmark: how fast can TMA fill one SM's mbarrier ring with the operand tiles of svdq's sm_90a programs,
// with nothing else running (a consumer warp releases each slot as soon as it is full)? Cold L2 before every timed
// launch (a 256 MB write), CTAs laid out like the programs' grids (blockIdx.x: output-column tile, blockIdx.y:
// row tile), so the L2 sharing pattern is theirs. Prints cycles per ring slot (clock64, per CTA: mean and
// slowest) and the kernel time (events).
//
// Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels bench/micro/tma_ingest.cu -o tma_ingest
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <vector>
#include <cuda.h>
#include <cuda_runtime.h>
#include "common/sm90_async.cuh"
#include "micro_util.hpp"

using namespace svdq_k;

struct Stage {
  int boxes0;      // boxes of map0 per slot (consecutive along K)
  int box0_bytes;  // bytes of one map0 box
  int use1;        // one map1 box per slot
  int box1_bytes;
  int bulk;        // bytes of a 1-D bulk copy per slot (0: none)
  int inner0;      // map0 box inner extent (elements), the K step between its boxes
  int inner1;      // map1 box inner extent (elements) = K step per slot along map1
  int rows0, rows1;
  int slot_bytes;
  int hop1;        // map1 rows added per slot, modulo 8 slots (0: every slot reads the same rows, as the programs)
};

__device__ __forceinline__ void wait_bar(u32 bar, u32 parity, int poll) {
  if (poll) {
    while (!mbar_test_wait(bar, parity)) {
    }
  } else {
    mbar_wait(bar, parity);
  }
}

// `pairs` producer/consumer warp pairs (warps 2w, 2w + 1), each with its own ring of `stages` slots and its own
// share of the K slots (slot it goes to pair it % pairs).
__global__ void ingest(const __grid_constant__ CUtensorMap map0, const __grid_constant__ CUtensorMap map1,
                       const unsigned char* bulk_src, Stage st, int slots_total, int stages, long long* cycles, int poll,
                       int pairs) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const u32 base = ((u32)__cvta_generic_to_shared(smem) + 1023u) & ~1023u;
  const u32 bars = base + pairs * stages * st.slot_bytes;
  if (threadIdx.x == 0) {
    for (int s = 0; s < 2 * stages * pairs; ++s) mbar_init(bars + 8 * s, 1);
    mbar_init_fence();
  }
  __syncthreads();
  const long long t0 = clock64();
  const TmaDesc* m0 = reinterpret_cast<const TmaDesc*>(&map0);
  const TmaDesc* m1 = reinterpret_cast<const TmaDesc*>(&map1);
  const int warp = threadIdx.x / 32, pair = warp / 2;
  const u32 ring = base + pair * stages * st.slot_bytes;
  const u32 full = bars + 16 * stages * pair, empty = full + 8 * stages;
  const int mine = (slots_total - pair + pairs - 1) / pairs;  // slots pair, pair + pairs, ...
  if (pair < pairs && (threadIdx.x & 63) == 0) {
    const int c1_0 = blockIdx.y * st.rows0, c1_1 = blockIdx.x * st.rows1;
    const u32 bytes = st.boxes0 * st.box0_bytes + (st.use1 ? st.box1_bytes : 0) + st.bulk;
    for (int j = 0; j < mine; ++j) {
      const int it = pair + j * pairs, s = j % stages;
      const u32 slot = ring + s * st.slot_bytes, bar = full + 8 * s;
      wait_bar(empty + 8 * s, ((j / stages) & 1) ^ 1, poll);
      mbar_arrive_expect_tx(bar, bytes);
      for (int b = 0; b < st.boxes0; ++b)
        tma_load_2d(slot + b * st.box0_bytes, m0, (it * st.boxes0 + b) * st.inner0, c1_0, bar);
      u32 off = st.boxes0 * st.box0_bytes;
      if (st.use1) {
        tma_load_2d(slot + off, m1, it * st.inner1, c1_1 + (it % 8) * st.hop1, bar);
        off += st.box1_bytes;
      }
      if (st.bulk) bulk_load(slot + off, bulk_src + ((long long)blockIdx.x * slots_total + it) * st.bulk, st.bulk, bar);
    }
  } else if (pair < pairs && (threadIdx.x & 63) == 32) {
    for (int j = 0; j < mine; ++j) {
      const int s = j % stages;
      wait_bar(full + 8 * s, (j / stages) & 1, poll);
      mbar_arrive(empty + 8 * s);
    }
  }
  __syncthreads();
  const long long t1 = clock64();
  if (threadIdx.x == 0) cycles[blockIdx.y * gridDim.x + blockIdx.x] = t1 - t0;
}

static CUtensorMapSwizzle swz(int inner_bytes) {
  return inner_bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
         : inner_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                             : CU_TENSOR_MAP_SWIZZLE_128B;
}

struct Bufs {
  unsigned char *a16, *a4, *b4, *b16, *bulk, *flush;
  long long* cyc;
};

// One configuration: the "A" operand (map0) is either FP16 [M, K] (a16) or packed [M, K/2]; the "B" operand (map1)
// packed [N, K/2] or FP16 [N, K]. kt: K elements per slot.
static void run(const char* label, const Bufs& b, long long M, long long N, long long K, int kt, bool a_fp16,
                int rows0, bool b_fp16, int rows1, bool use_b, bool bulk, int stages, int gx, int gy,
                CUtensorMapL2promotion promo1 = CU_TENSOR_MAP_L2_PROMOTION_L2_128B, int hop1 = 0, bool flush = true, int poll = 0, int pairs = 1) {
  Stage st{};
  st.hop1 = hop1;
  CUtensorMap m0, m1;
  if (a_fp16) {  // FP16 boxes of 64 elements (128 B, 128-byte swizzle), kt / 64 per slot
    st.inner0 = 64;
    st.boxes0 = kt / 64;
    st.box0_bytes = rows0 * 128;
    m0 = make_map(b.a16, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, M, K, 64, rows0, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  } else {  // packed: one box of kt / 2 bytes
    st.inner0 = kt / 2;
    st.boxes0 = 1;
    st.box0_bytes = rows0 * kt / 2;
    m0 = make_map(b.a4, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, M, K / 2, kt / 2, rows0, swz(kt / 2),
                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  }
  st.rows0 = rows0;
  st.rows1 = rows1;
  st.use1 = use_b;
  if (b_fp16) {  // FP16 B: one box of 64 elements x rows1 per slot (kt = 64)
    st.inner1 = 64;
    st.box1_bytes = rows1 * 128;
    m1 = make_map(b.b16, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, N, K, 64, rows1, CU_TENSOR_MAP_SWIZZLE_128B, promo1);
  } else {
    st.inner1 = kt / 2;
    st.box1_bytes = rows1 * kt / 2;
    m1 = make_map(b.b4, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, N, K / 2, kt / 2, rows1, swz(kt / 2), promo1);
  }
  st.bulk = bulk ? 512 * (kt / 64) : 0;
  const int raw = st.boxes0 * st.box0_bytes + (use_b ? st.box1_bytes : 0) + st.bulk;
  st.slot_bytes = (raw + 1023) / 1024 * 1024;
  const int slots = (int)(K / kt);
  const int smem = pairs * stages * st.slot_bytes + 16 * stages * pairs + 1024;
  check(cudaFuncSetAttribute(ingest, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem attribute");
  std::vector<float> times;
  std::vector<double> per_slot, worst;
  for (int rep = 0; rep < 6; ++rep) {
    if (flush) check(cudaMemset(b.flush, rep, 256ull << 20), "flush");
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaEventRecord(e0);
    ingest<<<dim3(gx, gy), 64 * pairs, smem>>>(m0, m1, b.bulk, st, slots, stages, b.cyc, poll, pairs);
    cudaEventRecord(e1);
    check(cudaDeviceSynchronize(), label);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    std::vector<long long> h(gx * gy);
    check(cudaMemcpy(h.data(), b.cyc, h.size() * 8, cudaMemcpyDeviceToHost), "copy");
    double mean = 0;
    long long mx = 0;
    for (long long v : h) {
      mean += (double)v / h.size();
      mx = std::max(mx, v);
    }
    if (rep == 0) continue;  // warm-up
    times.push_back(ms * 1000.0f);
    per_slot.push_back(mean / slots);
    worst.push_back((double)mx / slots);
  }
  std::sort(times.begin(), times.end());
  std::sort(per_slot.begin(), per_slot.end());
  std::sort(worst.begin(), worst.end());
  const size_t mid = times.size() / 2;
  std::printf("%-40s slot %6d B x %2d stages, %2d slots, grid %3dx%-3d: %7.1f cyc/slot (slowest %7.1f) "
              "%6.1f B/cyc/SM, kernel %7.2f us\n",
              label, raw, stages, slots, gx, gy, per_slot[mid], worst[mid], raw / per_slot[mid], times[mid]);
}

int main() {
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  Bufs b{};
  const long long K = 12288, Nmax = 12288, Mmax = 16384;
  check(cudaMalloc(&b.a16, 144 * K * 2), "malloc");
  check(cudaMalloc(&b.a4, Mmax * K / 2), "malloc");
  check(cudaMalloc(&b.b4, Nmax * K / 2), "malloc");
  check(cudaMalloc(&b.b16, 3072 * K * 2), "malloc");
  check(cudaMalloc(&b.bulk, 512ull * 256 * 192 * 4), "malloc");
  check(cudaMalloc(&b.flush, 256ull << 20), "malloc");
  check(cudaMalloc(&b.cyc, 8 * 4096), "malloc");
  cudaMemset(b.a16, 0, 144 * K * 2);
  cudaMemset(b.a4, 0, Mmax * K / 2);
  cudaMemset(b.b4, 0, Nmax * K / 2);
  cudaMemset(b.b16, 0, 3072 * K * 2);
  cudaMemset(b.bulk, 0, 512ull * 256 * 192 * 4);
  const auto P256 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B, PNONE = CU_TENSOR_MAP_L2_PROMOTION_NONE;
  // Small M (129 x 3072 x K): 48 column tiles x 2 row tiles of 72, A FP16 72 x 64, packed B 64 x 32 B + 512 B scales.
  for (long long k : {3072LL, 12288LL}) {
    std::printf("-- small M, K = %lld\n", k);
    run("swap-A16 slot (A16 + B4 + sf)", b, 129, 3072, k, 64, true, 72, false, 64, true, true, 8, 48, 2);
    run("  4 stages", b, 129, 3072, k, 64, true, 72, false, 64, true, true, 4, 48, 2);
    run("  16 stages", b, 129, 3072, k, 64, true, 72, false, 64, true, true, 16, 48, 2);
    run("  B L2 promotion 256B", b, 129, 3072, k, 64, true, 72, false, 64, true, true, 8, 48, 2, P256);
    run("  B L2 promotion none", b, 129, 3072, k, 64, true, 72, false, 64, true, true, 8, 48, 2, PNONE);
    run("  A16 only", b, 129, 3072, k, 64, true, 72, false, 64, false, false, 8, 48, 2);
    run("  B4 + sf only (A packed 8 rows)", b, 129, 3072, k, 64, false, 8, false, 64, true, true, 8, 48, 2);
    run("  A packed (A4 + B4 + sf)", b, 129, 3072, k, 64, false, 72, false, 64, true, true, 8, 48, 2);
    run("  kt 128: A16 2 boxes + B4 64 B + sf", b, 129, 3072, k, 128, true, 72, false, 64, true, true, 6, 48, 2);
    run("  kt 128, A packed", b, 129, 3072, k, 128, false, 72, false, 64, true, true, 8, 48, 2);
    run("  one CTA", b, 129, 3072, k, 64, true, 72, false, 64, true, true, 8, 1, 1);
  }
  // What limits one CTA's ring: bytes, slots, or the lines the slots share?
  std::printf("-- one CTA, K = 12288, B4 + sf (A packed 8 rows)\n");
  for (int stg : {1, 2, 4, 8})
    run("  stages", b, 129, 3072, 12288, 64, false, 8, false, 64, true, true, stg, 1, 1);
  run("  no bulk (sf)", b, 129, 3072, 12288, 64, false, 8, false, 64, true, false, 8, 1, 1);
  run("  warm L2 (no flush)", b, 129, 3072, 12288, 64, false, 8, false, 64, true, true, 8, 1, 1,
      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, 0, false);
  run("  slots hop 64 rows (no shared lines)", b, 129, 3072, 12288, 64, false, 8, false, 64, true, true, 8, 1, 1,
      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, 64);
  run("  kt 128 (64 B rows)", b, 129, 3072, 12288, 128, false, 8, false, 64, true, true, 8, 1, 1);
  run("  kt 256 (128 B rows)", b, 129, 3072, 12288, 256, false, 8, false, 64, true, true, 8, 1, 1);
  run("  kt 256, 128 rows", b, 129, 3072, 12288, 256, false, 8, false, 128, true, true, 8, 1, 1);
  run("  A16 72 rows only, 1 CTA", b, 129, 3072, 12288, 64, true, 72, false, 64, false, false, 8, 1, 1);
  run("  A16 only, warm", b, 129, 3072, 12288, 64, true, 72, false, 64, false, false, 8, 1, 1,
      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, 0, false);
  run("  swap slot, warm", b, 129, 3072, 12288, 64, true, 72, false, 64, true, true, 8, 1, 1,
      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, 0, false);
  const auto P128 = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  run("  8 stages, test_wait polling", b, 129, 3072, 12288, 64, false, 8, false, 64, true, true, 8, 1, 1, P128, 0,
      true, 1);
  run("  K 3072: 48 stages (no reuse)", b, 129, 3072, 3072, 64, false, 8, false, 64, true, true, 48, 1, 1);
  run("  K 3072: 48 stages, polling", b, 129, 3072, 3072, 64, false, 8, false, 64, true, true, 48, 1, 1, P128, 0,
      true, 1);
  run("  swap slot, polling", b, 129, 3072, 12288, 64, true, 72, false, 64, true, true, 8, 1, 1, P128, 0, true, 1);
  run("  swap slot, grid 48x2, polling", b, 129, 3072, 12288, 64, true, 72, false, 64, true, true, 8, 48, 2, P128, 0,
      true, 1);
  for (int pr : {2, 4})
    run("  swap slot, producer pairs", b, 129, 3072, 12288, 64, true, 72, false, 64, true, true, 4, 1, 1, P128, 0,
        true, 0, pr);
  run("  swap slot, 8 pairs of 2 stages", b, 129, 3072, 12288, 64, true, 72, false, 64, true, true, 2, 1, 1, P128, 0,
      true, 0, 8);
  run("  swap slot, 4 pairs of 2 stages", b, 129, 3072, 12288, 64, true, 72, false, 64, true, true, 2, 1, 1, P128, 0,
      true, 0, 4);
  run("  A16 only, 4 pairs, grid 48x2", b, 129, 3072, 12288, 64, true, 72, false, 64, false, false, 4, 48, 2, P128, 0,
      true, 0, 4);
  run("  B4 + sf, 4 pairs, grid 48x2", b, 129, 3072, 12288, 64, false, 8, false, 64, true, true, 4, 48, 2, P128, 0,
      true, 0, 4);
  run("  swap slot, 4 pairs of 2, grid 48x2", b, 129, 3072, 12288, 64, true, 72, false, 64, true, true, 2, 48, 2, P128,
      0, true, 0, 4);
  run("  B4 + sf, 4 producer pairs", b, 129, 3072, 12288, 64, false, 8, false, 64, true, true, 4, 1, 1, P128, 0, true,
      0, 4);
  run("  swap slot, 4 pairs, grid 48x2", b, 129, 3072, 12288, 64, true, 72, false, 64, true, true, 4, 48, 2, P128, 0,
      true, 0, 4);
  run("  swap slot, 2 CTAs/SM (grid 264)", b, 129, 3072, 12288, 64, true, 72, false, 64, true, true, 4, 132, 2);
  std::printf("-- small M grid 48x2, K = 12288, wider slots\n");
  run("  kt 256: A4 + B4 128 B rows + sf", b, 129, 3072, 12288, 256, false, 72, false, 64, true, true, 8, 48, 2);
  run("  kt 128: A16 + B4 + sf, warm", b, 129, 3072, 12288, 128, true, 72, false, 64, true, true, 6, 48, 2,
      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, 0, false);
  // Large M (4096 x 3072 x K): 12 x 32 CTAs, packed A 128 x 32 B + 512 B scales, FP16 B 256 x 64 (32 KB).
  for (long long k : {3072LL, 12288LL}) {
    std::printf("-- large M, K = %lld (tensor-core time per K tile of 64 for 128 x 256: 1024 cycles)\n", k);
    run("ws16 slot (A4 + sf + B16)", b, 4096, 3072, k, 64, false, 128, true, 256, true, true, 5, 12, 32);
    run("  B16 L2 promotion 256B", b, 4096, 3072, k, 64, false, 128, true, 256, true, true, 5, 12, 32, P256);
    run("  B16 only (A packed 8 rows)", b, 4096, 3072, k, 64, false, 8, true, 256, true, false, 5, 12, 32);
    run("  256 x 128 tile: A4 256 rows + B16 128", b, 4096, 3072, k, 64, false, 256, true, 128, true, true, 8, 24, 16);
    run("  both packed 128 x 256 (A4 + B4 + sf)", b, 4096, 3072, k, 64, false, 128, false, 256, true, true, 8, 12, 32);
  }
  return 0;
}
