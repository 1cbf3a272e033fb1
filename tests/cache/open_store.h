// open_store: the tests' way to open a cache's store, as its writer or read-only, a failure
// reported by the test that asked (and a null store returned).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cache/activation_store.h"
#include "cache/store_options.h"

namespace recycle::testing {

inline std::unique_ptr<ActivationStore> open_store(const std::string& dir,
                                                   bool read_only = false) {
  StoreOptions options;
  options.read_only = read_only;
  std::unique_ptr<ActivationStore> store;
  const Status st = ActivationStore::open(dir, options, &store);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return store;
}

}  // namespace recycle::testing
