// The sampler: one seeded global permutation per epoch, shared out by rank.
#include "engine/data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <vector>

using recycle::grouped_by_length;
using recycle::Sampler;

TEST(Sampler, AloneVisitsEverySampleOncePerEpoch) {
  const Sampler s(10, /*shuffle=*/true, 3);
  std::vector<int64_t> order = s.epoch_order(0);
  EXPECT_EQ(s.samples_per_rank(), 10);
  std::sort(order.begin(), order.end());
  std::vector<int64_t> all(10);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(order, all);
}

TEST(Sampler, UnshuffledIsInOrder) {
  const Sampler s(5, /*shuffle=*/false, 3);
  EXPECT_EQ(s.epoch_order(7), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(Sampler, SameSeedAndEpochSameOrderOtherwiseAnother) {
  const Sampler a(100, true, 1), b(100, true, 1), c(100, true, 2);
  EXPECT_EQ(a.epoch_order(0), b.epoch_order(0));
  EXPECT_NE(a.epoch_order(0), a.epoch_order(1));
  EXPECT_NE(a.epoch_order(0), c.epoch_order(0));
}

// Ranks take disjoint parts of one permutation: together, with the padding, every sample.
TEST(Sampler, RanksShareOneEpochWithoutOverlap) {
  for (int world : {2, 3, 4}) {
    for (int64_t size : {12, 13, 14, 15}) {
      std::map<int64_t, int> seen;
      int64_t per_rank = -1;
      for (int rank = 0; rank < world; ++rank) {
        const Sampler s(size, true, 9, rank, world);
        const std::vector<int64_t> order = s.epoch_order(4);
        EXPECT_EQ(static_cast<int64_t>(order.size()), (size + world - 1) / world);
        if (per_rank >= 0) {
          EXPECT_EQ(static_cast<int64_t>(order.size()), per_rank);
        }
        per_rank = static_cast<int64_t>(order.size());
        for (int64_t i : order) ++seen[i];
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), size) << world << " ranks, " << size;
      const int64_t padded = per_rank * world - size;
      int64_t twice = 0;
      for (const auto& [i, times] : seen) {
        EXPECT_LE(times, 2);
        twice += times - 1;
      }
      EXPECT_EQ(twice, padded) << world << " ranks, " << size;
    }
  }
}

// Interleaving the ranks' orders gives back the single-process permutation, so W ranks with
// batch B step through the same samples as one rank with batch W*B.
TEST(Sampler, RanksInterleaveToTheGlobalOrder) {
  const Sampler alone(12, true, 5);
  const Sampler r0(12, true, 5, 0, 2), r1(12, true, 5, 1, 2);
  const auto g = alone.epoch_order(2), a = r0.epoch_order(2), b = r1.epoch_order(2);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i], g[2 * i]);
    EXPECT_EQ(b[i], g[2 * i + 1]);
  }
}

TEST(Sampler, RefusesABadRankOrATooSmallSplit) {
  EXPECT_THROW(Sampler(10, true, 0, 2, 2), std::invalid_argument);
  EXPECT_THROW(Sampler(10, true, 0, -1, 2), std::invalid_argument);
  EXPECT_THROW(Sampler(10, true, 0, 0, 0), std::invalid_argument);
  EXPECT_THROW(Sampler(1, true, 0, 0, 2), std::invalid_argument);
}

TEST(Sampler, AShardsEpochTakesTheSamplesAskedPaddedWithItsOwnOrCut) {
  recycle::Sampler s(5, /*shuffle=*/true, 7);
  s.set_epoch_samples(8);
  EXPECT_EQ(s.samples_per_rank(), 8);
  for (int64_t epoch : {0, 1}) {
    const std::vector<int64_t> order = s.epoch_order(epoch);
    ASSERT_EQ(order.size(), 8u);
    // The shuffled shard whole, then its first samples again.
    std::vector<int64_t> first(order.begin(), order.begin() + 5);
    std::vector<int64_t> sorted = first;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(std::vector<int64_t>(order.begin() + 5, order.end()),
              std::vector<int64_t>(first.begin(), first.begin() + 3));
  }
  s.set_epoch_samples(5);  // the shard: nothing added
  EXPECT_EQ(s.epoch_order(0).size(), 5u);
  // Fewer than the shard: the first of each epoch's order, another subset each epoch, and
  // every sample within a few epochs.
  s.set_epoch_samples(3);
  std::set<int64_t> seen;
  std::set<std::vector<int64_t>> subsets;
  for (int64_t epoch = 0; epoch < 8; ++epoch) {
    const std::vector<int64_t> order = s.epoch_order(epoch);
    ASSERT_EQ(order.size(), 3u);
    EXPECT_EQ(std::set<int64_t>(order.begin(), order.end()).size(), 3u) << "a sample twice";
    seen.insert(order.begin(), order.end());
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    subsets.insert(sorted);
  }
  EXPECT_EQ(seen.size(), 5u);
  EXPECT_GT(subsets.size(), 1u);
  EXPECT_THROW(s.set_epoch_samples(0), std::invalid_argument);
  recycle::Sampler shared(10, true, 7, 1, 2);
  EXPECT_THROW(shared.set_epoch_samples(10), std::invalid_argument);
}

TEST(GroupedByLength, SortsEachMegabatchLongestFirstAndKeepsTheSamples) {
  // 1,000 samples of lengths 1..37, batches of 4: megabatches of min(50, 1000 / 16) = 50 batches.
  std::vector<int64_t> lengths(1000);
  for (size_t i = 0; i < lengths.size(); ++i) lengths[i] = 1 + static_cast<int64_t>(i * 7919 % 37);
  const std::vector<int64_t> order = Sampler(1000, true, 3).epoch_order(0);
  const std::vector<int64_t> grouped = grouped_by_length(order, lengths, 4);
  std::vector<int64_t> a = order, b = grouped;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);                                          // the same samples, each once
  EXPECT_EQ(lengths[static_cast<size_t>(grouped[0])], 37);  // the longest first
  // Within each megabatch (200 samples) lengths never grow; batches pad little.
  int64_t padding = 0, padding_before = 0;
  for (size_t m = 0; m < grouped.size(); m += 200) {
    for (size_t i = m + 1; i < std::min(grouped.size(), m + 200); ++i) {
      EXPECT_GE(lengths[static_cast<size_t>(grouped[i - 1])],
                lengths[static_cast<size_t>(grouped[i])]);
    }
  }
  for (size_t i = 0; i < grouped.size(); i += 4) {
    int64_t longest = 0, longest_before = 0;
    for (size_t k = i; k < i + 4; ++k) {
      longest = std::max(longest, lengths[static_cast<size_t>(grouped[k])]);
      longest_before = std::max(longest_before, lengths[static_cast<size_t>(order[k])]);
    }
    for (size_t k = i; k < i + 4; ++k) {
      padding += longest - lengths[static_cast<size_t>(grouped[k])];
      padding_before += longest_before - lengths[static_cast<size_t>(order[k])];
    }
  }
  EXPECT_LT(padding * 5, padding_before) << padding << " against " << padding_before;
  // The same epoch order, the same grouping; a view's index takes its sample's length.
  EXPECT_EQ(grouped_by_length(order, lengths, 4), grouped);
  EXPECT_EQ(grouped_by_length({1000 + 5, 3}, lengths, 4).size(), 2u);
  EXPECT_THROW(grouped_by_length(order, lengths, 0), std::invalid_argument);
}
