// The shard rule (cache/shard_rule.h): each sample in one shard, by its key alone.
#include "cache/shard_rule.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "recycle/key.h"

namespace {

using recycle::Key;

std::vector<Key> keys_of(int n) {
  std::vector<Key> keys;
  for (int i = 0; i < n; ++i) keys.push_back(Key{static_cast<uint64_t>(i) * 7919, 3});
  return keys;
}

// Every row in exactly one shard's rows, ascending, each the shard shard_of names; no shard
// empty for 1,000 keys of 2..8 shards (a spread, not one shard for all).
TEST(ShardRule, RowsOfTheShardsPartitionTheKeysAsShardOfSays) {
  const std::vector<Key> keys = keys_of(1000);
  for (int64_t count = 1; count <= 8; ++count) {
    std::vector<int> seen(keys.size(), 0);
    for (int64_t index = 0; index < count; ++index) {
      const std::vector<int64_t> rows = recycle::rows_of_shard(keys, {index, count, "", 0});
      EXPECT_FALSE(rows.empty()) << index << " of " << count;
      for (size_t j = 0; j < rows.size(); ++j) {
        if (j > 0) EXPECT_LT(rows[j - 1], rows[j]);
        EXPECT_EQ(recycle::shard_of(keys[static_cast<size_t>(rows[j])], count), index);
        ++seen[static_cast<size_t>(rows[j])];
      }
    }
    for (int s : seen) EXPECT_EQ(s, 1);
  }
  EXPECT_EQ(recycle::rows_of_shard(keys_of(3), recycle::SplitShard{}),
            (std::vector<int64_t>{0, 1, 2}));  // the whole split
}

TEST(ShardRule, SplitShardNamesTheRuleOrTheWholeSplit) {
  const recycle::SplitShard whole = recycle::split_shard({}, 100);
  EXPECT_FALSE(whole.sharded());
  EXPECT_EQ(whole, recycle::SplitShard{});
  EXPECT_EQ(recycle::shard_words(whole), "the whole split");
  const recycle::SplitShard one = recycle::split_shard({1, 3, "", 0}, 100);
  EXPECT_TRUE(one.sharded());
  EXPECT_EQ(one.rule, recycle::kShardRule);
  EXPECT_EQ(one.split_samples, 100);
  EXPECT_EQ(recycle::shard_words(one), "shard 1 of 3");
}

}  // namespace
