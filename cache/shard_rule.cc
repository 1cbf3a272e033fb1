#include "cache/shard_rule.h"

#include <xxhash.h>

#include "base/range_check.h"
#include "recycle/errors.h"

namespace recycle {

int64_t shard_of(const Key& key, int64_t count) {
  char bytes[Key::kBytes];
  key.to_bytes(bytes);
  return static_cast<int64_t>(XXH3_64bits(bytes, sizeof bytes) % static_cast<uint64_t>(count));
}

std::vector<int64_t> rows_of_shard(const std::vector<Key>& keys, const SplitShard& shard) {
  std::vector<int64_t> rows;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!shard.sharded() || shard_of(keys[i], shard.count) == shard.index) {
      rows.push_back(static_cast<int64_t>(i));
    }
  }
  return rows;
}

void check_shard(const SplitShard& shard, int64_t most) {
  check_range("the shard count", shard.count, int64_t{0}, most);
  if (shard.sharded()) check_range("the shard index", shard.index, int64_t{0}, shard.count - 1);
  if (!shard.rule.empty() && shard.rule != kShardRule) {
    throw InvalidArgument("the shard rule must be '" + std::string(kShardRule) + "', not '" +
                          shard.rule + "'");
  }
}

SplitShard split_shard(const SplitShard& requested, int64_t split_samples) {
  SplitShard s;
  if (!requested.sharded()) return s;
  s.index = requested.index;
  s.count = requested.count;
  s.rule = kShardRule;
  s.split_samples = split_samples;
  return s;
}

std::string shard_words(const SplitShard& s) {
  if (!s.sharded()) return "the whole split";
  return "shard " + std::to_string(s.index) + " of " + std::to_string(s.count) +
         (s.rule == kShardRule ? std::string() : " by rule '" + s.rule + "'");
}

}  // namespace recycle
