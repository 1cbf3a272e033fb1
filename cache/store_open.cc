// ActivationStore's life on disk: open (creating a new cache whole, under the open lock),
// close, and destroy; who holds the writer lock. What a cache directory is apart from
// RocksDB's files (marker, locks, staging area) is in cache/cache_dir.h.
#include <rocksdb/db.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "cache/activation_store.h"
#include "cache/cache_dir.h"
#include "cache/read_pool.h"
#include "cache/store_rocksdb.h"

namespace recycle {

using namespace store_rocksdb;

Status ActivationStore::destroy(const std::string& dir) {
  namespace fs = std::filesystem;
  std::string real;
  bool link = false;
  Status st = resolve_cache_path(dir, &real, &link);
  if (!st.ok()) return st;
  std::error_code ec;
  if (!fs::exists(real, ec)) return Status();
  if (fs::is_directory(real, ec) && fs::is_empty(real, ec)) return Status();
  // Nothing is deleted until the directory is known to be a cache: its marker, or (caches made
  // before the marker) a manifest that reads back.
  if (!has_cache_marker(real)) {
    bool legacy = false;
    if (fs::exists(fs::path(real) / "CURRENT", ec)) {
      StoreOptions ro;
      ro.read_only = true;
      std::unique_ptr<ActivationStore> store;
      Manifest m;
      legacy = open(dir, ro, &store).ok() && store->read_manifest(&m).ok();
    }
    if (!legacy) {
      return Status::invalid_argument(dir + " is not a recycle cache (no " + kCacheMarkerName +
                                      " marker, no manifest); not deleting anything in it");
    }
  }
  OpenLock lock;
  st = OpenLock::acquire(real, /*exclusive=*/true, kOpenLockSeconds, &lock);
  if (!st.ok()) return st;
  const rocksdb::Status s = rocksdb::DestroyDB(real, rocksdb::Options());
  if (is_lock_error(s)) return Status::io_error(writer_lock_message(dir, real));
  st = from_rocks(s, "deleting cache " + dir);
  if (!st.ok()) return st;
  fs::remove_all(fs::path(real) / kStagingDirName, ec);
  fs::remove(fs::path(real) / kCacheMarkerName, ec);
  // The directory goes too when empty (anything else the user put there stays), except the
  // target of a link, which stays for the link to lead to.
  if (!link) fs::remove(real, ec);
  return Status();
}

namespace {

// Creates an empty RocksDB database with the cache's column families `cfs` at `path` and closes
// it: the files of a new cache `dir` (the name its error gives).
Status create_empty_db(const rocksdb::DBOptions& db_options, const std::string& path,
                       const std::vector<rocksdb::ColumnFamilyDescriptor>& cfs,
                       const std::string& dir) {
  rocksdb::DBOptions create = db_options;
  create.create_if_missing = true;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* fresh = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(create, path, cfs, &handles, &fresh);
  if (s.ok()) {
    for (auto* h : handles) fresh->DestroyColumnFamilyHandle(h);
    s = fresh->Close();
    delete fresh;
  }
  return from_rocks(s, "cannot create cache " + dir);
}

// Opens the database at `real` read-only, trying again (up to 20 times, 25 ms apart) on the
// errors of a file system that reports a transient one.
rocksdb::Status open_read_only(const rocksdb::DBOptions& db_options, const std::string& real,
                               const std::vector<rocksdb::ColumnFamilyDescriptor>& cfs,
                               std::vector<rocksdb::ColumnFamilyHandle*>* handles,
                               rocksdb::DB** db) {
  rocksdb::Status s;
  for (int attempt = 0; attempt < 20; ++attempt) {
    handles->clear();
    s = rocksdb::DB::OpenForReadOnly(db_options, real, cfs, handles, db);
    if (s.ok() || !(s.IsIOError() || s.IsPathNotFound())) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return s;
}

}  // namespace

Status ActivationStore::open(const std::string& dir, const StoreOptions& options,
                             std::unique_ptr<ActivationStore>* out) {
  const rocksdb::CompressionType compression = compression_of(options.compression);
  std::string real;
  Status st = resolve_cache_path(dir, &real);
  if (!st.ok()) return st;
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool exists = fs::exists(fs::path(real) / "CURRENT", ec);
  if (!exists && (options.read_only || !options.create_if_missing)) {
    return missing_cache_status(dir, real);
  }

  const rocksdb::DBOptions db_options = store_rocksdb::db_options(options.read_only);
  const std::vector<rocksdb::ColumnFamilyDescriptor> cfs =
      families(compression, rocksdb::NewLRUCache(options.block_cache_bytes));

  if (!exists) {
    st = create_cache_dir(dir, real, [&](const std::string& path) {
      return create_empty_db(db_options, path, cfs, dir);
    });
    if (!st.ok()) return st;
  }

  std::unique_ptr<ActivationStore> store(new ActivationStore());
  store->dir_ = dir;
  store->real_dir_ = real;
  store->read_only_ = options.read_only;
  int read_threads = options.read_threads;
  st = read_threads_from_environment(&read_threads);
  if (!st.ok()) return st;
  if (read_threads > 1) store->read_pool_ = std::make_unique<ReadPool>(read_threads);
  // Readers open under the shared open lock, writers under the exclusive one: a reader never
  // opens while a writer opens (RocksDB's recovery deletes old WAL files), closes or deletes
  // the cache. While a writer is open it keeps RocksDB from deleting any file (below) except
  // under the exclusive lock (release_obsolete_files), so the files a reader's open lists stay
  // whole: it replays a whole prefix of the write batches.
  OpenLock lock;
  st = OpenLock::acquire(real, /*exclusive=*/!options.read_only, kOpenLockSeconds, &lock);
  if (!st.ok()) return st;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s;
  if (options.read_only) {
    // Retries cover file systems that report a transient error; the open lock already keeps
    // this process's writers from deleting files under the open.
    s = open_read_only(db_options, real, cfs, &store->handles_, &db);
  } else {
    s = rocksdb::DB::Open(db_options, real, cfs, &store->handles_, &db);
    if (s.ok()) {
      store->db_.reset(db);
      note_writer(real, true);
      s = db->DisableFileDeletions();
      if (s.ok() && !has_cache_marker(real)) {
        st = write_cache_marker(real);  // a cache made before the marker existed
        if (!st.ok()) return st;
      }
      if (s.ok()) {
        st = store->settle_pending_ingest();
        if (!st.ok()) return st;
        // What the staging area holds was left by a build that is gone: this process holds
        // the writer lock, and only the writer's own build puts files there.
        fs::remove_all(fs::path(real) / kStagingDirName, ec);
      }
    }
  }
  if (is_lock_error(s)) return Status::io_error(writer_lock_message(dir, real));
  if (s.IsInvalidArgument() &&
      s.ToString().find("Column family not found") != std::string::npos) {
    return Status::corruption("cache " + dir + " lacks its column families (not a cache?)");
  }
  if (!s.ok()) return from_rocks(s, "cannot open cache " + dir);
  if (!store->db_) store->db_.reset(db);
  *out = std::move(store);
  return Status();
}

ActivationStore::~ActivationStore() {
  if (!db_) return;
  OpenLock lock;
  if (!read_only_ &&
      OpenLock::acquire(real_dir_, /*exclusive=*/true, kOpenLockSeconds, &lock).ok()) {
    // Files made obsolete while this writer ran (old WAL files, compaction inputs) go now,
    // while no reader is opening; without the lock they stay until the next writer's open.
    db_->EnableFileDeletions(/*force=*/true);
  }
  for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
  db_->Close();
  db_.reset();
  if (!read_only_) note_writer(real_dir_, false);
}

bool ActivationStore::release_obsolete_files() {
  OpenLock lock;  // one try: a reader that is opening keeps the files until the next call
  if (read_only_ || !OpenLock::acquire(real_dir_, /*exclusive=*/true, 0, &lock).ok()) {
    return false;
  }
  // Enabling deletions (forced) deletes what is obsolete now; they are off again before any
  // reader can open.
  db_->EnableFileDeletions(/*force=*/true);
  db_->DisableFileDeletions();
  return true;
}

std::string ActivationStore::other_writer() const {
  if (!read_only_ || writer_pid(real_dir_) == 0) return "";
  return writer_lock_message(dir_, real_dir_);
}

}  // namespace recycle
