// Checked signed 64-bit arithmetic for shapes, strides and sizes: overflow and division by zero throw
// svdq::Error(Overflow) naming what was being computed, never wrap around.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "svdq/error.hpp"

namespace svdq::checked {

// What is being computed, named in the error: up to four pieces joined only when something overflows, so that a
// call on the hot path builds no string (e.g. {fn, ": numel of '", name, "'"}).
struct What {
  std::string_view p[4];
  What(const char* s) : p{s} {}                // NOLINT(google-explicit-constructor): a name is a plain string
  What(std::string_view s) : p{s} {}           // NOLINT(google-explicit-constructor)
  What(const std::string& s) : p{s} {}         // NOLINT(google-explicit-constructor)
  What(std::string_view a, std::string_view b, std::string_view c = {}, std::string_view d = {}) : p{a, b, c, d} {}
  std::string str() const { return std::string(p[0]).append(p[1]).append(p[2]).append(p[3]); }
};

[[noreturn]] void fail(const char* op, int64_t a, int64_t b, const What& what);

inline int64_t mul(int64_t a, int64_t b, const What& what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail("*", a, b, what);
  return r;
}
inline int64_t add(int64_t a, int64_t b, const What& what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail("+", a, b, what);
  return r;
}
inline int64_t sub(int64_t a, int64_t b, const What& what) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) fail("-", a, b, what);
  return r;
}
inline int64_t div(int64_t a, int64_t b, const What& what) {
  if (b == 0 || (a == INT64_MIN && b == -1)) fail("/", a, b, what);
  return a / b;
}
inline int64_t ceil_div(int64_t a, int64_t b, const What& what) {
  if (b <= 0 || a < 0) fail("ceil_div", a, b, what);
  return a / b + (a % b != 0 ? 1 : 0);
}
inline int64_t round_up(int64_t a, int64_t b, const What& what) {
  return mul(ceil_div(a, b, what), b, what);
}

}  // namespace svdq::checked
