// The SPEC §2 tail-split rule: reference values, H200's 132 SMs, edges and errors.
#include <gtest/gtest.h>

#include "router/schedule.hpp"
#include "svdq/error.hpp"

using svdq::router::TailSplit;
using svdq::router::tailsplit_units;

TEST(TailSplit, SpecReferenceValues) {
  // 6889 x 12288 with 256x256 pair tiles: 27 x 48 = 1296 tiles.
  EXPECT_EQ(tailsplit_units(6889, 12288, 148), (TailSplit{1296, 1296, 1296, 1}));  // 74 pairs: tail 38, 76 > 74
  EXPECT_EQ(tailsplit_units(6889, 12288, 152), (TailSplit{1296, 1300, 1292, 2}));  // 76 pairs: tail 4 -> 8 units
}

TEST(TailSplit, H200With132Sms) {
  // 66 pairs. Worked by hand:
  // 6889x12288: 1296 = 19*66 + 42, 84 > 66 -> whole.
  EXPECT_EQ(tailsplit_units(6889, 12288, 132), (TailSplit{1296, 1296, 1296, 1}));
  // 4096x3072: 16*12 = 192 = 2*66 + 60 -> whole.
  EXPECT_EQ(tailsplit_units(4096, 3072, 132), (TailSplit{192, 192, 192, 1}));
  // 9216x3072: 36*12 = 432 = 6*66 + 36, 72 > 66 -> whole.
  EXPECT_EQ(tailsplit_units(9216, 3072, 132), (TailSplit{432, 432, 432, 1}));
  // 16384x12288: 64*48 = 3072 = 46*66 + 36 -> whole.
  EXPECT_EQ(tailsplit_units(16384, 12288, 132), (TailSplit{3072, 3072, 3072, 1}));
  // 6912x3072: 27*12 = 324 = 4*66 + 60 -> whole; 6912x12288: 27*48 = 1296 (as above).
  EXPECT_EQ(tailsplit_units(6912, 3072, 132), (TailSplit{324, 324, 324, 1}));
  // 16384x3072: 64*12 = 768 = 11*66 + 42 -> whole.
  EXPECT_EQ(tailsplit_units(16384, 3072, 132), (TailSplit{768, 768, 768, 1}));
  // 8960x3072: 35*12 = 420 = 6*66 + 24, 48 <= 66 -> split: 396 whole + 48 half units.
  EXPECT_EQ(tailsplit_units(8960, 3072, 132), (TailSplit{420, 444, 396, 2}));
}

TEST(TailSplit, EdgesOfTheRule) {
  // Exactly divisible: no tail.
  EXPECT_EQ(tailsplit_units(256 * 66, 256, 132), (TailSplit{66, 66, 66, 1}));
  // 2 * tail == P splits; 2 * tail == P + 2 does not.
  EXPECT_EQ(tailsplit_units(256 * 99, 256, 132), (TailSplit{99, 132, 66, 2}));   // tail 33, 66 <= 66
  EXPECT_EQ(tailsplit_units(256 * 100, 256, 132), (TailSplit{100, 100, 100, 1}));  // tail 34, 68 > 66
  // Fewer tiles than pairs: the whole grid is tail.
  EXPECT_EQ(tailsplit_units(1, 1, 132), (TailSplit{1, 2, 0, 2}));
  // Odd SM counts use floor(sm/2) pairs.
  EXPECT_EQ(tailsplit_units(256 * 4, 256, 9), (TailSplit{4, 4, 4, 1}));
}

TEST(TailSplit, BadArgumentsAndOverflow) {
  EXPECT_THROW(tailsplit_units(0, 256, 132), svdq::Error);
  EXPECT_THROW(tailsplit_units(256, -1, 132), svdq::Error);
  EXPECT_THROW(tailsplit_units(256, 256, 1), svdq::Error);
  EXPECT_THROW(tailsplit_units(256, 256, 132, 0, 256), svdq::Error);
  try {
    tailsplit_units(INT64_MAX, INT64_MAX, 132, 1, 1);
    FAIL() << "overflow not detected";
  } catch (const svdq::Error& e) {
    EXPECT_EQ(e.code(), svdq::ErrorCode::Overflow);
  }
}
