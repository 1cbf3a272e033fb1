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

// The rows i of `keys` whose sample is in `shard` (shard_of(keys[i], shard.count) ==
// shard.index), ascending: what a sharded build and a CacheWriter of a shard keep; every row
// for the whole split (count 0).
std::vector<int64_t> rows_of_shard(const std::vector<Key>& keys, const SplitShard& shard);

// The shard an options struct asks for (BuildOptions::shard, WriterOptions::shard): count 0 for
// the whole split, else 1..most, and then index 0..count-1 ("the shard index must be in 0..1,
// not 2"); its rule "" or kShardRule. Throws InvalidArgument (recycle/errors.h).
void check_shard(const SplitShard& shard, int64_t most);

// The SplitShard written in the manifest for the shard `requested` (its index and count) of a
// split of `split_samples` samples: the rule kShardRule; the whole split (SplitShard{}) when its
// count is 0.
SplitShard split_shard(const SplitShard& requested, int64_t split_samples);

// "the whole split", or "shard 1 of 3" (with " by rule 'R'" for another rule than kShardRule):
// a split's shard in messages and recycle-inspect's text.
std::string shard_words(const SplitShard& shard);

}  // namespace recycle
