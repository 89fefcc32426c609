// mm_nvfp4_svdquant beyond the typical data of the other GEMM tests: E4M3 scales over their whole range (zero,
// subnormals, up to 448), alpha negative, zero and large, and the documented NaN / Inf policy: a NaN scale code gives
// NaN for its output row (A's scale) or column (B's), Inf or NaN in d, l1 or bias propagate as IEEE arithmetic
// does (the FP64 reference's class: NaN, +Inf or -Inf, element by element). Each M runs the build the router picks.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "bench/problem.hpp"
#include "format/nvfp4.hpp"
#include "gpu_test_util.hpp"
#include "reference/reference.hpp"

namespace {

using namespace svdq_test;
namespace ref = svdq::reference;
namespace fmt = svdq::format;
using svdq::bench::Problem;
using svdq::bench::Shape;

// Every finite E4M3 code (0x00 .. 0x7E: zero, the subnormals, up to 448), uniformly.
std::vector<uint8_t> full_range_scales(Rng& rng, int64_t rows, int64_t k) {
  std::vector<uint8_t> lin(static_cast<size_t>(rows * (k / 16)));
  for (auto& c : lin) c = static_cast<uint8_t>(rng.range(0, 0x7E));
  return fmt::swizzle_scales(lin, rows, k / 16);
}

void set_scale(std::vector<uint8_t>& swz, int64_t rows, int64_t k, int64_t r, int64_t c, uint8_t code) {
  std::vector<uint8_t> lin = fmt::unswizzle_scales(swz, rows, k / 16);
  lin[static_cast<size_t>(r * (k / 16) + c)] = code;
  swz = fmt::swizzle_scales(lin, rows, k / 16);
}

// Runs p with a finite poison (so an unwritten output never looks like an expected NaN) and compares every row:
// where the FP64 reference is NaN / +Inf / -Inf the output must be the same class; elsewhere SPEC §1's bar.
void run_and_check(Problem& p, const std::string& what) {
  SCOPED_TRACE(what);
  const Shape& s = p.shape();
  ASSERT_EQ(cudaMemset(p.out().data, 0x7B, static_cast<size_t>(s.m * s.n * 2)), cudaSuccess);
  p.run();
  const std::vector<uint16_t> out = p.download_output();
  std::vector<int64_t> rows(static_cast<size_t>(s.m));
  for (int64_t i = 0; i < s.m; ++i) rows[static_cast<size_t>(i)] = i;
  const std::vector<double> want = ref::mm_rows_f64(p.host(), rows);
  std::vector<uint16_t> got_finite;
  std::vector<double> want_finite;
  int64_t class_mismatch = 0, special = 0;
  for (int64_t m = 0; m < s.m; ++m) {
    bool row_finite = true;
    for (int64_t n = 0; n < s.n; ++n) row_finite &= std::isfinite(want[static_cast<size_t>(m * s.n + n)]);
    for (int64_t n = 0; n < s.n; ++n) {
      const size_t i = static_cast<size_t>(m * s.n + n);
      const double w = want[i];
      const float g = bf16_value(out[i]);
      // BF16 overflow of a finite FP64 value rounds to Inf: the reference's BF16 class is what the output must be.
      const float wb = bf16_value(fmt::bf16_encode_f64(w));
      if (!std::isfinite(wb)) {
        ++special;
        const bool same = std::isnan(wb) ? std::isnan(g) : (g == wb);
        if (!same && class_mismatch++ < 5)
          ADD_FAILURE() << "out[" << m << ", " << n << "] = " << g << ", expected " << wb << " (FP64 " << w << ")";
      } else if (row_finite) {
        got_finite.push_back(out[i]);
        want_finite.push_back(w);
      } else if (!(std::fabs(double(g) - w) <= ref::bf16_ulp(w) * 2 + std::fabs(w) * 1e-2)) {
        // A row holding an Inf / NaN elsewhere has no finite row max for the bound: a loose check of its finite
        // elements (they must still be written and close).
        if (class_mismatch++ < 5) ADD_FAILURE() << "out[" << m << ", " << n << "] = " << g << ", FP64 " << w;
      }
    }
  }
  EXPECT_EQ(class_mismatch, 0) << special << " non-finite expected outputs";
  if (!want_finite.empty()) {
    const ref::Comparison c = ref::compare(got_finite, want_finite, s.n);
    EXPECT_EQ(c.nan_or_unwritten, 0);
    EXPECT_GE(c.share_within_1ulp(), 0.9999) << "max ulp " << c.max_ulp;
    EXPECT_EQ(c.out_of_bound, 0) << "worst |err| / bound " << c.worst_bound_ratio;
  }
}

// M is the parameter; each test starts a random problem of M x 256 x 3072, rank 32, with its own seed.
class GpuMmSpecial : public ::testing::TestWithParam<int64_t> {
 protected:
  static constexpr int64_t N = 256, K = 3072, R = 32;
  int64_t M = 0;
  uint64_t seed = 0;
  std::unique_ptr<Problem> p;
  std::unique_ptr<::testing::ScopedTrace> trace;
  void start(uint64_t salt) {
    M = GetParam();
    seed = test_seed(salt + static_cast<uint64_t>(M));
    trace = std::make_unique<::testing::ScopedTrace>(__FILE__, __LINE__, "M " + std::to_string(M) + ", " + seed_trace(seed));
    p = std::make_unique<Problem>(make_shape(M, N, K, R, true), seed);
  }
};

TEST_P(GpuMmSpecial, WholeScaleRangeAndAlphaSigns) {
  SVDQ_REQUIRE_GPU();
  start(8100);
  Problem& p = *this->p;
  Rng rng(seed);
  for (float alpha : {-1.75f, 0.0f, 1.0e20f}) {
    ref::MmProblem h = p.host();
    h.a_sf = full_range_scales(rng, M, K);
    h.b_sf = full_range_scales(rng, N, K);
    h.alpha = alpha;
    p.replace_host(h);
    run_and_check(p, "alpha " + std::to_string(alpha));
  }
}

TEST_P(GpuMmSpecial, NaNScaleCodesPoisonTheirRowOrColumn) {
  SVDQ_REQUIRE_GPU();
  start(8200);
  Problem& p = *this->p;
  ref::MmProblem h = p.host();
  const int64_t row = M / 2, col = 77;
  set_scale(h.a_sf, M, K, row, K / 16 - 1, 0x7F);  // +NaN code in A's last block of that row
  set_scale(h.b_sf, N, K, col, 3, 0xFF);           // -NaN code in one of B's blocks
  p.replace_host(h);
  run_and_check(p, "NaN scales");
  const std::vector<uint16_t> out = p.download_output();
  for (int64_t n = 0; n < N; ++n) EXPECT_TRUE(std::isnan(bf16_value(out[static_cast<size_t>(row * N + n)]))) << "row " << row;
  for (int64_t m = 0; m < M; ++m) EXPECT_TRUE(std::isnan(bf16_value(out[static_cast<size_t>(m * N + col)]))) << "column " << col;
}

TEST_P(GpuMmSpecial, InfAndNaNInTheRankTermAndBias) {
  SVDQ_REQUIRE_GPU();
  start(8300);
  Problem& p = *this->p;
  ref::MmProblem h = p.host();
  const uint16_t pinf = 0x7F80, ninf = 0xFF80, qnan = 0x7FC0;
  h.d[static_cast<size_t>((M - 1) * R + 5)] = pinf;  // last row: +Inf times l1[:, 5], signed per column
  h.l1[static_cast<size_t>(31 * R + 17)] = qnan;     // column 31: NaN
  h.bias[200] = ninf;                                // column 200: -Inf, unless the row above makes it NaN
  h.bias[13] = pinf;
  p.replace_host(h);
  run_and_check(p, "Inf / NaN in d, l1, bias");
}

INSTANTIATE_TEST_SUITE_P(M, GpuMmSpecial, ::testing::Values(1, 16, 129, 1000, 4096),
                         [](const ::testing::TestParamInfo<int64_t>& i) { return "m" + std::to_string(i.param); });

}  // namespace
