// The index and manifest writes of ActivationStore::Batch, which only the writers of
// cache/split_writer.h may make, for tests that build a store's state by hand (a store's own
// tests, corrupt or old caches).
#pragma once

#include <cstdint>
#include <string>

#include "cache/activation_store.h"
#include "tests/cache/store_test_access.h"

namespace recycle {

class StoreTestAccess {
 public:
  static void put_index(ActivationStore::Batch& b, const std::string& split, int64_t position,
                        const IndexEntry& entry) {
    b.put_index(split, position, entry);
  }
  static void truncate_index(ActivationStore::Batch& b, const std::string& split, int64_t from) {
    b.truncate_index(split, from);
  }
  static void put_manifest(ActivationStore::Batch& b, const Manifest& manifest) {
    b.put_manifest(manifest);
  }
};

}  // namespace recycle
