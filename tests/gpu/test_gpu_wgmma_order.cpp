// The fact the sm_90a programs' bitwise agreement rests on: the result of one wgmma k16 step (FP16 inputs, FP32
// accumulators) does not depend on which of its 16 K positions holds which product. The PAIRS builds place the K
// elements of a step in another order than the other programs; they are bitwise equal to them only if the tensor
// core sums the 16 products and the accumulator order-independently.
//
// Each CTA is one warpgroup and one trial: random A [64 x 16], B [128 x 16] (FP16 with a wide exponent spread, so any
// alignment or truncation inside the sum would show) and a random (or zero) FP32 accumulator; the K positions of A
// and B are permuted by the same permutation (the same set of products), one SS wgmma.m64n128k16 runs, and the 8192
// FP32 results are compared bit for bit with the identity order's. The kernel is compiled by NVRTC for sm_90a with
// the program headers (as the builds are), so this test needs no nvcc.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_util.hpp"
#include "jit/driver.hpp"
#include "jit/kernel_cache.hpp"
#include "jit/nvrtc_compiler.hpp"

namespace {

constexpr int kRowsA = 64, kRowsB = 128, kK = 16, kOut = kRowsA * kRowsB;

const char* kSource = R"src(
#include "common/sm80_ptx.cuh"
#include "common/sm90_wgmma.cuh"
using namespace svdq_k;
// a: [trials][64][16] FP16 bits, b: [trials][128][16], c / out: [trials][64][128] FP32, row-major.
extern "C" __global__ void __launch_bounds__(128) k16_order(const u16* a, const u16* b, const float* c, float* out,
                                                             int zero_acc) {
  __shared__ __align__(1024) u8 smem[(128 + 64) * 128];
  const int trial = blockIdx.x, t = threadIdx.x;
  const u16* at = a + (i64)trial * 64 * 16;
  const u16* bt = b + (i64)trial * 128 * 16;
  // K-major rows of 128 bytes in the 128-byte swizzle; only K 0..15 (16-byte chunks 0 and 1) are used.
  for (int i = t; i < (128 + 64) * 64; i += blockDim.x) reinterpret_cast<u16*>(smem)[i] = 0;
  __syncthreads();
  for (int i = t; i < 128 * 16; i += blockDim.x) {
    const int r = i / 16, k = i % 16, chunk = (k / 8) ^ (r & 7);
    reinterpret_cast<u16*>(smem + r * 128 + chunk * 16)[k % 8] = bt[i];
  }
  for (int i = t; i < 64 * 16; i += blockDim.x) {
    const int r = i / 16, k = i % 16, chunk = (k / 8) ^ (r & 7);
    reinterpret_cast<u16*>(smem + 128 * 128 + r * 128 + chunk * 16)[k % 8] = at[i];
  }
  fence_proxy_async_shared();
  __syncthreads();
  const u32 base = smem_addr(smem);
  const int warp = t >> 5, lane = t & 31;
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) {  // m64nN accumulators: row 16 warp + lane / 4 (+8), column 8 j + 2 (lane % 4) (+1)
    const int row = 16 * warp + lane / 4 + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
    acc[i] = zero_acc ? 0.0f : c[(i64)trial * 8192 + row * 128 + col];
  }
  wgmma_fence();
  wgmma_m64n128k16_f16(acc, wgmma_desc_sw128(base + 128 * 128), wgmma_desc_sw128(base));
  wgmma_commit();
  wgmma_wait_all(acc);
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const int row = 16 * warp + lane / 4 + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
    out[(i64)trial * 8192 + row * 128 + col] = acc[i];
  }
}
)src";

// FP16 bits of +-(1 + j / 2^mant_bits) x 2^e, e in [-12, 8]: normal, exact.
uint16_t random_half(std::mt19937& rng, int mant_bits) {
  const uint32_t e = rng() % 21u, sign = rng() & 1u, j = rng() % (1u << mant_bits);
  return static_cast<uint16_t>((sign << 15) | ((e - 12 + 15) << 10) | (j << (10 - mant_bits)));
}

TEST(GpuWgmma, K16StepResultDoesNotDependOnThePositionsOfItsProducts) {
  SVDQ_REQUIRE_GPU();
  const svdq::DeviceInfo info = svdq::current_device_info();
  if (info.cc_major * 10 + info.cc_minor != 90) GTEST_SKIP() << "wgmma needs compute capability 9.0";
  const auto compiled = svdq::jit::compile_unit("k16_order_test", kSource, "sm_90a");
  const svdq::jit::DeviceTarget& dev = svdq::jit::current_device();
  const svdq::jit::LoadedKernel kernel =
      svdq::jit::load_kernel(compiled.image, "k16_order", "k16_order_test", "sm_90a", dev.ordinal, 0);

  const int trials = 512;
  std::mt19937 rng(static_cast<uint32_t>(svdq_test::test_seed(2101)));
  std::vector<uint16_t> a(size_t(trials) * kRowsA * kK), b(size_t(trials) * kRowsB * kK);
  for (auto& x : a) x = random_half(rng, 4);   // A: the few mantissa bits of e2m1 x e4m3
  for (auto& x : b) x = random_half(rng, 10);  // B: any FP16
  std::vector<float> c(size_t(trials) * kOut);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& x : c) x = std::ldexp(u(rng), static_cast<int>(rng() % 21u) - 4);
  const svdq::bench::DeviceBuffer dc = svdq_test::upload(c);
  svdq::bench::DeviceBuffer dout(static_cast<int64_t>(c.size() * 4));

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
      {"(0,4,1,5,2,6,3,7) in each half", {0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15}},
  };
  for (int zero_acc = 0; zero_acc < 2; ++zero_acc) {
    std::vector<float> ref;
    for (const auto& [name, p] : perms) {
      SCOPED_TRACE(std::string(name) + (zero_acc ? ", zero accumulator" : ", random accumulator"));
      std::vector<uint16_t> pa(a.size()), pb(b.size());
      for (size_t r = 0; r < a.size() / kK; ++r)
        for (int k = 0; k < kK; ++k) pa[r * kK + k] = a[r * kK + p[k]];
      for (size_t r = 0; r < b.size() / kK; ++r)
        for (int k = 0; k < kK; ++k) pb[r * kK + k] = b[r * kK + p[k]];
      const svdq::bench::DeviceBuffer da = svdq_test::upload(pa), db = svdq_test::upload(pb);
      void* pda = da.get();
      void* pdb = db.get();
      void* pdc = dc.get();
      void* pdo = dout.get();
      int z = zero_acc;
      void* params[] = {&pda, &pdb, &pdc, &pdo, &z};
      svdq::jit::launch(kernel, trials, 1, 1, 128, 0, nullptr, params);
      const std::vector<float> out = svdq_test::download<float>(dout, static_cast<int64_t>(c.size()));
      if (ref.empty()) {
        ref = out;
        int64_t nonzero = 0;
        for (float v : out) nonzero += v != 0.0f;
        EXPECT_GT(nonzero, static_cast<int64_t>(out.size()) / 2);  // the products are there to be summed
        continue;
      }
      int64_t diff = 0;
      for (size_t i = 0; i < out.size(); ++i) diff += std::memcmp(&out[i], &ref[i], 4) != 0;
      EXPECT_EQ(diff, 0) << "outputs whose bits differ from the identity order's, of " << out.size();
    }
  }
}

}  // namespace
