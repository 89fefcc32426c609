// The kernel-active measure of an operation: the union of its kernels' intervals (bench/timer.hpp).
#include <gtest/gtest.h>

#include "bench/timer.hpp"

namespace sb = svdq::bench;

TEST(KernelActiveTime, DisjointKernelsAddUp) {
  EXPECT_EQ(sb::union_length({{100, 130}, {200, 260}}), 90u);  // the gap between them does not count
  EXPECT_EQ(sb::union_length({{200, 260}, {100, 130}}), 90u);  // any order
}

TEST(KernelActiveTime, OverlapCountsOnce) {
  // A programmatic dependent launch: the second kernel starts before the first ends.
  EXPECT_EQ(sb::union_length({{100, 150}, {120, 300}}), 200u);
  EXPECT_EQ(sb::union_length({{100, 300}, {120, 150}}), 200u);  // nested
  EXPECT_EQ(sb::union_length({{100, 150}, {150, 170}}), 70u);   // touching
  EXPECT_EQ(sb::union_length({{0, 10}, {5, 20}, {30, 40}, {35, 36}}), 30u);
}

TEST(KernelActiveTime, EmptyInputs) {
  EXPECT_EQ(sb::union_length({}), 0u);
  EXPECT_EQ(sb::union_length({{50, 50}}), 0u);
  EXPECT_EQ(sb::union_length({{50, 50}, {10, 20}}), 10u);
}
