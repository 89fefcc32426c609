// The 128x4 swizzled scale layout (SPEC §1): format::swizzled_offset against an independent construction that walks
// the tiles in memory order, bijection, swizzle/unswizzle round trips, zero padding, scale_shape and its errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "../test_util.hpp"
#include "format/nvfp4.hpp"

namespace {

using namespace svdq_test;
namespace fmt = svdq::format;

// The layout written as the memory walk it describes: 128-row x 4-column tiles in row-of-tiles order; inside a
// tile, 512 consecutive bytes ordered by (r % 32), then ((r % 128) / 32), then (c % 4). Returns, for every padded
// (r, c), the byte it lands on: [Rp * Cp] row-major.
std::vector<int64_t> layout_by_walk(int64_t rp, int64_t cp) {
  std::vector<int64_t> where(static_cast<size_t>(rp * cp), -1);
  int64_t byte = 0;
  for (int64_t tile_r = 0; tile_r < rp / 128; ++tile_r)
    for (int64_t tile_c = 0; tile_c < cp / 4; ++tile_c)
      for (int64_t r32 = 0; r32 < 32; ++r32)
        for (int64_t band = 0; band < 4; ++band)
          for (int64_t c4 = 0; c4 < 4; ++c4) {
            const int64_t r = tile_r * 128 + band * 32 + r32, c = tile_c * 4 + c4;
            where[static_cast<size_t>(r * cp + c)] = byte++;
          }
  return where;
}

int64_t pad(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

const int64_t kRows[] = {1, 44, 127, 128, 129, 1000};
const int64_t kCols[] = {1, 2, 3, 4, 5, 192, 768};

TEST(ScaleLayout, OffsetMatchesTileWalk) {
  for (int64_t rows : kRows)
    for (int64_t cols : kCols) {
      const int64_t rp = pad(rows, 128), cp = pad(cols, 4);
      const std::vector<int64_t> where = layout_by_walk(rp, cp);
      for (int64_t r = 0; r < rp; ++r)
        for (int64_t c = 0; c < cp; ++c)
          ASSERT_EQ(fmt::swizzled_offset(r, c, cp), where[static_cast<size_t>(r * cp + c)])
              << "rows " << rows << " cols " << cols << " at (" << r << ", " << c << ")";
    }
}

TEST(ScaleLayout, SpotValuesFromTheFormula) {
  // cols_padded = 8: two column tiles per row of tiles.
  EXPECT_EQ(fmt::swizzled_offset(0, 0, 8), 0);
  EXPECT_EQ(fmt::swizzled_offset(0, 3, 8), 3);
  EXPECT_EQ(fmt::swizzled_offset(32, 0, 8), 4);
  EXPECT_EQ(fmt::swizzled_offset(1, 0, 8), 16);
  EXPECT_EQ(fmt::swizzled_offset(0, 4, 8), 512);
  EXPECT_EQ(fmt::swizzled_offset(128, 0, 8), 1024);
  EXPECT_EQ(fmt::swizzled_offset(127, 7, 8), 512 + 31 * 16 + 3 * 4 + 3);
  EXPECT_EQ(fmt::swizzled_offset(129, 5, 8), 1024 + 512 + 16 + 1);
}

TEST(ScaleLayout, OffsetIsABijectionOntoThePaddedBuffer) {
  for (int64_t rows : kRows)
    for (int64_t cols : kCols) {
      const int64_t rp = pad(rows, 128), cp = pad(cols, 4);
      std::vector<int> hits(static_cast<size_t>(rp * cp), 0);
      for (int64_t r = 0; r < rp; ++r)
        for (int64_t c = 0; c < cp; ++c) {
          const int64_t off = fmt::swizzled_offset(r, c, cp);
          ASSERT_GE(off, 0);
          ASSERT_LT(off, rp * cp) << "rows " << rows << " cols " << cols;
          ++hits[static_cast<size_t>(off)];
        }
      for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << "byte " << i << " rows " << rows << " cols " << cols;
    }
}

TEST(ScaleLayout, SwizzleRoundTripAndZeroPadding) {
  const uint64_t seed = test_seed(201);
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  for (int64_t rows : kRows)
    for (int64_t cols : kCols) {
      const int64_t rp = pad(rows, 128), cp = pad(cols, 4);
      std::vector<uint8_t> linear(static_cast<size_t>(rows * cols));
      for (auto& b : linear) b = static_cast<uint8_t>(rng.range(1, 255));  // never 0, so padding is recognisable
      const std::vector<uint8_t> sw = fmt::swizzle_scales(linear, rows, cols);
      ASSERT_EQ(static_cast<int64_t>(sw.size()), rp * cp);
      // Every logical byte where the walk says, everything else zero.
      const std::vector<int64_t> where = layout_by_walk(rp, cp);
      std::vector<uint8_t> expect(static_cast<size_t>(rp * cp), 0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          expect[static_cast<size_t>(where[static_cast<size_t>(r * cp + c)])] = linear[static_cast<size_t>(r * cols + c)];
      ASSERT_EQ(sw, expect) << "rows " << rows << " cols " << cols;
      int64_t zeros = 0;
      for (uint8_t b : sw) zeros += (b == 0);
      EXPECT_EQ(zeros, rp * cp - rows * cols) << "rows " << rows << " cols " << cols;
      EXPECT_EQ(fmt::unswizzle_scales(sw, rows, cols), linear) << "rows " << rows << " cols " << cols;
    }
}

TEST(ScaleLayout, UnswizzleIgnoresPadding) {
  const int64_t rows = 129, cols = 5, rp = 256, cp = 8;
  std::vector<uint8_t> linear(rows * cols);
  for (size_t i = 0; i < linear.size(); ++i) linear[i] = static_cast<uint8_t>(i * 7 + 1);
  std::vector<uint8_t> sw = fmt::swizzle_scales(linear, rows, cols);
  const std::vector<int64_t> where = layout_by_walk(rp, cp);
  for (int64_t r = 0; r < rp; ++r)
    for (int64_t c = 0; c < cp; ++c)
      if (r >= rows || c >= cols) sw[static_cast<size_t>(where[static_cast<size_t>(r * cp + c)])] = 0xEE;
  EXPECT_EQ(fmt::unswizzle_scales(sw, rows, cols), linear);
}

TEST(ScaleShape, PaddingValues) {
  struct Case {
    int64_t rows, k, cols, rp, cp;
  };
  const Case cases[] = {{1, 16, 1, 128, 4},         {1, 32, 2, 128, 4},          {44, 48, 3, 128, 4},
                        {127, 64, 4, 128, 4},       {128, 80, 5, 128, 8},        {129, 3072, 192, 256, 192},
                        {1000, 12288, 768, 1024, 768}, {256, 96, 6, 256, 8},     {0, 16, 1, 0, 4}};
  for (const Case& c : cases) {
    const fmt::ScaleShape s = fmt::scale_shape(c.rows, c.k);
    EXPECT_EQ(s.rows, c.rows) << c.rows << "x" << c.k;
    EXPECT_EQ(s.cols, c.cols) << c.rows << "x" << c.k;
    EXPECT_EQ(s.rows_padded, c.rp) << c.rows << "x" << c.k;
    EXPECT_EQ(s.cols_padded, c.cp) << c.rows << "x" << c.k;
    EXPECT_EQ(s.bytes(svdq::ScaleLayout::Swizzled128x4), c.rp * c.cp) << c.rows << "x" << c.k;
    EXPECT_EQ(s.bytes(svdq::ScaleLayout::Linear), c.rows * c.cols) << c.rows << "x" << c.k;
  }
}

TEST(ScaleShape, Errors) {
  using svdq::ErrorCode;
  for (int64_t k : {0, -16, 8, 24, 40, 1}) {
    EXPECT_TRUE(throws_svdq([&] { fmt::scale_shape(16, k); }, ErrorCode::InvalidArgument, {"'k'"})) << "k = " << k;
  }
  EXPECT_TRUE(throws_svdq([] { fmt::scale_shape(-1, 16); }, ErrorCode::InvalidArgument, {"'rows'"}));
  // Rp * Cp or the row padding itself overflows int64: an Overflow error, never a wrapped size.
  EXPECT_TRUE(throws_svdq([] { fmt::scale_shape(INT64_MAX, 16); }, ErrorCode::Overflow, {}));
  EXPECT_TRUE(throws_svdq([] { fmt::scale_shape(int64_t(1) << 40, int64_t(1) << 40); }, ErrorCode::Overflow, {}));
}

TEST(ScaleLayout, SwizzleSizeErrors) {
  using svdq::ErrorCode;
  EXPECT_TRUE(throws_svdq([] { fmt::swizzle_scales(std::vector<uint8_t>(10), 3, 4); }, ErrorCode::InvalidArgument,
                          {"'linear'"}));
  EXPECT_TRUE(throws_svdq([] { fmt::unswizzle_scales(std::vector<uint8_t>(511), 1, 4); }, ErrorCode::InvalidArgument,
                          {"'swizzled'"}));
}

}  // namespace
