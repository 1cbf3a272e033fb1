#include "cache/shard_rule.h"

#include <xxhash.h>

namespace recycle {

int64_t shard_of(const Key& key, int64_t count) {
  char bytes[Key::kBytes];
  key.to_bytes(bytes);
  return static_cast<int64_t>(XXH3_64bits(bytes, sizeof bytes) % static_cast<uint64_t>(count));
}

}  // namespace recycle
