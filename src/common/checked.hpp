// Checked signed 64-bit arithmetic for shapes, strides and sizes: overflow and division by zero throw
// svdq::Error(Overflow) naming what was being computed, never wrap around.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "svdq/error.hpp"

namespace svdq::checked {

[[noreturn]] void fail(const char* op, int64_t a, int64_t b, std::string_view what);

inline int64_t mul(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail("*", a, b, what);
  return r;
}
inline int64_t add(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail("+", a, b, what);
  return r;
}
inline int64_t sub(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) fail("-", a, b, what);
  return r;
}
inline int64_t div(int64_t a, int64_t b, std::string_view what) {
  if (b == 0 || (a == INT64_MIN && b == -1)) fail("/", a, b, what);
  return a / b;
}
inline int64_t ceil_div(int64_t a, int64_t b, std::string_view what) {
  if (b <= 0 || a < 0) fail("ceil_div", a, b, what);
  return a / b + (a % b != 0 ? 1 : 0);
}
inline int64_t round_up(int64_t a, int64_t b, std::string_view what) {
  return mul(ceil_div(a, b, what), b, what);
}

}  // namespace svdq::checked
