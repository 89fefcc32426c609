// An independent model of the NVFP4 numerics (SPEC §1) for the tests: value tables and exhaustive nearest-value
// searches in double, written without the library's bit tricks. Slow but obviously right.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "test_util.hpp"

namespace svdq_test::model {

inline const float kE2M1Mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

inline float e2m1_value(int code) { return (code & 8) ? -kE2M1Mag[code & 7] : kE2M1Mag[code & 7]; }

// Nearest E2M1 code by search over the 8 magnitudes, ties to the even code, saturating at 6; NaN -> 0; the sign is
// copied from the input (so -0.1 -> 0x8).
inline uint8_t e2m1_nearest(float x) {
  if (std::isnan(x)) return 0;
  const double a = std::fabs(static_cast<double>(x));
  int best = 0;
  double best_d = a;
  for (int c = 1; c < 8; ++c) {
    const double d = std::fabs(a - kE2M1Mag[c]);
    if (d < best_d || (d == best_d && c % 2 == 0)) best = c, best_d = d;
  }
  if (a > 6.0) best = 7;
  return static_cast<uint8_t>((std::signbit(x) ? 8 : 0) | best);
}

// E4M3 (e4m3fn) value by the textbook formula: sign * 2^(e-7) * (1 + m/8), subnormal sign * 2^-6 * m/8, 0x7F NaN.
inline double e4m3_value(int code) {
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  const int e = (code >> 3) & 0xF, m = code & 7;
  if (e == 0xF && m == 7) return std::numeric_limits<double>::quiet_NaN();
  if (e == 0) return sign * std::ldexp(1.0, -6) * (m / 8.0);
  return sign * std::ldexp(1.0, e - 7) * (1.0 + m / 8.0);
}

// Nearest E4M3 code by search over 0x00..0x7E, ties to the even code, satfinite; NaN -> 0x7F | sign.
inline uint8_t e4m3_nearest(float x) {
  const bool neg = std::signbit(x);
  if (std::isnan(x)) return neg ? 0xFF : 0x7F;
  const double a = std::fabs(static_cast<double>(x));
  int best = 0;
  double best_d = a;
  for (int c = 1; c <= 0x7E; ++c) {
    const double d = std::fabs(a - e4m3_value(c));
    if (d < best_d || (d == best_d && c % 2 == 0)) best = c, best_d = d;
  }
  return static_cast<uint8_t>((neg ? 0x80 : 0) | best);
}

// Nearest BF16 of a float (finite or not) by comparing the two truncation neighbours in double, ties to even.
inline uint16_t bf16_nearest(float f) {
  if (std::isnan(f)) return static_cast<uint16_t>((bits_of(f) >> 16) | 0x40);
  if (std::isinf(f)) return static_cast<uint16_t>(bits_of(f) >> 16);
  const uint16_t lo = static_cast<uint16_t>(bits_of(f) >> 16);
  const uint16_t hi = static_cast<uint16_t>(lo + 1);
  const double x = std::fabs(static_cast<double>(f));
  const double dl = x - std::fabs(static_cast<double>(bf16_value(lo)));
  const double vh = (hi & 0x7FFF) == 0x7F80 ? std::ldexp(1.0, 128) : std::fabs(static_cast<double>(bf16_value(hi)));
  const double dh = vh - x;
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1) ? hi : lo;
}

// SPEC §1 quantizer of one row-major bf16 matrix [m, k] with linear [m, k/16] scales, each float step written out
// in the SPEC's order: amax (NaN ignored); s = RN_e4m3(gs * (amax / 6)); q = RN_e2m1(x * (gs / float(s))), 0 if s == 0.
struct ModelQuant {
  std::vector<uint8_t> q;   // [m, k/2]
  std::vector<uint8_t> sf;  // [m, k/16] linear
};
inline ModelQuant quantize(const std::vector<uint16_t>& x, int64_t m, int64_t k, float gs) {
  ModelQuant out;
  out.q.assign(static_cast<size_t>(m * k / 2), 0);
  out.sf.assign(static_cast<size_t>(m * k / 16), 0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < k / 16; ++c) {
      float amax = 0.0f;
      for (int i = 0; i < 16; ++i) {
        const float v = bf16_value(x[static_cast<size_t>(r * k + c * 16 + i)]);
        if (!std::isnan(v) && std::fabs(v) > amax) amax = std::fabs(v);
      }
      const volatile float a6 = amax / 6.0f;
      const volatile float target = gs * a6;
      const uint8_t s = e4m3_nearest(target);
      out.sf[static_cast<size_t>(r * (k / 16) + c)] = s;
      const float sv = static_cast<float>(e4m3_value(s));
      if (sv == 0.0f) continue;
      const volatile float mul = gs / sv;
      for (int i = 0; i < 16; ++i) {
        const int64_t e = c * 16 + i;
        const volatile float y = bf16_value(x[static_cast<size_t>(r * k + e)]) * mul;
        const uint8_t code = e2m1_nearest(y);
        out.q[static_cast<size_t>(r * (k / 2) + e / 2)] |= static_cast<uint8_t>(code << (4 * (e % 2)));
      }
    }
  return out;
}

}  // namespace svdq_test::model
