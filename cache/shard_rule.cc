#include "cache/shard_rule.h"

#include <xxhash.h>

namespace recycle {

int64_t shard_of(const Key& key, int64_t count) {
  char bytes[Key::kBytes];
  key.to_bytes(bytes);
  return static_cast<int64_t>(XXH3_64bits(bytes, sizeof bytes) % static_cast<uint64_t>(count));
}

std::vector<int64_t> rows_of_shard(const std::vector<Key>& keys, int64_t index, int64_t count) {
  std::vector<int64_t> rows;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (shard_of(keys[i], count) == index) rows.push_back(static_cast<int64_t>(i));
  }
  return rows;
}

SplitShard split_shard(int64_t index, int64_t count, int64_t split_samples) {
  SplitShard s;
  if (count == 0) return s;
  s.index = index;
  s.count = count;
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
