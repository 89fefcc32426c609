// The host reference quantizers (format::quantize_reference / quantize_smooth_reference): hand-built blocks with
// bytes worked out by hand, the BF16 pre-rounding of the smoothing product, both scale layouts, padding, odd M, and
// random tensors against the independent model (tests/model.hpp) and the half-step error bound.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "../model.hpp"
#include "../test_util.hpp"
#include "format/nvfp4.hpp"

namespace {

using namespace svdq_test;
namespace fmt = svdq::format;
using svdq::ScaleLayout;

constexpr uint16_t kBfNaN = 0x7FC0, kBfNegNaN = 0xFFC0, kBfInf = 0x7F80, kBfNegInf = 0xFF80;

std::vector<uint16_t> bf16_row(std::initializer_list<float> values) {
  std::vector<uint16_t> out;
  for (float v : values) out.push_back(bf16_exact(v));
  return out;
}

// Quantizes one 16-element row (m = 1, k = 16) and checks the 8 code bytes and the scale in both layouts.
void expect_block(const std::vector<uint16_t>& x, float gs, const std::vector<uint8_t>& bytes, uint8_t scale) {
  ASSERT_EQ(x.size(), 16u);
  const fmt::Quantized lin = fmt::quantize_reference(x.data(), 1, 16, gs, ScaleLayout::Linear);
  const fmt::Quantized sw = fmt::quantize_reference(x.data(), 1, 16, gs, ScaleLayout::Swizzled128x4);
  EXPECT_EQ(lin.q, bytes);
  EXPECT_EQ(sw.q, bytes);
  ASSERT_EQ(lin.sf.size(), 1u);
  EXPECT_EQ(lin.sf[0], scale);
  ASSERT_EQ(sw.sf.size(), 512u);
  EXPECT_EQ(sw.sf[0], scale);
  for (size_t i = 1; i < sw.sf.size(); ++i) ASSERT_EQ(sw.sf[i], 0) << "padding byte " << i;
}

// amax 12, gs 1: s = 12/6 = 2 (E4M3 0x40), every x/2 is an E2M1 value.
const std::initializer_list<float> kExactBlock = {12, -12, 6, -6, 3, -3, 2, 1, 0, -0.0f, 8, -8, 4, 12, -1, 0};
const std::vector<uint8_t> kExactBytes = {0xF7, 0xD5, 0xB3, 0x12, 0x80, 0xE6, 0x74, 0x09};

TEST(Quantizer, BlockWithExactScale) {
  expect_block(bf16_row(kExactBlock), 1.0f, kExactBytes, 0x40);
  // gs = 4: s = 4 * 2 = 8 (0x50) and x * (4/8) gives the same codes.
  expect_block(bf16_row(kExactBlock), 4.0f, kExactBytes, 0x50);
  // gs = 0.25: s = 0.5 (0x30), x * (0.25/0.5) again the same codes.
  expect_block(bf16_row(kExactBlock), 0.25f, kExactBytes, 0x30);
}

TEST(Quantizer, ZeroBlocks) {
  const std::vector<uint8_t> zeros(8, 0);
  expect_block(std::vector<uint16_t>(16, 0x0000), 1.0f, zeros, 0x00);
  // -0 everywhere: scale 0, and codes are 0 (not -0) because s == 0 writes zeros.
  expect_block(std::vector<uint16_t>(16, 0x8000), 1.0f, zeros, 0x00);
  // A block too small for the scale: amax * gs / 6 rounds to E4M3 zero (below 2^-10).
  std::vector<uint16_t> tiny(16, bf16_exact(std::ldexp(1.0f, -20)));
  expect_block(tiny, 1.0f, zeros, 0x00);
}

TEST(Quantizer, NaNElementsAreIgnoredByAmaxAndEncodeAsZero) {
  std::vector<uint16_t> x = bf16_row(kExactBlock);
  x[0] = kBfNaN;     // was 12 (code 7); element 13 still gives amax 12
  x[3] = kBfNegNaN;  // was -6 (code F)
  std::vector<uint8_t> bytes = kExactBytes;
  bytes[0] = 0xF0;
  bytes[1] = 0x05;
  expect_block(x, 1.0f, bytes, 0x40);
  // All NaN: amax 0, scale 0, codes 0.
  expect_block(std::vector<uint16_t>(16, kBfNaN), 1.0f, std::vector<uint8_t>(8, 0), 0x00);
}

TEST(Quantizer, InfSaturatesScaleAndCodes) {
  // amax = inf -> s = satfinite(inf) = 448 (0x7E); x * (1/448): inf -> 6, 1344 -> 3, 448 -> 1, -896 -> -2, 1 -> 0.
  std::vector<uint16_t> x(16, 0);
  x[0] = kBfInf;
  x[1] = bf16_exact(1344.0f);
  x[2] = bf16_exact(448.0f);
  x[3] = bf16_exact(-896.0f);
  x[4] = bf16_exact(1.0f);
  x[5] = kBfNegInf;
  expect_block(x, 1.0f, {0x57, 0xC2, 0xF0, 0, 0, 0, 0, 0}, 0x7E);
}

TEST(Quantizer, SubnormalScale) {
  // amax = 18 * 2^-9, amax/6 = 3 * 2^-9 exactly: E4M3 subnormal 0x03. x * (1 / (3*2^-9)):
  // 18u -> 6, 9u -> 3, -3u -> -1, 1.5u -> 0.5, 4.5u -> 1.5 (u = 2^-9).
  const float u = std::ldexp(1.0f, -9);
  std::vector<uint16_t> x(16, 0);
  x[0] = bf16_exact(18 * u);
  x[1] = bf16_exact(9 * u);
  x[2] = bf16_exact(-3 * u);
  x[3] = bf16_exact(1.5f * u);
  x[4] = bf16_exact(4.5f * u);
  expect_block(x, 1.0f, {0x57, 0x1A, 0x03, 0, 0, 0, 0, 0}, 0x03);
}

TEST(Quantizer, E2M1TiesInsideABlock) {
  // amax 6 with gs g: s = g * (6/g)/6 ... chosen so gs/s is a power of two and every product lands exactly on a tie.
  for (float gs : {1.0f, 2.0f, 0.5f}) {
    const float k = 1.0f / gs;
    std::vector<uint16_t> x = bf16_row({6 * k, 0.25f * k, 0.75f * k, 1.25f * k, 1.75f * k, 2.5f * k, 3.5f * k,
                                        5 * k, -0.25f * k, -0.75f * k, -1.25f * k, -1.75f * k, -2.5f * k, -3.5f * k,
                                        -5 * k, 0});
    SCOPED_TRACE(gs);
    expect_block(x, gs, {0x07, 0x22, 0x44, 0x66, 0xA8, 0xCA, 0xEC, 0x0E}, 0x38);
  }
}

TEST(Quantizer, ScaleOnAnE4M3Tie) {
  // amax/6 = 1.0625: tie between 1.0 (0x38) and 1.125 (0x39) -> even 0x38; 6.375 * 1 saturates to 6.
  std::vector<uint16_t> x(16, 0);
  x[0] = bf16_exact(6.375f);
  x[1] = bf16_exact(-1.0f);
  expect_block(x, 1.0f, {0xA7, 0, 0, 0, 0, 0, 0, 0}, 0x38);
  // amax/6 = 1.1875: tie between 1.125 (0x39) and 1.25 (0x3A) -> even 0x3A; 7.125 * 0.8 = 5.7 -> 6.
  x[0] = bf16_exact(7.125f);
  expect_block(x, 1.0f, {0xA7, 0, 0, 0, 0, 0, 0, 0}, 0x3A);
}

TEST(Quantizer, ScaleIsGlobalTimesAmaxOverSixInThatOrder) {
  // amax = 25/256, gs = 0.3f: amax/6 rounds, and 0.3f * that lands exactly on 5 * 2^-10, the tie between the E4M3
  // subnormals 2 * 2^-9 (0x02) and 3 * 2^-9 (0x03) -> even 0x02. The other order, (gs * amax) / 6, lands one float
  // ulp above the tie and would give 0x03.
  const float amax = 0.09765625f, gs = 0.3f;
  const volatile float a6 = amax / 6.0f;
  const volatile float spec_order = gs * a6;
  const volatile float prod = gs * amax;
  const volatile float other_order = prod / 6.0f;
  ASSERT_EQ(spec_order, 5.0f * std::ldexp(1.0f, -10));
  ASSERT_GT(other_order, spec_order);
  // Codes with s = 2^-8, gs/s = 76.8: 25/256 -> 7.5 -> 6 (7); 2^-7 -> 0.6 -> 0.5 (1); -1/32 -> -2.4 -> -2 (C).
  std::vector<uint16_t> x(16, 0);
  x[0] = bf16_exact(amax);
  x[1] = bf16_exact(0.0078125f);
  x[2] = bf16_exact(-0.03125f);
  expect_block(x, gs, {0x17, 0x0C, 0, 0, 0, 0, 0, 0}, 0x02);
}

TEST(Quantizer, CodesAreXTimesGlobalOverScaleInThatOrder) {
  // (1) gs = 0.3f, amax = 1/8: s = RN(0.3 * (1/48)) = 3 * 2^-9 (0x03), gs/s = 51.2f; x = 25/1024 gives exactly
  // 1.25, a tie -> 1.0 (code 2). (x * gs) / s would give 1.2500001 -> 1.5 (code 3).
  {
    const float gs = 0.3f, sv = 3 * std::ldexp(1.0f, -9);
    const float x1 = 0.0244140625f;
    const volatile float mul = gs / sv;
    const volatile float spec = x1 * mul;
    const volatile float xg = x1 * gs;
    const volatile float other = xg / sv;
    ASSERT_EQ(spec, 1.25f);
    ASSERT_GT(other, 1.25f);
    std::vector<uint16_t> x(16, 0);
    x[0] = bf16_exact(0.125f);  // 0.125 * 51.2 = 6.4 -> 6 (7)
    x[1] = bf16_exact(x1);
    expect_block(x, gs, {0x27, 0, 0, 0, 0, 0, 0, 0}, 0x03);
  }
  // (2) gs = 0.9f, amax = 25/128: s = 1.875 * 2^-6 (0x0F); x = 25/1024 times RN(gs/s) is exactly 0.75, a tie ->
  // 1.0 (code 2). x * (1 / (s / gs)) would give 0.74999994 -> 0.5 (code 1).
  {
    const float gs = 0.9f, sv = 1.875f * std::ldexp(1.0f, -6);
    const float x1 = 0.0244140625f;
    const volatile float mul = gs / sv;
    const volatile float spec = x1 * mul;
    const volatile float inv = sv / gs;
    const volatile float mul_recip = 1.0f / inv;
    const volatile float other = x1 * mul_recip;
    ASSERT_EQ(spec, 0.75f);
    ASSERT_LT(other, 0.75f);
    std::vector<uint16_t> x(16, 0);
    x[0] = bf16_exact(0.1953125f);
    x[1] = bf16_exact(x1);
    expect_block(x, gs, {0x27, 0, 0, 0, 0, 0, 0, 0}, 0x0F);
  }
}

TEST(Quantizer, SmoothingProductIsRoundedToBF16First) {
  // x[1] * pqs[1] = 1.0078125 * 1.2421875 = 1.25189208984375; BF16 rounds it to 1.25, an E2M1 tie -> 1.0 (code 2).
  // Quantizing the unrounded product would give 1.5 (code 3).
  std::vector<uint16_t> x(16, 0), pqs(16, bf16_exact(1.0f));
  x[0] = bf16_exact(6.0f);
  x[1] = 0x3F81;
  pqs[1] = 0x3F9F;
  ASSERT_EQ(bf16_value(0x3F81), 1.0078125f);
  ASSERT_EQ(bf16_value(0x3F9F), 1.2421875f);
  x[2] = bf16_exact(3.0f);
  pqs[2] = bf16_exact(0.5f);   // 1.5 -> code 3
  x[3] = bf16_exact(-2.0f);
  pqs[3] = bf16_exact(-1.0f);  // 2 -> code 4
  for (ScaleLayout layout : {ScaleLayout::Linear, ScaleLayout::Swizzled128x4}) {
    const fmt::Quantized r = fmt::quantize_smooth_reference(x.data(), pqs.data(), 1, 16, 1.0f, layout);
    EXPECT_EQ(r.q, (std::vector<uint8_t>{0x27, 0x43, 0, 0, 0, 0, 0, 0}));
    EXPECT_EQ(r.sf[0], 0x38);
  }
}

TEST(Quantizer, SmoothingEqualsQuantizingThePreRoundedTensor) {
  const uint64_t seed = test_seed(301);
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  const int64_t m = 37, k = 256;
  std::vector<uint16_t> x(m * k), pqs(k), pre(m * k);
  for (auto& v : x) v = random_bf16(rng, -8, 8);
  for (auto& v : pqs) v = random_bf16(rng, -3, 3);
  int64_t inexact = 0;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const float p = bf16_value(x[r * k + c]) * bf16_value(pqs[c]);  // exact in float (8 x 8 bits)
      pre[r * k + c] = model::bf16_nearest(p);
      inexact += bf16_value(pre[r * k + c]) != p;
    }
  ASSERT_GT(inexact, m * k / 2) << "the test needs products that BF16 cannot hold";
  for (ScaleLayout layout : {ScaleLayout::Linear, ScaleLayout::Swizzled128x4})
    for (float gs : {1.0f, 37.5f, 2688.0f / 1024.0f}) {
      const fmt::Quantized a = fmt::quantize_smooth_reference(x.data(), pqs.data(), m, k, gs, layout);
      const fmt::Quantized b = fmt::quantize_reference(pre.data(), m, k, gs, layout);
      EXPECT_EQ(a.q, b.q) << "gs " << gs;
      EXPECT_EQ(a.sf, b.sf) << "gs " << gs;
    }
}

// Random wide-range tensor with some special blocks mixed in.
std::vector<uint16_t> random_tensor(Rng& rng, int64_t m, int64_t k) {
  std::vector<uint16_t> x(m * k);
  for (auto& v : x) v = random_bf16(rng, -30, 30);
  for (int64_t b = 0; b < m * k / 16; ++b) {
    const int64_t kind = rng.range(0, 15);
    uint16_t* blk = &x[b * 16];
    if (kind == 0) {
      for (int i = 0; i < 16; ++i) blk[i] = 0;
    } else if (kind == 1) {  // narrow range within the block
      const int e = static_cast<int>(rng.range(-20, 20));
      for (int i = 0; i < 16; ++i) blk[i] = random_bf16(rng, e, e + 1);
    } else if (kind == 2) {
      blk[rng.range(0, 15)] = kBfNaN;
    }
  }
  return x;
}

float typical_global_scale(const std::vector<uint16_t>& x) {
  float amax = 0;
  for (uint16_t v : x)
    if (!std::isnan(bf16_value(v))) amax = std::max(amax, std::fabs(bf16_value(v)));
  return 448.0f * 6.0f / amax;
}

TEST(Quantizer, RandomTensorsMatchTheModelByteForByte) {
  const uint64_t seed = test_seed(302);
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  for (int64_t m : {1, 3, 129}) {
    const int64_t k = 512;
    std::vector<uint16_t> x = random_tensor(rng, m, k);
    for (float gs : {typical_global_scale(x), 1.0f, 1e-6f, 1e6f, 3.0e30f}) {
      SCOPED_TRACE("m " + std::to_string(m) + " gs " + std::to_string(gs));
      const model::ModelQuant want = model::quantize(x, m, k, gs);
      const fmt::Quantized lin = fmt::quantize_reference(x.data(), m, k, gs, ScaleLayout::Linear);
      const fmt::Quantized sw = fmt::quantize_reference(x.data(), m, k, gs, ScaleLayout::Swizzled128x4);
      EXPECT_EQ(lin.q, want.q);
      EXPECT_EQ(lin.sf, want.sf);
      EXPECT_EQ(sw.q, want.q);
      EXPECT_EQ(fmt::unswizzle_scales(sw.sf, m, k / 16), want.sf);
    }
  }
}

TEST(Quantizer, LinearAndSwizzledHoldTheSameScalesWithZeroPadding) {
  const uint64_t seed = test_seed(303);
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  for (int64_t m : {1, 44, 128, 129}) {
    for (int64_t k : {16, 32, 48, 64, 80, 3072}) {
      std::vector<uint16_t> x(m * k);
      for (auto& v : x) v = random_bf16(rng, -4, 4);  // no zero blocks: every real scale is non-zero
      const float gs = typical_global_scale(x);
      const fmt::Quantized lin = fmt::quantize_reference(x.data(), m, k, gs, ScaleLayout::Linear);
      const fmt::Quantized sw = fmt::quantize_reference(x.data(), m, k, gs, ScaleLayout::Swizzled128x4);
      const fmt::ScaleShape ss = fmt::scale_shape(m, k);
      ASSERT_EQ(static_cast<int64_t>(lin.sf.size()), m * (k / 16));
      ASSERT_EQ(static_cast<int64_t>(sw.sf.size()), ss.rows_padded * ss.cols_padded);
      ASSERT_EQ(static_cast<int64_t>(lin.q.size()), m * k / 2);
      EXPECT_EQ(lin.q, sw.q);
      EXPECT_EQ(fmt::unswizzle_scales(sw.sf, m, k / 16), lin.sf) << m << "x" << k;
      // Padding: exactly the positions outside [m, k/16] are zero; the real scales are all non-zero here.
      std::vector<bool> real(sw.sf.size(), false);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t c = 0; c < k / 16; ++c) real[static_cast<size_t>(fmt::swizzled_offset(r, c, ss.cols_padded))] = true;
      for (size_t i = 0; i < sw.sf.size(); ++i) {
        if (real[i])
          ASSERT_NE(sw.sf[i], 0) << "scale byte " << i << " " << m << "x" << k;
        else
          ASSERT_EQ(sw.sf[i], 0) << "padding byte " << i << " " << m << "x" << k;
      }
    }
  }
}

// Spacing of the E2M1 grid around magnitude a (<= 6).
double e2m1_step(double a) { return a < 2.0 ? 0.5 : (a < 4.0 ? 1.0 : 2.0); }

TEST(Quantizer, DequantizedValueWithinHalfAStep) {
  const uint64_t seed = test_seed(304);
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  const int64_t m = 64, k = 1024;
  std::vector<uint16_t> x(m * k);
  for (auto& v : x) v = random_bf16(rng, -12, 12);
  const float gs = typical_global_scale(x);
  const fmt::Quantized r = fmt::quantize_reference(x.data(), m, k, gs, ScaleLayout::Linear);
  const std::vector<uint8_t> codes = fmt::unpack_e2m1(r.q, m * k);
  for (int64_t row = 0; row < m; ++row)
    for (int64_t e = 0; e < k; ++e) {
      const uint8_t s = r.sf[row * (k / 16) + e / 16];
      const double sv = fmt::e4m3_decode(s);
      ASSERT_GT(sv, 0.0);
      // The scale is the nearest E4M3 value to gs * amax / 6.
      const double y = static_cast<double>(bf16_value(x[row * k + e])) * gs / sv;
      const double q = fmt::e2m1_decode(codes[row * k + e]);
      ASSERT_EQ(std::signbit(q), std::signbit(y)) << "row " << row << " col " << e;
      const double a = std::fabs(y);
      if (a >= 6.0) {
        ASSERT_EQ(std::fabs(q), 6.0) << "row " << row << " col " << e << " y " << y;
        ASSERT_LT(a, 6.0 * 1.07) << "scale rounding can push amax at most 1/16 above 6";
      } else {
        ASSERT_LE(std::fabs(q - y), 0.5 * e2m1_step(a) * (1 + 1e-6)) << "row " << row << " col " << e << " y " << y;
      }
    }
}

TEST(Quantizer, OddRowCounts) {
  // M = 1 and 129: rows beyond the first tile land in the second 128-row tile of the swizzled buffer.
  const uint64_t seed = test_seed(305);
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  for (int64_t m : {1, 129}) {
    const int64_t k = 64;
    std::vector<uint16_t> x(m * k);
    for (auto& v : x) v = random_bf16(rng, -2, 2);
    const fmt::Quantized sw = fmt::quantize_reference(x.data(), m, k, 1.0f, ScaleLayout::Swizzled128x4);
    ASSERT_EQ(static_cast<int64_t>(sw.sf.size()), (m <= 128 ? 128 : 256) * 4);
    // The last row's scales, found by hand from the formula: row m-1, columns 0..3.
    const int64_t r = m - 1;
    for (int64_t c = 0; c < 4; ++c) {
      const int64_t off = (r / 128) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c;
      float amax = 0;
      for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(bf16_value(x[r * k + c * 16 + i])));
      EXPECT_EQ(sw.sf[off], model::e4m3_nearest(amax / 6.0f)) << "m " << m << " col " << c;
    }
  }
}

TEST(Quantizer, BadArguments) {
  using svdq::ErrorCode;
  std::vector<uint16_t> x(64, 0);
  EXPECT_TRUE(throws_svdq([&] { fmt::quantize_reference(x.data(), 1, 24, 1.0f, ScaleLayout::Linear); },
                          ErrorCode::InvalidArgument, {"'k'"}));
  EXPECT_TRUE(throws_svdq([&] { fmt::quantize_reference(x.data(), 1, 0, 1.0f, ScaleLayout::Linear); },
                          ErrorCode::InvalidArgument, {"'k'"}));
  EXPECT_TRUE(throws_svdq([&] { fmt::quantize_reference(x.data(), -1, 16, 1.0f, ScaleLayout::Linear); },
                          ErrorCode::InvalidArgument, {"'m'"}));
}

}  // namespace
