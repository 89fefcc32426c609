// Scalar codecs of the NVFP4 format (src/format/nvfp4.hpp over kernels/common/smxx_nvfp4_codec.cuh), checked against
// tables and formulas written independently here: E2M1, E4M3, BF16 rounding and nibble packing.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <map>
#include <thread>
#include <vector>
#include <algorithm>

#include "../model.hpp"
#include "../test_util.hpp"
#include "common/smxx_e2m1_pick.cuh"
#include "common/smxx_nvfp4_codec.cuh"
#include "format/nvfp4.hpp"

namespace {

using namespace svdq_test;
namespace fmt = svdq::format;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------------------------------------------------------
// E2M1
// ---------------------------------------------------------------------------------------------------------------
TEST(E2M1, DecodeAll16Codes) {
  for (int c = 0; c < 16; ++c) {
    const float v = fmt::e2m1_decode(static_cast<uint8_t>(c));
    EXPECT_EQ(bits_of(v), bits_of(model::e2m1_value(c))) << "code " << c;
    EXPECT_EQ(std::signbit(v), c >= 8) << "code " << c;
  }
  // Only the low 4 bits are the code.
  for (int c = 0; c < 16; ++c)
    EXPECT_EQ(bits_of(fmt::e2m1_decode(static_cast<uint8_t>(0xA0 | c))), bits_of(model::e2m1_value(c))) << "code " << c;
}

TEST(E2M1, EncodeDecodeIdentity) {
  for (int c = 0; c < 16; ++c) EXPECT_EQ(fmt::e2m1_encode(model::e2m1_value(c)), c) << "code " << c;
}

struct Tie {
  float x;
  uint8_t code;
};

TEST(E2M1, TiesRoundToEven) {
  const Tie ties[] = {{0.25f, 0x0}, {0.75f, 0x2}, {1.25f, 0x2}, {1.75f, 0x4},
                      {2.5f, 0x4},  {3.5f, 0x6},  {5.0f, 0x6}};
  for (const Tie& t : ties) {
    EXPECT_EQ(fmt::e2m1_encode(t.x), t.code) << t.x;
    EXPECT_EQ(fmt::e2m1_encode(-t.x), t.code | 8) << -t.x;
  }
}

TEST(E2M1, JustAboveAndBelowTies) {
  // (tie, code of the lower neighbour)
  const Tie ties[] = {{0.25f, 0x0}, {0.75f, 0x1}, {1.25f, 0x2}, {1.75f, 0x3},
                      {2.5f, 0x4},  {3.5f, 0x5},  {5.0f, 0x6}};
  for (const Tie& t : ties) {
    const float below = std::nextafter(t.x, 0.0f), above = std::nextafter(t.x, kInf);
    EXPECT_EQ(fmt::e2m1_encode(below), t.code) << below;
    EXPECT_EQ(fmt::e2m1_encode(above), t.code + 1) << above;
    EXPECT_EQ(fmt::e2m1_encode(-below), t.code | 8) << -below;
    EXPECT_EQ(fmt::e2m1_encode(-above), (t.code + 1) | 8) << -above;
  }
}

TEST(E2M1, Saturation) {
  for (float x : {6.0f, std::nextafter(6.0f, kInf), 7.0f, 100.0f, 1e30f, FLT_MAX, kInf}) {
    EXPECT_EQ(fmt::e2m1_encode(x), 0x7) << x;
    EXPECT_EQ(fmt::e2m1_encode(-x), 0xF) << -x;
  }
}

TEST(E2M1, NaNEncodesAsZero) {
  EXPECT_EQ(fmt::e2m1_encode(kNaN), 0);
  EXPECT_EQ(fmt::e2m1_encode(-kNaN), 0);
  EXPECT_EQ(fmt::e2m1_encode(float_of(0x7F800001u)), 0);  // signalling NaN pattern
  EXPECT_EQ(fmt::e2m1_encode(float_of(0xFFFFFFFFu)), 0);
}

TEST(E2M1, SignedZeroAndTinyValues) {
  EXPECT_EQ(fmt::e2m1_encode(0.0f), 0x0);
  EXPECT_EQ(fmt::e2m1_encode(-0.0f), 0x8);
  EXPECT_EQ(fmt::e2m1_encode(1e-30f), 0x0);
  EXPECT_EQ(fmt::e2m1_encode(-1e-30f), 0x8);
  EXPECT_EQ(fmt::e2m1_encode(float_of(1u)), 0x0);  // smallest subnormal
}

TEST(E2M1, RandomValuesMatchExhaustiveSearch) {
  const uint64_t seed = test_seed(101);
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  for (int i = 0; i < 200000; ++i) {
    float x;
    if (i % 2) {
      x = static_cast<float>(rng.uniform() * 14.0 - 7.0);
    } else {  // values on and around the grid of quarter steps
      x = static_cast<float>(rng.range(-32, 32)) * 0.25f;
      if (rng.coin()) x = std::nextafter(x, rng.coin() ? kInf : -kInf);
    }
    ASSERT_EQ(fmt::e2m1_encode(x), model::e2m1_nearest(x)) << "x = " << x << " bits " << std::hex << bits_of(x);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// E4M3 (e4m3fn: bias 7, no infinities, 0x7F/0xFF NaN, max 448)
// ---------------------------------------------------------------------------------------------------------------
TEST(E4M3, DecodeAll256Codes) {
  for (int c = 0; c < 256; ++c) {
    const float v = fmt::e4m3_decode(static_cast<uint8_t>(c));
    const double f = model::e4m3_value(c);
    if ((c & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(v)) << "code " << c;
      continue;
    }
    EXPECT_EQ(static_cast<double>(v), f) << "code " << c;
    EXPECT_EQ(std::signbit(v), c >= 0x80) << "code " << c;
  }
  // Spot values written out.
  EXPECT_EQ(fmt::e4m3_decode(0x38), 1.0f);
  EXPECT_EQ(fmt::e4m3_decode(0x7E), 448.0f);
  EXPECT_EQ(fmt::e4m3_decode(0xFE), -448.0f);
  EXPECT_EQ(fmt::e4m3_decode(0x01), 0.001953125f);  // 2^-9
  EXPECT_EQ(fmt::e4m3_decode(0x08), 0.015625f);     // 2^-6
  EXPECT_EQ(fmt::e4m3_decode(0x07), 0.013671875f);  // 7 * 2^-9
}

TEST(E4M3, EncodeDecodeIdentity) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(fmt::e4m3_encode(fmt::e4m3_decode(static_cast<uint8_t>(c))), c) << "code " << c;
  }
  EXPECT_EQ(fmt::e4m3_encode(0.0f), 0x00);
  EXPECT_EQ(fmt::e4m3_encode(-0.0f), 0x80);
}

TEST(E4M3, TiesBetweenAllAdjacentCodesRoundToEven) {
  for (int c = 0; c < 0x7E; ++c) {
    const double lo = model::e4m3_value(c), hi = model::e4m3_value(c + 1);
    const double mid_d = 0.5 * (lo + hi);
    const float mid = static_cast<float>(mid_d);
    ASSERT_EQ(static_cast<double>(mid), mid_d) << "midpoint not exact in float, codes " << c;
    const int even = (c % 2 == 0) ? c : c + 1;
    EXPECT_EQ(fmt::e4m3_encode(mid), even) << "tie between codes " << c << " and " << c + 1 << " at " << mid;
    EXPECT_EQ(fmt::e4m3_encode(-mid), even | 0x80) << "negative tie at " << -mid;
    const float below = std::nextafter(mid, 0.0f), above = std::nextafter(mid, kInf);
    EXPECT_EQ(fmt::e4m3_encode(below), c) << "just below tie " << mid;
    EXPECT_EQ(fmt::e4m3_encode(above), c + 1) << "just above tie " << mid;
    EXPECT_EQ(fmt::e4m3_encode(-below), c | 0x80) << "just below tie " << -mid;
    EXPECT_EQ(fmt::e4m3_encode(-above), (c + 1) | 0x80) << "just above tie " << -mid;
  }
}

TEST(E4M3, Saturation) {
  for (float x : {448.0f, 449.0f, 463.99997f, 464.0f, 464.00003f, 480.0f, 1e9f, FLT_MAX, kInf}) {
    EXPECT_EQ(fmt::e4m3_encode(x), 0x7E) << x;
    EXPECT_EQ(fmt::e4m3_encode(-x), 0xFE) << -x;
  }
  EXPECT_EQ(fmt::e4m3_encode(std::nextafter(448.0f, 0.0f)), 0x7E);
  EXPECT_EQ(fmt::e4m3_encode(432.0f), 0x7E);  // tie between 416 (0x7D) and 448 (0x7E) -> even 0x7E
  EXPECT_EQ(fmt::e4m3_encode(std::nextafter(432.0f, 0.0f)), 0x7D);
}

TEST(E4M3, SubnormalScales) {
  EXPECT_EQ(fmt::e4m3_encode(std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(fmt::e4m3_encode(std::ldexp(1.0f, -10)), 0x00);         // tie with 0 -> even 0
  EXPECT_EQ(fmt::e4m3_encode(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0x01);
  EXPECT_EQ(fmt::e4m3_encode(3.0f * std::ldexp(1.0f, -10)), 0x02);  // tie 1/2 -> even 2
  EXPECT_EQ(fmt::e4m3_encode(5.0f * std::ldexp(1.0f, -10)), 0x02);  // tie 2/3 -> even 2
  EXPECT_EQ(fmt::e4m3_encode(7.0f * std::ldexp(1.0f, -10)), 0x04);  // tie 3/4 -> even 4
  EXPECT_EQ(fmt::e4m3_encode(std::ldexp(1.0f, -6) * (15.0f / 16.0f)), 0x08);  // rounds up into the first normal
  EXPECT_EQ(fmt::e4m3_encode(std::nextafter(std::ldexp(1.0f, -6) * (15.0f / 16.0f), 0.0f)), 0x07);
  EXPECT_EQ(fmt::e4m3_encode(std::ldexp(1.0f, -6)), 0x08);
  EXPECT_EQ(fmt::e4m3_encode(std::nextafter(std::ldexp(1.0f, -6), 0.0f)), 0x08);
  EXPECT_EQ(fmt::e4m3_encode(1e-30f), 0x00);
  EXPECT_EQ(fmt::e4m3_encode(-1e-30f), 0x80);
  EXPECT_EQ(fmt::e4m3_encode(float_of(1u)), 0x00);
  EXPECT_EQ(fmt::e4m3_encode(-std::ldexp(1.0f, -9)), 0x81);
}

TEST(E4M3, NaN) {
  EXPECT_EQ(fmt::e4m3_encode(kNaN), 0x7F);
  EXPECT_EQ(fmt::e4m3_encode(float_of(0x7F800001u)), 0x7F);
  // Documented policy: the NaN keeps the input's sign.
  EXPECT_EQ(fmt::e4m3_encode(-kNaN), 0xFF);
}

TEST(E4M3, RandomValuesMatchExhaustiveSearch) {
  const uint64_t seed = test_seed(102);
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  for (int i = 0; i < 100000; ++i) {
    // Exponents from deep subnormal to beyond saturation.
    const float x = static_cast<float>((rng.coin() ? -1.0 : 1.0) * std::ldexp(1.0 + rng.uniform(), static_cast<int>(rng.range(-14, 10))));
    ASSERT_EQ(fmt::e4m3_encode(x), model::e4m3_nearest(x)) << "x = " << x << " bits " << std::hex << bits_of(x);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// BF16
// ---------------------------------------------------------------------------------------------------------------
TEST(BF16, TiesToEven) {
  EXPECT_EQ(fmt::bf16_encode(float_of(0x3F808000u)), 0x3F80);  // 1 + 2^-8: tie, even down
  EXPECT_EQ(fmt::bf16_encode(float_of(0x3F818000u)), 0x3F82);  // tie, even up
  EXPECT_EQ(fmt::bf16_encode(float_of(0x3F808001u)), 0x3F81);  // just above tie
  EXPECT_EQ(fmt::bf16_encode(float_of(0x3F817FFFu)), 0x3F81);  // just below tie
  EXPECT_EQ(fmt::bf16_encode(float_of(0xBF808000u)), 0xBF80);
  EXPECT_EQ(fmt::bf16_encode(float_of(0xBF818000u)), 0xBF82);
  EXPECT_EQ(fmt::bf16_encode(float_of(0x3FFF8000u)), 0x4000);  // carry into the exponent
  EXPECT_EQ(fmt::bf16_encode(1.0f), 0x3F80);
  EXPECT_EQ(fmt::bf16_encode(-2.5f), 0xC020);
}

TEST(BF16, Overflow) {
  EXPECT_EQ(fmt::bf16_encode(float_of(0x7F7F7FFFu)), 0x7F7F);  // below the tie with 2^128: max finite
  EXPECT_EQ(fmt::bf16_encode(float_of(0x7F7F8000u)), 0x7F80);  // tie -> even = inf
  EXPECT_EQ(fmt::bf16_encode(FLT_MAX), 0x7F80);
  EXPECT_EQ(fmt::bf16_encode(-FLT_MAX), 0xFF80);
  EXPECT_EQ(fmt::bf16_encode(kInf), 0x7F80);
  EXPECT_EQ(fmt::bf16_encode(-kInf), 0xFF80);
}

bool bf16_is_nan(uint16_t h) { return (h & 0x7F80) == 0x7F80 && (h & 0x007F) != 0; }

TEST(BF16, NaNStaysNaN) {
  // Payloads only in the low 16 bits would truncate to inf: the encoder must keep them NaN.
  for (uint32_t u : {0x7FC00000u, 0x7F800001u, 0x7F80FFFFu, 0x7FFFFFFFu, 0xFFC00000u, 0xFF800001u}) {
    const uint16_t h = fmt::bf16_encode(float_of(u));
    EXPECT_TRUE(bf16_is_nan(h)) << std::hex << u << " -> " << h;
    EXPECT_EQ(h >> 15, u >> 31) << std::hex << u;
  }
  EXPECT_TRUE(std::isnan(fmt::bf16_decode(0x7FC0)));
}

TEST(BF16, Subnormals) {
  EXPECT_EQ(fmt::bf16_encode(float_of(0x00008000u)), 0x0000);  // tie with 0 -> even
  EXPECT_EQ(fmt::bf16_encode(float_of(0x00008001u)), 0x0001);
  EXPECT_EQ(fmt::bf16_encode(float_of(0x00018000u)), 0x0002);  // tie 1/2 -> even 2
  EXPECT_EQ(fmt::bf16_encode(float_of(0x00010000u)), 0x0001);
  EXPECT_EQ(fmt::bf16_encode(float_of(0x00000001u)), 0x0000);
  EXPECT_EQ(fmt::bf16_encode(float_of(0x80000001u)), 0x8000);
  EXPECT_EQ(fmt::bf16_encode(float_of(0x007FFFFFu)), 0x0080);  // rounds up to the smallest normal
  EXPECT_EQ(fmt::bf16_encode(-0.0f), 0x8000);
  EXPECT_EQ(bits_of(fmt::bf16_decode(0x0001)), 0x00010000u);
}

TEST(BF16, DecodeIsUpperHalfOfFloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float v = fmt::bf16_decode(static_cast<uint16_t>(h));
    ASSERT_EQ(bits_of(v) >> 16, h);
    if (!bf16_is_nan(static_cast<uint16_t>(h))) {
      ASSERT_EQ(bits_of(v) & 0xFFFF, 0u);
      ASSERT_EQ(fmt::bf16_encode(v), h);
    }
  }
}

TEST(BF16, RandomFloatsMatchNearestSearch) {
  const uint64_t seed = test_seed(103);
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = rng.u32();
    if ((u & 0x7F800000u) == 0x7F800000u) continue;  // inf/nan tested above
    if (i % 4 == 0) u = (u & 0xFFFF0000u) | 0x8000u;  // force exact ties often
    const float f = float_of(u);
    ASSERT_EQ(fmt::bf16_encode(f), model::bf16_nearest(f)) << std::hex << "bits " << u;
  }
}

TEST(BF16F64, AgreesWithFloatPathOnFloats) {
  const uint64_t seed = test_seed(104);
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = rng.u32();
    if (i % 4 == 0) u = (u & 0xFFFF0000u) | 0x8000u;
    if (i % 7 == 0) u &= 0x807FFFFFu;  // float subnormals
    const float f = float_of(u);
    if (std::isnan(f)) continue;
    ASSERT_EQ(fmt::bf16_encode_f64(static_cast<double>(f)), fmt::bf16_encode(f)) << std::hex << "bits " << u;
  }
  for (float f : {0.0f, -0.0f, 1.0f, FLT_MAX, -FLT_MAX, kInf, -kInf, float_of(1u), float_of(0x7F7F8000u)})
    EXPECT_EQ(fmt::bf16_encode_f64(static_cast<double>(f)), fmt::bf16_encode(f)) << f;
}

TEST(BF16F64, SingleRoundingFromDouble) {
  // 1 + 2^-8 + 2^-40: a float-first rounding would land on the tie and go down to 1; one rounding goes up.
  EXPECT_EQ(fmt::bf16_encode_f64(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)), 0x3F81);
  EXPECT_EQ(fmt::bf16_encode_f64(1.0 + std::ldexp(1.0, -8) - std::ldexp(1.0, -40)), 0x3F80);
  EXPECT_EQ(fmt::bf16_encode_f64(1.0 + std::ldexp(1.0, -8)), 0x3F80);
  EXPECT_EQ(fmt::bf16_encode_f64(-(1.0 + 3.0 * std::ldexp(1.0, -8))), 0xBF82);
  // Below the float range: the BF16 subnormal quantum is 2^-133.
  EXPECT_EQ(fmt::bf16_encode_f64(std::ldexp(1.0, -133)), 0x0001);
  EXPECT_EQ(fmt::bf16_encode_f64(std::ldexp(1.0, -134)), 0x0000);  // tie with 0 -> even
  EXPECT_EQ(fmt::bf16_encode_f64(std::ldexp(1.0, -134) + std::ldexp(1.0, -170)), 0x0001);
  EXPECT_EQ(fmt::bf16_encode_f64(3.0 * std::ldexp(1.0, -134)), 0x0002);
  EXPECT_EQ(fmt::bf16_encode_f64(1e-300), 0x0000);
  EXPECT_EQ(fmt::bf16_encode_f64(-1e-300), 0x8000);
  // Overflow to inf.
  const double max_bf16 = std::ldexp(255.0, 120);
  EXPECT_EQ(fmt::bf16_encode_f64(max_bf16), 0x7F7F);
  EXPECT_EQ(fmt::bf16_encode_f64(max_bf16 + std::ldexp(1.0, 119) - std::ldexp(1.0, 80)), 0x7F7F);
  EXPECT_EQ(fmt::bf16_encode_f64(max_bf16 + std::ldexp(1.0, 119)), 0x7F80);  // tie -> even (inf)
  EXPECT_EQ(fmt::bf16_encode_f64(1e39), 0x7F80);
  EXPECT_EQ(fmt::bf16_encode_f64(-1e300), 0xFF80);
  EXPECT_EQ(fmt::bf16_encode_f64(std::numeric_limits<double>::infinity()), 0x7F80);
  EXPECT_EQ(fmt::bf16_encode_f64(-std::numeric_limits<double>::infinity()), 0xFF80);
  EXPECT_TRUE(bf16_is_nan(fmt::bf16_encode_f64(std::numeric_limits<double>::quiet_NaN())));
}

TEST(BF16F64, RandomDoublesMatchExactNearest) {
  const uint64_t seed = test_seed(105);
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  for (int i = 0; i < 100000; ++i) {
    const double x = (rng.coin() ? -1.0 : 1.0) * std::ldexp(1.0 + rng.uniform(), static_cast<int>(rng.range(-126, 126)));
    const uint16_t h = fmt::bf16_encode_f64(x);
    // The result and its neighbours: the result must be at least as near as either neighbour.
    const double v = bf16_value(h);
    ASSERT_EQ(std::signbit(v), std::signbit(x));
    const double up = bf16_value(static_cast<uint16_t>(h + 1)), down = bf16_value(static_cast<uint16_t>(h - 1));
    const double d = std::fabs(v - x);
    ASSERT_LE(d, std::fabs(up - x)) << x;
    ASSERT_LE(d, std::fabs(down - x)) << x;
    if (d == std::fabs(up - x) || d == std::fabs(down - x)) {
      ASSERT_EQ(h & 1, 0) << "tie not to even: " << x;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Nibble packing
// ---------------------------------------------------------------------------------------------------------------
TEST(Nibbles, ElementTwoIInLowBits) {
  const std::vector<uint8_t> codes = {0x1, 0x2, 0x3, 0x4, 0xF, 0x0, 0x8, 0x7};
  const std::vector<uint8_t> packed = fmt::pack_e2m1(codes);
  EXPECT_EQ(packed, (std::vector<uint8_t>{0x21, 0x43, 0x0F, 0x78}));
  EXPECT_EQ(fmt::unpack_e2m1({0xA5, 0x3C}, 4), (std::vector<uint8_t>{0x5, 0xA, 0xC, 0x3}));
  EXPECT_EQ(fmt::unpack_e2m1({0xA5, 0x3C}, 3), (std::vector<uint8_t>{0x5, 0xA, 0xC}));
}

TEST(Nibbles, RoundTrip) {
  const uint64_t seed = test_seed(106);
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  std::vector<uint8_t> codes(4096), bytes(2048);
  for (auto& c : codes) c = static_cast<uint8_t>(rng.range(0, 15));
  for (auto& b : bytes) b = static_cast<uint8_t>(rng.range(0, 255));
  EXPECT_EQ(fmt::unpack_e2m1(fmt::pack_e2m1(codes), 4096), codes);
  EXPECT_EQ(fmt::pack_e2m1(fmt::unpack_e2m1(bytes, 4096)), bytes);
}

TEST(Nibbles, Errors) {
  EXPECT_TRUE(throws_svdq([] { fmt::pack_e2m1({1, 2, 3}); }, svdq::ErrorCode::InvalidArgument, {"'codes'"}));
  EXPECT_TRUE(throws_svdq([] { fmt::unpack_e2m1({1, 2}, 5); }, svdq::ErrorCode::InvalidArgument, {"'count'"}));
  EXPECT_TRUE(throws_svdq([] { fmt::unpack_e2m1({1, 2}, -1); }, svdq::ErrorCode::InvalidArgument, {"'count'"}));
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// In-kernel dequantization: E2M1 codes -> FP16 bit patterns (kernels/common/smxx_nvfp4_codec.cuh)
// ---------------------------------------------------------------------------------------------------------------
namespace {
// FP16 bits -> value (normals and subnormals; E2M1 placements never reach Inf/NaN).
double f16_value(uint32_t h) {
  const int e = (h >> 10) & 31;
  const double m = h & 1023;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000u) ? -v : v;
}
// The placement written per element, independently of the kernel's bit tricks: element i of the word goes to
// half (i / 4) of word i % 4, sign to bit 15 of the half, magnitude bits to 11:9.
void reference_f16x2_bits(uint32_t q, uint32_t* out) {
  for (int j = 0; j < 4; ++j) out[j] = 0;
  for (int i = 0; i < 8; ++i) {
    const uint32_t c = (q >> (4 * i)) & 15u;
    out[i % 4] |= (((c & 8u) << 12) | ((c & 7u) << 9)) << (16 * (i / 4));
  }
}
}  // namespace

TEST(DequantBits, EveryCodeAtEveryPositionIsE2M1TimesTwoToMinus14) {
  const uint64_t seed = test_seed(107);
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  for (int pos = 0; pos < 8; ++pos)
    for (uint32_t code = 0; code < 16; ++code)
      for (int trial = 0; trial < 64; ++trial) {
        uint32_t q = static_cast<uint32_t>(rng.range(0, 0xFFFF)) | (static_cast<uint32_t>(rng.range(0, 0xFFFF)) << 16);
        q = (q & ~(15u << (4 * pos))) | (code << (4 * pos));
        uint32_t out[4];
        svdq_k::e2m1x8_f16x2_bits(q, out);
        const uint32_t half = (out[pos % 4] >> (16 * (pos / 4))) & 0xFFFFu;
        ASSERT_EQ(f16_value(half), std::ldexp(static_cast<double>(model::e2m1_value(static_cast<int>(code))), -14))
            << "code " << code << " at position " << pos << " of 0x" << std::hex << q;
        ASSERT_EQ(half & 0x71FFu, 0u) << "stray bits for code " << code;  // only sign and bits 11:9 may be set
      }
}

// Code word `trial` of the DequantBits tests: the 16 words with one code in every position first, then random ones.
static uint32_t trial_code_word(Rng& rng, int trial) {
  if (trial < 16) return 0x11111111u * static_cast<uint32_t>(trial);
  return static_cast<uint32_t>(rng.range(0, 0xFFFF)) | (static_cast<uint32_t>(rng.range(0, 0xFFFF)) << 16);
}

TEST(DequantBits, OneWordOfFourIsTheFullPlacementsWord) {
  // The decode program's lanes build only word j = lane % 4 of e2m1x8_f16x2_bits; it must be that word, bit for bit.
  const uint64_t seed = test_seed(109);
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  for (int trial = 0; trial < (1 << 20); ++trial) {
    const uint32_t q = trial_code_word(rng, trial);
    uint32_t out[4];
    svdq_k::e2m1x8_f16x2_bits(q, out);
    for (uint32_t j = 0; j < 4; ++j)
      ASSERT_EQ(svdq_k::e2m1x8_f16x2_word(q, j), out[j]) << "word " << j << " of 0x" << std::hex << q;
  }
}

TEST(DequantBits, AllWordsMatchThePerElementPlacement) {
  // Exhaustive: every one of the 2^32 code words, split over the hardware threads. The reference adds each
  // element's placement from a table built by reference_f16x2_bits on single-element words.
  uint32_t table[8][16];
  for (int i = 0; i < 8; ++i)
    for (uint32_t c = 0; c < 16; ++c) {
      uint32_t out[4];
      reference_f16x2_bits(c << (4 * i), out);
      table[i][c] = out[i % 4];
    }
  const unsigned workers = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  std::vector<uint64_t> mismatches(workers, 0);
  std::vector<uint32_t> first_bad(workers, 0);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < workers; ++t)
    pool.emplace_back([&, t] {
      const uint64_t lo = (1ull << 32) * t / workers, hi = (1ull << 32) * (t + 1) / workers;
      for (uint64_t q64 = lo; q64 < hi; ++q64) {
        const uint32_t q = static_cast<uint32_t>(q64);
        uint32_t got[4], want[4] = {0, 0, 0, 0};
        svdq_k::e2m1x8_f16x2_bits(q, got);
        for (int i = 0; i < 8; ++i) want[i % 4] |= table[i][(q >> (4 * i)) & 15u];
        const bool bad = got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3];
        if (bad && mismatches[t]++ == 0) first_bad[t] = q;
      }
    });
  for (auto& th : pool) th.join();
  for (unsigned t = 0; t < workers; ++t)
    EXPECT_EQ(mismatches[t], 0u) << "first mismatching word 0x" << std::hex << first_bad[t];
}

TEST(DequantBits, PairsHalfWordIsTwoRotationWords) {
  // The PAIRS consumers build quad lane c's two fragment registers of a K group from one word: the high bytes of
  // e2m1x4_f16_hibytes(q, 23 + 4a) (a = c & 1) split by two byte permutes. They must be e2m1x8_f16x2_word(q, a) (the
  // pair (a, a + 4)) and e2m1x8_f16x2_word(q, a + 2) (the pair (a + 2, a + 6)), bit for bit, and so the values the
  // FP16 copy holds at those K positions.
  const uint64_t seed = test_seed(127);
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  for (int trial = 0; trial < (1 << 20); ++trial) {
    const uint32_t q = trial_code_word(rng, trial);
    for (uint32_t a = 0; a < 2; ++a) {
      const uint32_t v = svdq_k::e2m1x4_f16_hibytes(q, 23u + 4u * a);
      ASSERT_EQ(svdq_k::hibytes_pair_lo(v), svdq_k::e2m1x8_f16x2_word(q, a)) << "half " << a << " of 0x" << std::hex << q;
      ASSERT_EQ(svdq_k::hibytes_pair_hi(v), svdq_k::e2m1x8_f16x2_word(q, a + 2)) << "half " << a << " of 0x" << std::hex << q;
    }
  }
}

TEST(DequantBits, EveryFiniteScaleTimes128IsTheBitTricksFp16Value) {
  // Two ways the programs turn an E4M3 scale code into the FP16 multiplier s x 2^7: the bit trick of
  // scale_half2_x128 (code bits placed into FP16's fields, giving s x 2^-8, then x 2^15) and, in the lean ws builds,
  // the hardware conversion cvt.rn.f16x2.e4m3x2 (exact by definition: every E4M3 value is an FP16 value) then x 2^7.
  // Both are the same FP16 value exactly when s x 2^7 is an FP16 value and the trick's s x 2^-8 is s x 2^-8; this
  // checks that for every finite code (the conversion instruction itself needs a GPU: the GPU tests compare the
  // lean builds' outputs with every other build's, bit for bit).
  std::map<double, uint32_t> f16;  // every finite FP16 value -> its bits (+0 for 0)
  for (uint32_t h = 0; h < 0x10000u; ++h)
    if (((h >> 10) & 31u) != 31u && h != 0x8000u) f16.emplace(f16_value(h), h);
  int finite = 0;
  for (int code = 0; code < 256; ++code) {
    const double s = model::e4m3_value(code);
    if (std::isnan(s)) continue;
    ++finite;
    const double want = s * 128.0;
    ASSERT_EQ(f16.count(want), 1u) << "s x 2^7 of code " << code << " is not an FP16 value";
    const uint32_t raw = ((static_cast<uint32_t>(code) & 0x7Fu) << 7) | ((static_cast<uint32_t>(code) & 0x80u) << 8);
    ASSERT_EQ(f16_value(raw) * 32768.0, want) << "bit trick for code " << code;
    ASSERT_LE(std::fabs(want), 57344.0);
  }
  EXPECT_EQ(finite, 254);
}
