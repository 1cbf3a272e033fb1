// How ActivationStore uses RocksDB: its column families (in the order of its handles), the
// keys of the default family, the tuning every family and the database open with, and
// RocksDB's statuses in ours. Internal to cache/ (activation_store.cc, store_open.cc,
// record_ingest.cc, record_file_writer.cc); callers include cache/activation_store.h.
// Everything here is stateless and safe to call from many threads.
#pragma once

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/status.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "recycle/formats.h"  // Compression
#include "recycle/status.h"

namespace recycle::store_rocksdb {

// Indices of the column families in ActivationStore::handles_ (and in families()).
constexpr size_t kDefault = 0, kRecords = 1, kSamples = 2;

// Keys of the default family: the manifest, blobs under a prefix, and the note ingest_records
// leaves while its counts are ahead of the records: {"records": N, "record_bytes": B,
// "probe": KEY HEX} (see cache/record_ingest.cc).
inline const char* const kManifestKey = "manifest";
inline const std::string kBlobPrefix = "blob/";
inline const char* const kPendingIngestKey = "pending-ingest";

// A RocksDB status as ours, `what` first: NotFound, Corruption, InvalidArgument, else IOError.
Status from_rocks(const rocksdb::Status& s, const std::string& what);

// RocksDB's own words when its LOCK file is held (env/fs_posix.cc): by another process, or
// by this one.
bool is_lock_error(const rocksdb::Status& s);

// StoreOptions::compression as RocksDB's.
rocksdb::CompressionType compression_of(Compression compression);

// Records of at least this many bytes are kept in the records family's blob files, the
// others in its tables: the size of a table block of records, which a record that large fills
// alone anyway.
constexpr uint64_t kBlobRecordBytes = 16 * 1024;

// A column family's options: records get larger blocks, blob files for the large ones
// (kBlobRecordBytes) and the chosen compression, the other families LZ4. RecordFileWriter
// makes its files with the records family's options (no block cache: `cache` may be null;
// its table files hold every record inline, as SstFileWriter writes no blob files).
rocksdb::ColumnFamilyOptions family_options(bool records, rocksdb::CompressionType compression,
                                            const std::shared_ptr<rocksdb::Cache>& cache);

// The three families (default, records, samples) sharing one block cache.
std::vector<rocksdb::ColumnFamilyDescriptor> families(rocksdb::CompressionType compression,
                                                      const std::shared_ptr<rocksdb::Cache>& cache);

// The database's options for a reader (read_only) or a writer; never create_if_missing.
rocksdb::DBOptions db_options(bool read_only);

}  // namespace recycle::store_rocksdb
