// The CPU reference of mm_nvfp4_svdquant (reference::mm_rows_f64) on tiny problems whose answers are known in
// closed form, row selection, and reference::compare / bf16_ulp_distance on synthetic inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "../model.hpp"
#include "../test_util.hpp"
#include "format/nvfp4.hpp"
#include "reference/reference.hpp"

namespace {

using namespace svdq_test;
namespace fmt = svdq::format;
namespace ref = svdq::reference;

void set_code(std::vector<uint8_t>& packed, int64_t row, int64_t k, int64_t e, uint8_t code) {
  uint8_t& byte = packed[static_cast<size_t>(row * (k / 2) + e / 2)];
  if (e % 2 == 0)
    byte = static_cast<uint8_t>((byte & 0xF0) | code);
  else
    byte = static_cast<uint8_t>((byte & 0x0F) | (code << 4));
}

// The closed-form problem (N = 32, K = 32, rank 16):
//   a[m, m] = 1.0 with block-0 scale 2^m; a[m, 16 + m] = 2.0 with block-1 scale 0.5; every other a code 0.
//   b[n, k] = E2M1 code (n + k) % 16; block-0 scale 1, block-1 scale 2.
//   => Σ_k deq(a)·deq(b) = 2^m·E((n+m)%16) + 2·E((n+16+m)%16) = (2^m + 2)·E((n+m)%16).
//   d[m, 0] = m + 1, d[m, 1] = -0.5; l1[n, 0] = n, l1[n, 1] = 4  => Σ_j d·l1 = (m+1)·n - 2.
//   alpha = 0.5; bias[n] = n / 4.
ref::MmProblem closed_form_problem(int64_t m, bool bias) {
  ref::MmProblem p;
  p.m = m;
  p.n = 32;
  p.k = 32;
  p.rank = 16;
  p.has_bias = bias;
  p.a.assign(m * 16, 0);
  p.b.assign(32 * 16, 0);
  std::vector<uint8_t> a_sf(m * 2), b_sf(32 * 2);
  for (int64_t r = 0; r < m; ++r) {
    set_code(p.a, r, 32, r, 0x2);       // 1.0
    set_code(p.a, r, 32, 16 + r, 0x4);  // 2.0
    a_sf[r * 2 + 0] = static_cast<uint8_t>(0x38 + 8 * r);  // 2^r
    a_sf[r * 2 + 1] = 0x30;                                // 0.5
  }
  for (int64_t n = 0; n < 32; ++n) {
    for (int64_t e = 0; e < 32; ++e) set_code(p.b, n, 32, e, static_cast<uint8_t>((n + e) % 16));
    b_sf[n * 2 + 0] = 0x38;  // 1
    b_sf[n * 2 + 1] = 0x40;  // 2
  }
  p.a_sf = fmt::swizzle_scales(a_sf, m, 2);
  p.b_sf = fmt::swizzle_scales(b_sf, 32, 2);
  p.alpha = 0.5f;
  p.d.assign(m * 16, 0);
  p.l1.assign(32 * 16, 0);
  for (int64_t r = 0; r < m; ++r) {
    p.d[r * 16 + 0] = bf16_exact(static_cast<float>(r + 1));
    p.d[r * 16 + 1] = bf16_exact(-0.5f);
  }
  for (int64_t n = 0; n < 32; ++n) {
    p.l1[n * 16 + 0] = bf16_exact(static_cast<float>(n));
    p.l1[n * 16 + 1] = bf16_exact(4.0f);
  }
  if (bias) {
    p.bias.resize(32);
    for (int64_t n = 0; n < 32; ++n) p.bias[n] = bf16_exact(static_cast<float>(n) / 4.0f);
  }
  return p;
}

double closed_form(int64_t m, int64_t n, bool bias) {
  const double e = model::e2m1_value(static_cast<int>((n + m) % 16));
  const double gemm = (std::ldexp(1.0, static_cast<int>(m)) + 2.0) * e;
  const double lowrank = static_cast<double>((m + 1) * n - 2);
  return 0.5 * (gemm + lowrank) + (bias ? n / 4.0 : 0.0);
}

TEST(Reference, ClosedFormTinyProblems) {
  for (int64_t m : {1, 2, 3})
    for (bool bias : {false, true}) {
      const ref::MmProblem p = closed_form_problem(m, bias);
      std::vector<int64_t> rows;
      for (int64_t r = 0; r < m; ++r) rows.push_back(r);
      const std::vector<double> out = ref::mm_rows_f64(p, rows);
      ASSERT_EQ(static_cast<int64_t>(out.size()), m * 32);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t n = 0; n < 32; ++n)
          EXPECT_EQ(out[r * 32 + n], closed_form(r, n, bias)) << "m " << m << " bias " << bias << " at (" << r << ", " << n << ")";
    }
}

TEST(Reference, SpotValuesWrittenOut) {
  // Row 2, column 5, bias: E((5+2)%16) = E(7) = 6; gemm = (4 + 2)·6 = 36; lowrank = 3·5 - 2 = 13;
  // 0.5·49 + 1.25 = 25.75.
  const ref::MmProblem p = closed_form_problem(3, true);
  EXPECT_EQ(ref::mm_rows_f64(p, {2})[5], 25.75);
  // Row 0, column 9, no bias: E(9) = -0.5; gemm = 3·(-0.5) = -1.5; lowrank = 9 - 2 = 7; 0.5·5.5 = 2.75.
  const ref::MmProblem q = closed_form_problem(1, false);
  EXPECT_EQ(ref::mm_rows_f64(q, {0})[9], 2.75);
}

TEST(Reference, AlphaScalesBothTermsButNotBias) {
  ref::MmProblem p = closed_form_problem(2, true);
  p.alpha = 3.0f;
  const std::vector<double> out = ref::mm_rows_f64(p, {0, 1});
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t n = 0; n < 32; ++n) {
      const double unscaled = (closed_form(r, n, false)) / 0.5;
      EXPECT_EQ(out[r * 32 + n], 3.0 * unscaled + n / 4.0) << r << ", " << n;
    }
}

TEST(Reference, RowSelectionAndThreads) {
  // A random problem; any subset/order of rows must equal the matching rows of the full result.
  const uint64_t seed = test_seed(401);
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  ref::MmProblem p;
  p.m = 5;
  p.n = 64;
  p.k = 96;
  p.rank = 32;
  p.has_bias = true;
  p.a.resize(p.m * p.k / 2);
  p.b.resize(p.n * p.k / 2);
  for (auto& v : p.a) v = static_cast<uint8_t>(rng.range(0, 255));
  for (auto& v : p.b) v = static_cast<uint8_t>(rng.range(0, 255));
  std::vector<uint8_t> asf(p.m * 6), bsf(p.n * 6);
  for (auto& v : asf) v = static_cast<uint8_t>(rng.range(0x20, 0x50));
  for (auto& v : bsf) v = static_cast<uint8_t>(rng.range(0x20, 0x50));
  p.a_sf = fmt::swizzle_scales(asf, p.m, 6);
  p.b_sf = fmt::swizzle_scales(bsf, p.n, 6);
  p.alpha = 0.375f;
  p.d.resize(p.m * p.rank);
  p.l1.resize(p.n * p.rank);
  p.bias.resize(p.n);
  for (auto& v : p.d) v = random_bf16(rng, -4, 2);
  for (auto& v : p.l1) v = random_bf16(rng, -4, 2);
  for (auto& v : p.bias) v = random_bf16(rng, -2, 2);

  const std::vector<double> full = ref::mm_rows_f64(p, {0, 1, 2, 3, 4}, 1);
  // Independent naive evaluation of the SPEC formula with linear scales.
  for (int64_t r = 0; r < p.m; ++r)
    for (int64_t n = 0; n < p.n; ++n) {
      double acc = 0;
      for (int64_t e = 0; e < p.k; ++e) {
        const int ca = (p.a[r * p.k / 2 + e / 2] >> (4 * (e % 2))) & 0xF;
        const int cb = (p.b[n * p.k / 2 + e / 2] >> (4 * (e % 2))) & 0xF;
        acc += model::e2m1_value(ca) * model::e4m3_value(asf[r * 6 + e / 16]) * model::e2m1_value(cb) *
               model::e4m3_value(bsf[n * 6 + e / 16]);
      }
      for (int64_t j = 0; j < p.rank; ++j) acc += double(bf16_value(p.d[r * p.rank + j])) * bf16_value(p.l1[n * p.rank + j]);
      const double want = double(p.alpha) * acc + bf16_value(p.bias[n]);
      EXPECT_NEAR(full[r * p.n + n], want, 1e-12 * std::max(1.0, std::fabs(want))) << r << ", " << n;
    }
  const std::vector<int64_t> pick = {4, 0, 2, 2};
  for (int threads : {0, 1, 3, 64}) {
    const std::vector<double> sel = ref::mm_rows_f64(p, pick, threads);
    ASSERT_EQ(sel.size(), pick.size() * p.n);
    for (size_t i = 0; i < pick.size(); ++i)
      for (int64_t n = 0; n < p.n; ++n)
        EXPECT_EQ(sel[i * p.n + n], full[pick[i] * p.n + n]) << "threads " << threads << " pick " << i << " n " << n;
  }
  EXPECT_TRUE(ref::mm_rows_f64(p, {}).empty());
  EXPECT_TRUE(throws_svdq([&] { ref::mm_rows_f64(p, {5}); }, svdq::ErrorCode::InvalidArgument, {}));
  EXPECT_TRUE(throws_svdq([&] { ref::mm_rows_f64(p, {-1}); }, svdq::ErrorCode::InvalidArgument, {}));
}

TEST(Reference, RoundToBF16IsOneRounding) {
  const std::vector<double> v = {1.0, 1.0 + std::ldexp(1.0, -8), 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40),
                                 -25.75, 1e39, 0.0};
  EXPECT_EQ(ref::round_to_bf16(v), (std::vector<uint16_t>{0x3F80, 0x3F80, 0x3F81, 0xC1CE, 0x7F80, 0x0000}));
}

TEST(Compare, ExactMatch) {
  const std::vector<double> r = {1.0, -2.0, 3.5, 1e-3, 1234.5};
  const ref::Comparison c = ref::compare(ref::round_to_bf16(r), r);
  EXPECT_EQ(c.count, 5);
  EXPECT_EQ(c.max_ulp, 0);
  EXPECT_EQ(c.within_1ulp, 5);
  EXPECT_EQ(c.nan_or_unwritten, 0);
  EXPECT_DOUBLE_EQ(c.share_within_1ulp(), 1.0);
  // 1e-3 and 1234.5 are not BF16 values, so the noise is not zero but tiny; everything else exact.
  EXPECT_GT(c.sqnr_db, 40.0);
  const std::vector<double> exact = {1.0, -2.0, 3.5};
  EXPECT_TRUE(std::isinf(ref::compare({0x3F80, 0xC000, 0x4060}, exact).sqnr_db));
}

TEST(Compare, UlpCountsAndSqnr) {
  const std::vector<double> r = {1.0, 2.0, 3.0, 4.0};
  // 4 + 1 ulp (1/32) in the last element; 3 + 3 ulps (3/64 each) in the third.
  std::vector<uint16_t> dev = {0x3F80, 0x4000, 0x4043, 0x4081};
  const ref::Comparison c = ref::compare(dev, r);
  EXPECT_EQ(c.count, 4);
  EXPECT_EQ(c.max_ulp, 3);
  EXPECT_EQ(c.within_1ulp, 3);
  EXPECT_EQ(c.nan_or_unwritten, 0);
  EXPECT_DOUBLE_EQ(c.share_within_1ulp(), 0.75);
  const double noise = std::pow(3.0 / 64.0, 2) + std::pow(1.0 / 32.0, 2);
  EXPECT_NEAR(c.sqnr_db, 10.0 * std::log10(30.0 / noise), 1e-9);
}

TEST(Compare, NaNAndUnwrittenAreCounted) {
  const std::vector<double> r = {1.0, 2.0, 3.0, std::numeric_limits<double>::quiet_NaN(), 1e39};
  // Poison (0xFFFF), +inf and a correct value where the reference is finite; matching NaN and inf elsewhere.
  const std::vector<uint16_t> dev = {0xFFFF, 0x7F80, 0x4040, 0x7FC0, 0x7F80};
  const ref::Comparison c = ref::compare(dev, r);
  EXPECT_EQ(c.nan_or_unwritten, 2);
  EXPECT_EQ(c.within_1ulp, 3);
  EXPECT_GT(c.max_ulp, 1000);
  EXPECT_LT(c.share_within_1ulp(), 0.61);
  // A finite device value where the reference overflows to inf is a mismatch, not a NaN.
  const ref::Comparison d = ref::compare({0x7F7F}, {1e39});
  EXPECT_EQ(d.within_1ulp, 0);
  EXPECT_EQ(d.nan_or_unwritten, 0);
}

TEST(Compare, SizeMismatchThrows) {
  EXPECT_TRUE(throws_svdq([] { ref::compare({1, 2}, {1.0}); }, svdq::ErrorCode::InvalidArgument, {}));
}

TEST(Compare, UlpAcrossZeroIsCounted) {
  // Reference +2^-133 (0x0001) against device -2^-133 (0x8001): two steps through zero.
  const ref::Comparison c = ref::compare({0x8001}, {std::ldexp(1.0, -133)});
  EXPECT_EQ(c.max_ulp, 2);
  EXPECT_EQ(c.within_1ulp, 0);
}

TEST(UlpDistance, AcrossZeroAndSigns) {
  EXPECT_EQ(ref::bf16_ulp_distance(0x0000, 0x8000), 0);  // +0 and -0 are the same value
  EXPECT_EQ(ref::bf16_ulp_distance(0x0001, 0x8001), 2);
  EXPECT_EQ(ref::bf16_ulp_distance(0x0001, 0x8000), 1);
  EXPECT_EQ(ref::bf16_ulp_distance(0x3F80, 0x3F81), 1);
  EXPECT_EQ(ref::bf16_ulp_distance(0x3F81, 0x3F80), 1);
  EXPECT_EQ(ref::bf16_ulp_distance(0x3F7F, 0x3F80), 1);  // across an exponent boundary
  EXPECT_EQ(ref::bf16_ulp_distance(0xBF80, 0xBF81), 1);
  EXPECT_EQ(ref::bf16_ulp_distance(0x3F80, 0xBF80), 2 * 0x3F80);
  EXPECT_EQ(ref::bf16_ulp_distance(0x7F7F, 0x7F80), 1);  // max finite to inf
  EXPECT_EQ(ref::bf16_ulp_distance(0x7F80, 0xFF80), 2 * 0x7F80);
  const uint64_t seed = test_seed(402);
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  for (int i = 0; i < 10000; ++i) {
    const uint16_t x = random_bf16(rng, -100, 100), y = random_bf16(rng, -100, 100);
    // Monotone: the distance equals the number of BF16 values strictly between plus one (for x != y), counted by
    // the order of their real values; check symmetry and the triangle equality through zero.
    EXPECT_EQ(ref::bf16_ulp_distance(x, y), ref::bf16_ulp_distance(y, x));
    const bool same_side = (x >> 15) == (y >> 15);
    const int64_t mx = x & 0x7FFF, my = y & 0x7FFF;
    EXPECT_EQ(ref::bf16_ulp_distance(x, y), same_side ? std::llabs(mx - my) : mx + my) << std::hex << x << " " << y;
  }
}

TEST(Reference, PerElementBoundScalesWithTheRowMax) {
  // Row max 256: the bound of a true 0 is 2^-133 + 2^-16 * 256 = 2^-8 (+ a subnormal ulp).
  ref::Comparison c = ref::compare({0x4380, 0x3B80}, {256.0, 0.0}, 2);
  EXPECT_EQ(c.out_of_bound, 0);
  EXPECT_LE(c.worst_bound_ratio, 1.0);
  c = ref::compare({0x4380, 0x3C00}, {256.0, 0.0}, 2);  // 2^-7: twice the bound
  EXPECT_EQ(c.out_of_bound, 1);
  EXPECT_EQ(c.first_out_of_bound, 1);
  EXPECT_NEAR(c.worst_bound_ratio, 2.0, 1e-6);
  // Each row has its own max: the same error in a row of small values is out of bound.
  c = ref::compare({0x4380, 0x3B80, 0x3F80, 0x3F82}, {256.0, 0.0, 1.0, 1.0}, 2);
  EXPECT_EQ(c.out_of_bound, 1);
  EXPECT_EQ(c.first_out_of_bound, 3);
  // 1 ulp of the value itself is always allowed.
  EXPECT_EQ(ref::compare({0x3F81}, {1.0}, 1).out_of_bound, 0);
  EXPECT_EQ(ref::bf16_ulp(1.0), std::ldexp(1.0, -7));
  EXPECT_EQ(ref::bf16_ulp(0.0), std::ldexp(1.0, -133));
  EXPECT_TRUE(throws_svdq([] { ref::compare({1, 2, 3}, {1.0, 2.0, 3.0}, 2); }, svdq::ErrorCode::InvalidArgument, {"row_len"}));
}

}  // namespace
