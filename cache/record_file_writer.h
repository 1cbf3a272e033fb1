// RecordFileWriter: writes one file of records for ActivationStore::ingest_records (see
// cache/activation_store.h, which includes this header).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "cache/store_options.h"
#include "recycle/key.h"
#include "recycle/status.h"

namespace recycle {

// Writes one file of records for ActivationStore::ingest_records: a RocksDB table file
// (SstFileWriter) in the records column family's format, so with the same block size, filter,
// compression (StoreOptions::compression) and block checksums as the store's own writes; the
// record bytes are the caller's (encode_record), with their own checksums. Keys must come in
// strictly ascending order (Key's operator<, which is the stored byte order). Needs no open
// store. Not thread safe. A writer destroyed before finish() deletes its file.
class RecordFileWriter {
 public:
  // Creates (or truncates) the file at `path`; its directory must exist.
  static Status open(const std::string& path, const StoreOptions& options,
                     std::unique_ptr<RecordFileWriter>* out);
  ~RecordFileWriter();
  RecordFileWriter(const RecordFileWriter&) = delete;
  RecordFileWriter& operator=(const RecordFileWriter&) = delete;

  // InvalidArgument for a key not above the previous one.
  Status add(const Key& key, std::string_view record);
  // Completes and syncs the file. InvalidArgument when no record was added (RocksDB makes no
  // empty table files: skip the file instead).
  Status finish();

  const std::string& path() const { return path_; }
  int64_t records() const { return records_; }
  int64_t record_bytes() const { return record_bytes_; }

 private:
  struct Rep;
  RecordFileWriter() = default;
  std::unique_ptr<Rep> rep_;
  std::string path_;
  int64_t records_ = 0;
  int64_t record_bytes_ = 0;
  bool finished_ = false;
};

}  // namespace recycle
