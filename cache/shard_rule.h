// The rule that puts a sample in a shard of a sharded build (recycle-build --sharded): by its
// content key alone, so that every rank finds its samples without asking another, and a
// sample's records (its views too) live in one shard. Its name is written in every shard's
// manifest (SplitShard::rule, recycle/manifest.h), so that a cache of another rule is refused.
// Pure functions; thread safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "recycle/key.h"
#include "recycle/manifest.h"  // SplitShard

namespace recycle {

// SplitShard::rule's word for shard_of.
inline constexpr char kShardRule[] = "xxh3_64(key) % count";

// The shard of `count` (>= 1) that holds the sample with content key `key`: the XXH3-64 of
// the key's 16 bytes (Key::to_bytes) modulo count. A hash of the key rather than the key
// itself, so that a keyer whose keys are not uniform (an id's) still spreads the samples.
int64_t shard_of(const Key& key, int64_t count);

// The rows i of `keys` whose sample is in shard `index` of `count` (shard_of(keys[i], count)
// == index), ascending: what a sharded build and a CacheWriter of a shard keep.
std::vector<int64_t> rows_of_shard(const std::vector<Key>& keys, int64_t index, int64_t count);

// The SplitShard (by kShardRule) of a shard `index` of `count` of a split of `split_samples`
// samples; the whole split (SplitShard{}) when count is 0.
SplitShard split_shard(int64_t index, int64_t count, int64_t split_samples);

// "the whole split", or "shard 1 of 3" (with " by rule 'R'" for another rule than kShardRule):
// a split's shard in messages and recycle-inspect's text.
std::string shard_words(const SplitShard& shard);

}  // namespace recycle
