// StoreOptions: how an ActivationStore is opened, and how record files are made (their
// compression must match the store's records; see cache/record_file_writer.h).
#pragma once

#include <cstddef>
#include <string>

#include "recycle/formats.h"  // Compression

namespace recycle {

struct StoreOptions {
  bool read_only = false;               // open with DB::OpenForReadOnly
  bool create_if_missing = true;        // writers only
  size_t block_cache_bytes = 64 << 20;  // LRU block cache shared by the column families
  Compression compression = Compression::kNone;  // the records'
  // Threads that read the parts of one multi_get (cache/read_pool.h), the calling thread one
  // of them; 1 reads a batch with one MultiGet on the calling thread. A record read cold from
  // a virtio disk with 8 in flight came at 3 times the rate of one at a time (docs/scale.md).
  // The environment's RECYCLE_READ_THREADS (1 to 64), when set, takes its place.
  int read_threads = 8;
};

}  // namespace recycle
