// The writes of ActivationStore::Batch and ActivationStore::write, which only the writers of
// cache/split_writer.h may make, for tests that build a store's state by hand (a store's own
// tests, corrupt or old caches, records put or deleted under a reader), and a staged write's
// batch (a test that swaps in another store's).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "cache/activation_store.h"
#include "cache/split_writer.h"
#include "recycle/status.h"

namespace recycle {

class StoreTestAccess {
 public:
  static void put_record(ActivationStore::Batch& b, const Key& key, std::string_view record) {
    b.put_record(key, record);
  }
  static void delete_record(ActivationStore::Batch& b, const Key& key) { b.delete_record(key); }
  static void put_blob(ActivationStore::Batch& b, const std::string& name, std::string_view bytes) {
    b.put_blob(name, bytes);
  }
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
  static Status write(ActivationStore& store, ActivationStore::Batch* b, bool sync = false) {
    return store.write(b, sync);
  }
  static Status write_unlogged(ActivationStore& store, ActivationStore::Batch* b) {
    return store.write_unlogged(b);
  }
  static void set_batch(StagedWrite& w, std::unique_ptr<ActivationStore::Batch> b) {
    w.batch_ = std::move(b);
  }
};

}  // namespace recycle
