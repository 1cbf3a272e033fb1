// A small activation cache for the batch-source tests: n records of shape 2x3 (record i holds
// i*10 + 0..5) and a complete "train" split of n samples in order, with labels i % 2.
#pragma once

#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "cache/activation_store.h"
#include "cache/record.h"
#include "tests/cache/store_test_access.h"
#include "tests/test_util.h"

namespace recycle::testing {

inline std::unique_ptr<ActivationStore> write_small_cache(const std::string& dir, int n) {
  std::unique_ptr<ActivationStore> store;
  EXPECT_OK(ActivationStore::open(dir, StoreOptions(), &store));
  ActivationStore::Batch batch(*store);
  for (int i = 0; i < n; ++i) {
    std::vector<float> v(6);
    std::iota(v.begin(), v.end(), static_cast<float>(i * 10));
    recycle::StoreTestAccess::put_record(batch, {1, static_cast<uint64_t>(i)},
                                         encode_record(Codec::kFp32, {{v.data(), {2, 3}}}));
    recycle::StoreTestAccess::put_index(batch, "train", i, {{1, static_cast<uint64_t>(i)}, i % 2});
  }
  Manifest m;
  m.codec = recycle::Codec::kFp32;
  m.record_shapes = {{2, 3}};
  m.class_names = {"even", "odd"};
  m.splits["train"] = {"test data", n, n, true};
  recycle::StoreTestAccess::put_manifest(batch, m);
  EXPECT_OK(recycle::StoreTestAccess::write(*store, &batch));
  return store;
}

}  // namespace recycle::testing
