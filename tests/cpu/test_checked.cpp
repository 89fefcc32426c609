// Checked 64-bit shape arithmetic (src/common/checked.hpp): exact results in range, svdq::Error(Overflow) naming the
// quantity at the INT64 limits and for division by zero, never a wrapped value.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "../test_util.hpp"
#include "common/checked.hpp"

namespace {

using namespace svdq_test;
namespace chk = svdq::checked;
using svdq::ErrorCode;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

#define EXPECT_OVERFLOW(expr, what) \
  EXPECT_TRUE(throws_svdq([&] { (void)(expr); }, ErrorCode::Overflow, {what})) << #expr

TEST(Checked, ResultsInRange) {
  EXPECT_EQ(chk::mul(3, 7, "x"), 21);
  EXPECT_EQ(chk::mul(-3, 7, "x"), -21);
  EXPECT_EQ(chk::mul(int64_t(1) << 31, int64_t(1) << 31, "x"), int64_t(1) << 62);
  EXPECT_EQ(chk::mul(kMax, 1, "x"), kMax);
  EXPECT_EQ(chk::mul(kMin, 1, "x"), kMin);
  EXPECT_EQ(chk::mul(-1, kMax, "x"), -kMax);
  EXPECT_EQ(chk::mul(0, kMin, "x"), 0);
  EXPECT_EQ(chk::add(kMax - 5, 5, "x"), kMax);
  EXPECT_EQ(chk::add(kMin, kMax, "x"), -1);
  EXPECT_EQ(chk::sub(kMin + 5, 5, "x"), kMin);
  EXPECT_EQ(chk::sub(-1, kMax, "x"), kMin);
  EXPECT_EQ(chk::div(kMin, 1, "x"), kMin);
  EXPECT_EQ(chk::div(7, -2, "x"), -3);
  EXPECT_EQ(chk::div(kMax, kMax, "x"), 1);
  EXPECT_EQ(chk::ceil_div(0, 5, "x"), 0);
  EXPECT_EQ(chk::ceil_div(1, 5, "x"), 1);
  EXPECT_EQ(chk::ceil_div(10, 5, "x"), 2);
  EXPECT_EQ(chk::ceil_div(11, 5, "x"), 3);
  EXPECT_EQ(chk::ceil_div(kMax, 1, "x"), kMax);
  EXPECT_EQ(chk::ceil_div(kMax, 2, "x"), (kMax - 1) / 2 + 1);
  EXPECT_EQ(chk::ceil_div(kMax, kMax, "x"), 1);
  EXPECT_EQ(chk::round_up(0, 128, "x"), 0);
  EXPECT_EQ(chk::round_up(1, 128, "x"), 128);
  EXPECT_EQ(chk::round_up(128, 128, "x"), 128);
  EXPECT_EQ(chk::round_up(129, 128, "x"), 256);
  EXPECT_EQ(chk::round_up(kMax - 127, 128, "x"), kMax - 127);  // kMax - 127 = 2^63 - 128 is a multiple of 128
}

TEST(Checked, MulOverflow) {
  EXPECT_OVERFLOW(chk::mul(kMax, 2, "rows times cols"), "rows times cols");
  EXPECT_OVERFLOW(chk::mul(int64_t(1) << 32, int64_t(1) << 31, "numel of 'a'"), "numel of 'a'");
  EXPECT_OVERFLOW(chk::mul(kMin, -1, "negated"), "negated");
  EXPECT_OVERFLOW(chk::mul(-1, kMin, "negated"), "negated");
  EXPECT_OVERFLOW(chk::mul(kMin, 2, "twice min"), "twice min");
  EXPECT_OVERFLOW(chk::mul(int64_t(1) << 62, int64_t(1) << 40, "M*N"), "M*N");
  EXPECT_OVERFLOW(chk::mul(3037000500LL, 3037000500LL, "square"), "square");  // just over sqrt(2^63)
  EXPECT_EQ(chk::mul(3037000499LL, 3037000499LL, "square"), 3037000499LL * 3037000499LL);
}

TEST(Checked, AddSubOverflow) {
  EXPECT_OVERFLOW(chk::add(kMax, 1, "workspace bytes"), "workspace bytes");
  EXPECT_OVERFLOW(chk::add(kMin, -1, "offset"), "offset");
  EXPECT_OVERFLOW(chk::add(kMax / 2 + 1, kMax / 2 + 1, "sum"), "sum");
  EXPECT_OVERFLOW(chk::sub(kMin, 1, "difference"), "difference");
  EXPECT_OVERFLOW(chk::sub(kMax, -1, "difference"), "difference");
  EXPECT_OVERFLOW(chk::sub(0, kMin, "negation"), "negation");
}

TEST(Checked, DivisionByZeroAndOverflow) {
  EXPECT_OVERFLOW(chk::div(5, 0, "tiles per row"), "tiles per row");
  EXPECT_OVERFLOW(chk::div(0, 0, "tiles per row"), "tiles per row");
  EXPECT_OVERFLOW(chk::div(kMin, -1, "quotient"), "quotient");
  EXPECT_OVERFLOW(chk::ceil_div(5, 0, "ceil rows"), "ceil rows");
  EXPECT_OVERFLOW(chk::ceil_div(5, -1, "ceil rows"), "ceil rows");
  EXPECT_OVERFLOW(chk::ceil_div(-1, 5, "ceil rows"), "ceil rows");
  EXPECT_OVERFLOW(chk::round_up(5, 0, "padded"), "padded");
}

TEST(Checked, RoundUpOverflow) {
  EXPECT_OVERFLOW(chk::round_up(kMax, 128, "padded rows"), "padded rows");
  EXPECT_OVERFLOW(chk::round_up(kMax - 126, 128, "padded rows"), "padded rows");
  EXPECT_OVERFLOW(chk::round_up(kMax, 2, "padded"), "padded");
}

TEST(Checked, MessageNamesOperandsAndOperation) {
  try {
    chk::mul(int64_t(1) << 62, 4, "scale buffer size");
    FAIL() << "no throw";
  } catch (const svdq::Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.code(), ErrorCode::Overflow);
    EXPECT_NE(msg.find("scale buffer size"), std::string::npos) << msg;
    EXPECT_NE(msg.find("4611686018427387904"), std::string::npos) << msg;  // the operand 2^62
    EXPECT_NE(msg.find("overflow"), std::string::npos) << msg;
  }
  try {
    chk::div(12, 0, "blocks");
    FAIL() << "no throw";
  } catch (const svdq::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("blocks"), std::string::npos) << msg;
    EXPECT_NE(msg.find("zero"), std::string::npos) << msg;
  }
}

}  // namespace
