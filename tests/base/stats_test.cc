// Tests for base/stats.h: the median of odd, even, unsorted, single and empty lists.
#include "base/stats.h"

#include <gtest/gtest.h>

#include <vector>

TEST(Stats, MedianOfOddCountIsTheMiddleValue) {
  EXPECT_DOUBLE_EQ(recycle::median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(recycle::median({5.0, -1.0, 4.0, 100.0, 0.5}), 4.0);
}

TEST(Stats, MedianOfEvenCountIsTheMeanOfTheMiddleTwo) {
  EXPECT_DOUBLE_EQ(recycle::median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_DOUBLE_EQ(recycle::median({1.0, 1.0}), 1.0);
}

TEST(Stats, MedianOfOneAndOfNone) {
  EXPECT_DOUBLE_EQ(recycle::median({7.25}), 7.25);
  EXPECT_DOUBLE_EQ(recycle::median({}), 0.0);
}

TEST(Stats, MedianLeavesTheCallersVectorAsItWas) {
  const std::vector<double> v = {3.0, 1.0, 2.0};
  EXPECT_DOUBLE_EQ(recycle::median(v), 2.0);
  EXPECT_EQ(v, (std::vector<double>{3.0, 1.0, 2.0}));
}
