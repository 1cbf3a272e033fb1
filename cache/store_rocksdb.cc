#include "cache/store_rocksdb.h"

#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>

namespace recycle::store_rocksdb {

Status from_rocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status();
  if (s.IsNotFound()) return Status::not_found(what);
  if (s.IsCorruption()) return Status::corruption(what + ": " + s.ToString());
  if (s.IsInvalidArgument()) return Status::invalid_argument(what + ": " + s.ToString());
  return Status::io_error(what + ": " + s.ToString());
}

bool is_lock_error(const rocksdb::Status& s) {
  const std::string text = s.ToString();
  return s.IsIOError() && (text.find("While lock file") != std::string::npos ||
                           text.find("lock hold by current process") != std::string::npos);
}

rocksdb::CompressionType compression_of(Compression compression) {
  switch (compression) {
    case Compression::kNone: return rocksdb::kNoCompression;
    case Compression::kLz4: return rocksdb::kLZ4Compression;
    case Compression::kZstd: return rocksdb::kZSTD;
  }
  return rocksdb::kNoCompression;
}

rocksdb::ColumnFamilyOptions family_options(bool records, rocksdb::CompressionType compression,
                                            const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions cf;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.block_size = records ? 16 * 1024 : 4 * 1024;
  cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  cf.compression = records ? compression : rocksdb::kLZ4Compression;
  cf.write_buffer_size = records ? 64 << 20 : 16 << 20;
  if (records) {
    // Records of a block or more go to blob files (RocksDB's integrated BlobDB): written once,
    // by the flush, never rewritten by compaction, which then moves only keys and the blobs'
    // places. Inside the tables, leveled compaction rewrote each large record several times:
    // a build's disk writes were several times its cache. Blob files are read through the
    // same cache as the tables' blocks (one budget). Reading a cache written before needs
    // nothing: its records stay in its tables, and a compaction moves them out.
    cf.enable_blob_files = true;
    cf.min_blob_size = kBlobRecordBytes;
    cf.blob_compression_type = compression;
    cf.blob_cache = cache;
  }
  return cf;
}

std::vector<rocksdb::ColumnFamilyDescriptor> families(
    rocksdb::CompressionType compression, const std::shared_ptr<rocksdb::Cache>& cache) {
  return {
      {rocksdb::kDefaultColumnFamilyName, family_options(false, compression, cache)},
      {"records", family_options(true, compression, cache)},
      {"samples", family_options(false, compression, cache)},
  };
}

rocksdb::DBOptions db_options(bool read_only) {
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = false;
  db_options.create_missing_column_families = !read_only;
  db_options.paranoid_checks = true;
  // Column families flush together: unlogged writes (write_unlogged) lost in a crash are the
  // latest ones in every family, never an index entry without its record.
  db_options.atomic_flush = true;
  db_options.max_background_jobs = 2;
  db_options.keep_log_file_num = 3;
  // No preallocation: RocksDB would fallocate a write-ahead log of 1.1x the write buffer (72 MB
  // here) and a 4 MB manifest up front, space the free-space stop (split_writer.cc) would count
  // as used before any record is written; a small disk then holds nothing.
  db_options.allow_fallocate = false;
  db_options.manifest_preallocation_size = 0;
  // Every table file is opened when the cache is opened, so a reader's view never depends on
  // a file that a writer deletes later.
  db_options.max_open_files = -1;
  return db_options;
}

}  // namespace recycle::store_rocksdb
