// The SPEC §2 tail-split rule: reference values, H200's 132 SMs, edges and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/smxx_stream_k.cuh"
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

// The stream-K tail of the persistent sm_90a program (kernels/common/smxx_stream_k.cuh): every (tile, K tile) unit
// walked exactly once; a tile cut at most once, its head [0, x) by CTA b - 1 as that CTA's first segment, its tail
// [x, KT) by CTA b as its last; then the whole tiles b + i G; the stream-K ranges within one K tile of each other.
namespace {
void check_stream_k(int tiles, int ctas, int kt) {
  SCOPED_TRACE("tiles " + std::to_string(tiles) + ", ctas " + std::to_string(ctas) + ", kt " + std::to_string(kt));
  const svdq_k::SkSchedule s = svdq_k::SkSchedule::make(tiles, ctas, kt);
  std::vector<int> seen(static_cast<size_t>(tiles) * kt, 0);
  std::vector<int> head_of(tiles, -1), tail_of(tiles, -1);
  long long min_sk = 1LL << 60, max_sk = 0;
  for (int b = 0; b < ctas; ++b) {
    long long sk_units = 0;
    const int n = s.segments(b), h0 = s.has_head(b) ? 1 : 0;
    EXPECT_EQ(n, h0 + s.whole(b) + s.sk_whole(b) + (s.has_tail(b) ? 1 : 0));
    for (int i = 0; i < n; ++i) {
      int t = -1, kb = -1, ke = -1;
      s.segment(b, i, t, kb, ke);
      ASSERT_GE(t, 0);
      ASSERT_LT(t, tiles);
      ASSERT_LE(0, kb);
      ASSERT_LT(kb, ke);
      ASSERT_LE(ke, kt);
      for (int k = kb; k < ke; ++k) ++seen[static_cast<size_t>(t) * kt + k];
      if (i >= h0 && i < h0 + s.whole(b)) {
        EXPECT_EQ(t, b + (i - h0) * ctas);
        EXPECT_TRUE(kb == 0 && ke == kt);
      } else {
        sk_units += ke - kb;
      }
      if (ke < kt) {  // a head: kb = 0, the CTA's first segment
        EXPECT_EQ(kb, 0);
        EXPECT_EQ(i, 0);
        EXPECT_TRUE(s.has_head(b));
        head_of[t] = b;
      }
      if (kb > 0) {  // a tail: the CTA's last segment
        EXPECT_EQ(i, n - 1);
        EXPECT_TRUE(s.has_tail(b));
        tail_of[t] = b;
      }
    }
    if (s.units > 0) {
      min_sk = std::min(min_sk, sk_units);
      max_sk = std::max(max_sk, sk_units);
      EXPECT_GE(sk_units, kt);
    }
  }
  for (size_t u = 0; u < seen.size(); ++u) ASSERT_EQ(seen[u], 1) << "unit " << u;
  for (int t = 0; t < tiles; ++t) {
    EXPECT_EQ(head_of[t] < 0, tail_of[t] < 0) << "tile " << t;
    if (head_of[t] >= 0) {
      EXPECT_EQ(tail_of[t], head_of[t] + 1) << "tile " << t;
    }
  }
  if (s.units > 0) {
    EXPECT_LE(max_sk - min_sk, 1);
  }
}
}  // namespace

TEST(StreamK, H200SuiteGrids) {
  // 128 x 256 tiles, K tiles of 64.
  const svdq_k::SkSchedule a = svdq_k::SkSchedule::make(864, 132, 48);  // 9216 x 3072 x 3072: 6.55 rounds
  EXPECT_EQ(a.dp, 660);                                                 // 5 rounds whole
  EXPECT_EQ(a.units, 204LL * 48);                                       // 1.55 rounds by K tiles
  EXPECT_EQ(a.whole(0), 5);
  EXPECT_EQ(a.segments(0), 1 + 5 + 1);  // units [0, 74): the head of 661 (26 K tiles), 5 whole, 660 whole
  int t, kb, ke;
  a.segment(0, 0, t, kb, ke);
  EXPECT_EQ(t, 661);
  EXPECT_EQ(kb, 0);
  EXPECT_EQ(ke, 26);
  a.segment(0, 1, t, kb, ke);
  EXPECT_EQ(t, 0);
  a.segment(0, 6, t, kb, ke);
  EXPECT_EQ(t, 660);
  EXPECT_EQ(kb, 0);
  EXPECT_EQ(ke, 48);
  EXPECT_EQ(a.segments(1), 1 + 5 + 1 + 1);  // units [74, 148): head of 663 (4), 5 whole, 662 whole, tail of 661
  a.segment(1, 0, t, kb, ke);
  EXPECT_EQ(t, 663);
  EXPECT_EQ(ke, 4);
  a.segment(1, 6, t, kb, ke);
  EXPECT_EQ(t, 662);
  EXPECT_EQ(ke, 48);
  a.segment(1, 7, t, kb, ke);
  EXPECT_EQ(t, 661);
  EXPECT_EQ(kb, 26);
  EXPECT_EQ(ke, 48);
  const svdq_k::SkSchedule b = svdq_k::SkSchedule::make(384, 132, 48);  // 4096 x 3072 x 3072: 2.91 rounds
  EXPECT_EQ(b.dp, 132);
  EXPECT_EQ(b.units, 252LL * 48);
  // Whole rounds, or less than one: every tile whole.
  for (const auto& [tiles, kt] : {std::pair{1584, 48}, std::pair{132, 48}, std::pair{100, 48}, std::pair{264, 192}}) {
    const svdq_k::SkSchedule w = svdq_k::SkSchedule::make(tiles, 132, kt);
    EXPECT_EQ(w.dp, tiles);
    EXPECT_EQ(w.units, 0);
    EXPECT_EQ(w.segments(0), (tiles + 131) / 132);
  }
  EXPECT_EQ(svdq_k::SkSchedule::make(200, 132, 1).units, 0);  // one K tile: nothing to split
  // CTA ranges past 32 bits (133 x 200 x 2^20 K tiles: no whole round, all 200 tiles stream-K): whole tiles; just
  // inside them (133 x 200 x 160 000 < 2^32): stream-K, the ranges as in 64 bits.
  const svdq_k::SkSchedule big = svdq_k::SkSchedule::make(200, 132, 1 << 20);
  EXPECT_EQ(big.dp, 200);
  EXPECT_EQ(big.units, 0);
  const svdq_k::SkSchedule near = svdq_k::SkSchedule::make(200, 132, 160000);
  EXPECT_EQ(near.dp, 0);
  EXPECT_EQ(near.units, 200 * 160000);
  for (int b = 0; b <= 132; ++b) EXPECT_EQ(near.lo(b), static_cast<long long>(b) * 200 * 160000 / 132) << "CTA " << b;
}

TEST(StreamK, EveryUnitOnceOverManyGrids) {
  for (int ctas : {1, 2, 7, 132})
    for (int kt : {1, 2, 3, 17, 48, 192})
      for (int tiles : {1, 2, 5, ctas - 1, ctas, ctas + 1, 2 * ctas - 1, 2 * ctas + 1, 3 * ctas + ctas / 2, 7 * ctas + 5})
        if (tiles >= 1) check_stream_k(tiles, ctas, kt);
}
