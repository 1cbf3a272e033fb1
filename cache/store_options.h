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
};

}  // namespace recycle
