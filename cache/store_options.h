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
  // multi_get's reads with RocksDB's own checksums verified: the CRC32c of each record blob
  // (and the table blocks read). Off by default: every reader of a record parses it, and the
  // record's XXH3 (cache/record.h) covers its every byte, at the memory's rate; Debian's
  // RocksDB computes its CRC32c without SSE4.2 (one core read, checked and decoded warm records
  // at 0.90 GiB/s with it, 2.09 GiB/s without: bench/micro/read_path_bench.cc). What it alone would see: a blob
  // index pointing at another whole record. verify() and recycle-inspect --verify always verify.
  // The environment's RECYCLE_VERIFY_READS (0 or 1), when set, takes its place.
  bool verify_read_checksums = false;
};

}  // namespace recycle
