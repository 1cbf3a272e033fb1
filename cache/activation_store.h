// ActivationStore: the activation cache on RocksDB.
//
// Column families:
//   records  key (16 bytes) -> encoded record (see record.h); shared by all splits. Records
//            of 16 KB or more are kept in the family's blob files (*.blob), the others in
//            its tables (store_rocksdb.h, kBlobRecordBytes)
//   samples  split '\0' position (u64 big-endian) -> key (16 bytes) label (i64 little-endian)
//   default  "manifest" -> Manifest JSON; "blob/<name>" -> opaque bytes (e.g. the head's
//            initial weights)
// Invariant kept by writers: a samples entry is written in the same batch as, or after, the
// record it points to, so every index entry has its record.
//
// Records can also come as files: a RecordFileWriter (cache/record_file_writer.h) makes a
// RocksDB table file of records anywhere (typically in the cache's staging area, staging_dir(),
// by a process that does not write the cache, such as another rank of a distributed build),
// and the writer ingests such files in one atomic step with ingest_records(). The manifest's
// counts are kept exact across a crash between the two (see ingest_records).
//
// Where it lives: reads and writes in activation_store.cc, open/close/destroy in store_open.cc,
// ingest_records and its crash recovery in record_ingest.cc, the column families' tuning in
// store_rocksdb.{h,cc}.
//
// Thread safety: all const methods may be called from many threads at once. Open read-only
// for training and inspection; many read-only instances may share a directory with one
// writer, in other processes too. A read-only instance is a point-in-time view: it sees a
// whole prefix of the writer's batches as they were when it opened, never a part of one.
// How: writers open, close and delete under an exclusive lock on the directory, readers open
// under a shared one, and a writer lets RocksDB delete files only under the exclusive lock
// (see cache/cache_dir.h). RocksDB's own LOCK file admits one writer; a second gets an IOError
// naming the lock and the process that holds it. Cache paths are resolved through symbolic
// links; a dangling link is refused.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cache/manifest.h"
#include "cache/record_file_writer.h"  // RecordFileWriter, for ingest_records's callers
#include "cache/store_options.h"
#include "recycle/key.h"
#include "recycle/status.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
class WriteBatch;
}  // namespace rocksdb

namespace recycle {

class ReadPool;

struct IndexEntry {
  Key key;
  int64_t label = 0;
  friend bool operator==(const IndexEntry& a, const IndexEntry& b) {
    return a.key == b.key && a.label == b.label;
  }
};

class ActivationStore {
 public:
  // A batch of writes for one store, applied atomically. Only the writers of
  // cache/split_writer.h fill and apply one (SplitWriter, StagedWrite; ActivationStore's own
  // ingest): every record, index entry, manifest and blob reaches the cache through them, and
  // tests reach them through StoreTestAccess (tests/cache/store_test_access.h).
  // store_sealed_test checks that these mutators are out of reach.
  class Batch {
   public:
    // reserve: the bytes the batch will hold, when known (it grows by copying otherwise).
    explicit Batch(const ActivationStore& store, size_t reserve = 0);
    ~Batch();
    size_t count() const;
    size_t record_bytes() const { return record_bytes_; }
    size_t capacity() const;  // bytes it holds without growing
    void clear();             // empty again, its memory kept

   private:
    friend class ActivationStore;
    friend class SplitWriter;
    friend class StagedWrite;
    friend class StoreTestAccess;
    void put_record(const Key& key, std::string_view record);
    void delete_record(const Key& key);
    void put_blob(const std::string& name, std::string_view bytes);
    // Throws std::invalid_argument for a negative position.
    void put_index(const std::string& split, int64_t position, const IndexEntry& entry);
    // Deletes the split's index entries at positions >= from (every entry when from <= 0).
    void truncate_index(const std::string& split, int64_t from);
    void put_manifest(const Manifest& manifest);

    const ActivationStore& store_;
    std::unique_ptr<rocksdb::WriteBatch> batch_;
    size_t record_bytes_ = 0;
  };

  // Opens (or, for writers with create_if_missing, creates) the cache in `dir`.
  static Status open(const std::string& dir, const StoreOptions& options,
                     std::unique_ptr<ActivationStore>* out);
  ~ActivationStore();
  ActivationStore(const ActivationStore&) = delete;
  ActivationStore& operator=(const ActivationStore&) = delete;

  const std::string& dir() const { return dir_; }
  // When another process holds the cache's writer lock: a message naming it and the lock
  // (see writer_lock_message in cache/cache_dir.h); else "".
  std::string other_writer() const;
  bool read_only() const { return read_only_; }

  // NotFound when the cache has no manifest yet (a new cache). The counts leave out records a
  // writer counted ahead of an ingest it did not live to do (see ingest_records).
  Status read_manifest(Manifest* out) const;
  Status get_blob(const std::string& name, std::string* out) const;
  Status get_record(const Key& key, std::string* out) const;

  // Batched lookup (RocksDB MultiGet). Calls fn(i, bytes) for each key found, in order;
  // `bytes` is valid only during the call. statuses[i] is OK, NotFound, or an error. RocksDB's
  // own checksums are verified only with StoreOptions::verify_read_checksums: the caller
  // checks each record's (parse_record).
  void multi_get(const std::vector<Key>& keys,
                 const std::function<void(size_t, std::string_view)>& fn,
                 std::vector<Status>* statuses) const;
  // The same for keys[0..n); safe to call from several threads at once. A batch of many keys
  // is read in parts, each by its own MultiGet on a thread of the store's ReadPool
  // (StoreOptions::read_threads), so that as many reads are in flight; fn is still called in
  // order, on the calling thread.
  void multi_get(const Key* keys, size_t n,
                 const std::function<void(size_t, std::string_view)>& fn,
                 std::vector<Status>* statuses) const;

  // The split's index in position order. An empty vector when the split has none.
  Status read_index(const std::string& split, std::vector<IndexEntry>* out) const;
  // read_index, checked against the manifest's account of the split: Corruption when a
  // complete split has another number of entries than info.samples, or any split more.
  Status read_split_index(const std::string& split, const SplitInfo& info,
                          std::vector<IndexEntry>* out) const;

  // Calls fn for every record in key order until fn returns false. Stops with the iterator's
  // status (Corruption when a block fails its checksum).
  Status for_each_record(const std::function<bool(const Key&, std::string_view)>& fn) const;

  // Memory RocksDB holds for the open table files outside the block cache (their index and
  // filter blocks), all column families.
  uint64_t table_readers_bytes() const;
  // Bytes the block cache holds now (StoreOptions::block_cache_bytes is its capacity).
  uint64_t block_cache_usage() const;

  // RocksDB's whole-file checksum verification of every SST file.
  Status verify_files() const;
  // Live SST, blob and WAL bytes on disk.
  uint64_t disk_bytes() const;

  // The cache's staging area, DIR/recycle-staging (kStagingDirName in cache/cache_dir.h): where
  // record files to ingest are made. Not created here. A writer's open empties it (whatever is
  // there was left by a build that died), and destroy() deletes it.
  std::string staging_dir() const;
  // Moves record files made by RecordFileWriter into the records column family in one atomic
  // step (RocksDB's IngestExternalFile with move_files; every block's checksum is verified
  // first). Each key must be new to the store and appear in one file only: the caller ingests
  // records it found missing. Adds the files' records and record bytes (their raw value bytes,
  // as Batch::record_bytes counts them) to manifest->records and record_bytes and writes that
  // manifest, synced, before the ingest, together with a note of what it added; the note goes
  // after the ingest. If the process dies in between, read_manifest (readers included) gives
  // the counts taken back unless the records are there (one of them is probed; the ingest is
  // all or nothing), and the next writer's open writes them so and drops the note. On an error the
  // counts are taken back at once, *manifest is left as it was, and the files stay where they were.
  // No files: nothing happens.
  Status ingest_records(const std::vector<std::string>& files, Manifest* manifest);
  // Flushes memtables to SST files (used at the end of a build).
  Status flush();
  // Compacts the records column family, dropping what deletes left behind.
  Status compact_records();
  // The largest number among the files the database lists as its own (tables, blob files,
  // manifest, options: "000012.sst" is 12); -1 when it cannot tell.
  int64_t newest_file_number() const;

  // Deletes the cache in `dir` (RocksDB's DestroyDB and the marker, then the directory if it
  // is empty). Refuses, deleting nothing, whatever check_destroy refuses, and a cache another
  // process writes.
  static Status destroy(const std::string& dir);
  // destroy's checks, deleting nothing: OK when `dir` is a cache that may be deleted whole (or
  // there is nothing to delete). InvalidArgument, in one line saying what to do, for a
  // non-empty directory that is not recognised as a cache (see cache/cache_dir.h), and for a
  // cache directory that holds anything but the cache's own files (a user's notes, or a file
  // named like RocksDB's that the cache's database does not list): deleting the cache would
  // delete those too, or leave a directory that is no cache to build into.
  static Status check_destroy(const std::string& dir);

  // Checks a split name: 1-64 characters of [A-Za-z0-9._-].
  static Status check_split_name(const std::string& split);

 private:
  // Batches are applied by the writers of cache/split_writer.h only (see Batch).
  friend class SplitWriter;
  friend class StoreTestAccess;
  ActivationStore() = default;

  // Applies the batch atomically. sync: wait for the WAL to reach the disk. Unlogged writes
  // before it are flushed first, so it never survives a crash without them.
  Status write(Batch* batch, bool sync = false);
  // Applies the batch atomically without RocksDB's write-ahead log, for bulk writes (a build's
  // records: half the bytes written). Durable once flushed: a crash before the next flush
  // (memtables fill and flush on their own, or flush()) loses it and the unlogged writes after
  // the last flush. The column families flush together (atomic flush), so what a crash leaves
  // is a prefix of the writes, whole batches, as with the log. Safe beside readers; one
  // writing thread at a time, as for write().
  Status write_unlogged(Batch* batch);
  // The note of a pending ingest: *found when there is one; *undo when its records are not in
  // the store (the manifest's counts are ahead by *records and *bytes).
  Status read_pending_ingest(bool* found, bool* undo, int64_t* records, int64_t* bytes) const;
  // Settles an ingest left half done (see ingest_records): drops the note when the records
  // are there, else takes the manifest's counts back. Called by open() for writers (which then
  // empties the staging area) and by ingest_records.
  Status settle_pending_ingest();
  // write() (logged: unlogged writes flushed first) and write_unlogged().
  Status apply(Batch* batch, bool sync, bool logged);
  // A writer's: deletes the files RocksDB no longer needs (compaction inputs, old WAL files)
  // when no reader is opening (true), else leaves them for the next call (false). Without it
  // they would stay until the writer closes, and a build's disk use would grow to several
  // times its cache (leveled compaction rewrites a record several times).
  bool release_obsolete_files();

  std::string dir_;       // as the caller named it, for messages
  std::string real_dir_;  // with symbolic links followed
  bool read_only_ = false;
  std::atomic<bool> unlogged_{false};  // unlogged writes since the last flush
  std::atomic<int64_t> written_since_release_{0};  // bytes written since release_obsolete_files
  std::unique_ptr<ReadPool> read_pool_;  // multi_get's, with StoreOptions::read_threads > 1
  bool verify_reads_ = false;             // StoreOptions::verify_read_checksums
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;  // default, records, samples
};

}  // namespace recycle
