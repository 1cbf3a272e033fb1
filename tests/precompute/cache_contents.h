// What a built cache holds, read back whole for comparisons in the build tests: its manifest,
// the "train" split's index and every record by key.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cache/activation_store.h"
#include "tests/test_util.h"

namespace recycle::testing {

struct CacheContents {
  Manifest manifest;
  std::vector<IndexEntry> index;
  std::map<std::string, std::string> records;  // key hex -> record bytes
};

// Opens `cache` read-only, reads it whole and checks its files' checksums (test failures,
// not exceptions, when something is wrong).
inline CacheContents read_cache(const std::string& cache) {
  CacheContents c;
  std::unique_ptr<ActivationStore> store;
  StoreOptions so;
  so.read_only = true;
  EXPECT_OK(ActivationStore::open(cache, so, &store));
  if (!store) return c;
  EXPECT_OK(store->read_manifest(&c.manifest));
  EXPECT_OK(store->read_index("train", &c.index));
  EXPECT_OK(store->for_each_record([&](const Key& k, std::string_view bytes) {
    c.records[k.to_hex()] = std::string(bytes);
    return true;
  }));
  EXPECT_OK(store->verify_files());
  return c;
}

}  // namespace recycle::testing
