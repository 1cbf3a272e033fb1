// ActivationStore's life on disk: open (creating a new cache whole, under the open lock),
// close, and destroy; who holds the writer lock. What a cache directory is apart from
// RocksDB's files (marker, locks, staging area) is in cache/cache_dir.h.
#include <rocksdb/db.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "cache/activation_store.h"
#include "cache/cache_dir.h"
#include "cache/damaged_records.h"
#include "cache/read_pool.h"
#include "cache/store_rocksdb.h"

namespace recycle {

using namespace store_rocksdb;

namespace {

// The number in a RocksDB file name ("000012.sst", "000013.blob", "000014.log",
// "MANIFEST-000005", "OPTIONS-000007", any of them with ".dbtmp"), or -1 for another name.
int64_t rocks_file_number(std::string name) {
  const std::string tmp = ".dbtmp";
  if (name.size() > tmp.size() && name.compare(name.size() - tmp.size(), tmp.size(), tmp) == 0) {
    name.resize(name.size() - tmp.size());
  }
  std::string digits;
  for (const char* prefix : {"MANIFEST-", "OPTIONS-"}) {
    if (name.rfind(prefix, 0) == 0) digits = name.substr(std::strlen(prefix));
  }
  if (digits.empty()) {
    const size_t dot = name.find('.');
    if (dot == std::string::npos) return -1;
    const std::string ext = name.substr(dot);
    if (ext != ".sst" && ext != ".blob" && ext != ".log") return -1;
    digits = name.substr(0, dot);
  }
  if (digits.empty() || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  return std::stoll(digits);
}

// RocksDB's info logs: LOG, and LOG.old.<microseconds since 1970> (16 digits today).
bool is_info_log(const std::string& name) {
  if (name == "LOG") return true;
  const std::string old = "LOG.old.";
  if (name.rfind(old, 0) != 0) return false;
  const std::string stamp = name.substr(old.size());
  return stamp.size() >= 13 && stamp.find_first_not_of("0123456789") == std::string::npos;
}

// How far above the newest file the cache's database lists a file of its own may be numbered:
// the write-ahead log and the manifest that a writer's open makes after the files it lists.
constexpr int64_t kNumberSlack = 8;

// The largest file number among the files the cache's database lists as its own (tables, blob
// files, manifest, options), read through a read-only open; -1 when the cache does not open.
int64_t newest_listed_number(const std::string& dir) {
  StoreOptions ro;
  ro.read_only = true;
  std::unique_ptr<ActivationStore> store;
  if (!ActivationStore::open(dir, ro, &store).ok()) return -1;
  return store->newest_file_number();
}

}  // namespace

int64_t ActivationStore::newest_file_number() const {
  std::vector<std::string> live;
  uint64_t manifest_bytes = 0;
  if (!db_->GetLiveFiles(live, &manifest_bytes, /*flush_memtable=*/false).ok()) return -1;
  int64_t newest = -1;
  for (const std::string& path : live) {
    newest = std::max(newest, rocks_file_number(std::filesystem::path(path).filename().string()));
  }
  return newest;
}

Status ActivationStore::check_destroy(const std::string& dir) {
  namespace fs = std::filesystem;
  std::string real;
  Status st = resolve_cache_path(dir, &real);
  if (!st.ok()) return st;
  std::error_code ec;
  if (!fs::exists(real, ec)) return Status();
  if (fs::is_directory(real, ec) && fs::is_empty(real, ec)) return Status();
  // Nothing is deleted until the directory is known to be a cache: its marker, or (caches made
  // before the marker) a manifest that reads back.
  const bool opens = fs::exists(fs::path(real) / "CURRENT", ec);
  int64_t newest = opens ? newest_listed_number(dir) : -1;
  if (!has_cache_marker(real)) {
    bool legacy = false;
    if (newest >= 0) {
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
  // Everything in it must be the cache's own. A numbered file is the cache's when it is
  // numbered as the database's own files are (a damaged cache, whose database does not open,
  // is judged by the names alone).
  std::vector<std::string> foreign;
  for (const auto& entry : fs::directory_iterator(real, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == kCacheMarkerName || name == kStagingDirName || name == kDamagedRecordsName ||
        name == kDamagedRecordsTempName || name == "CURRENT" || name == "IDENTITY" ||
        name == "LOCK" || is_info_log(name) ||
        (name == "lost+found" && entry.is_directory(ec))) {  // a mount point's; kept
      continue;
    }
    const int64_t number = rocks_file_number(name);
    if (number >= 0 && (newest < 0 || number <= newest + kNumberSlack) &&
        !entry.is_directory(ec)) {
      continue;
    }
    foreign.push_back(name);
  }
  if (ec) return Status::io_error("cannot list " + dir + ": " + ec.message());
  if (!foreign.empty()) {
    std::sort(foreign.begin(), foreign.end());
    const size_t shown = std::min<size_t>(foreign.size(), 3);
    std::string names;
    for (size_t i = 0; i < shown; ++i) names += (i ? ", " : "") + foreign[i];
    if (foreign.size() > shown) names += " and " + std::to_string(foreign.size() - shown) + " more";
    return Status::invalid_argument(
        "cache " + dir + " also holds " + names + ", which " +
        (foreign.size() == 1 ? "is" : "are") +
        " not the cache's; nothing was deleted (move " + (foreign.size() == 1 ? "it" : "them") +
        " out of the cache directory, or build into another --cache)");
  }
  return Status();
}

Status ActivationStore::destroy(const std::string& dir) {
  namespace fs = std::filesystem;
  Status st = check_destroy(dir);
  if (!st.ok()) return st;
  std::string real;
  bool link = false;
  st = resolve_cache_path(dir, &real, &link);
  if (!st.ok()) return st;
  std::error_code ec;
  if (!fs::exists(real, ec)) return Status();
  if (fs::is_directory(real, ec) && fs::is_empty(real, ec)) return Status();
  OpenLock lock;
  st = OpenLock::acquire(real, /*exclusive=*/true, kOpenLockSeconds, &lock);
  if (!st.ok()) return st;
  const rocksdb::Status s = rocksdb::DestroyDB(real, rocksdb::Options());
  if (is_lock_error(s)) return Status::io_error(writer_lock_message(dir, real));
  st = from_rocks(s, "deleting cache " + dir);
  if (!st.ok()) return st;
  fs::remove_all(fs::path(real) / kStagingDirName, ec);
  fs::remove(fs::path(real) / kDamagedRecordsName, ec);
  fs::remove(fs::path(real) / kDamagedRecordsTempName, ec);
  fs::remove(fs::path(real) / kCacheMarkerName, ec);
  // The directory goes too when empty, except the target of a link, which stays for the link
  // to lead to.
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

// A failed open of the database in `real` (cache `dir`) in the words of what the user has; OK
// for OK.
Status open_failure(const rocksdb::Status& s, const std::string& dir, const std::string& real) {
  if (s.ok()) return Status();
  if (is_lock_error(s)) return Status::io_error(writer_lock_message(dir, real));
  if (s.IsInvalidArgument() &&
      s.ToString().find("Column family not found") != std::string::npos) {
    return Status::corruption("cache " + dir + " lacks its column families (not a cache?)");
  }
  if (s.ToString().find("CURRENT file") != std::string::npos) {
    // An emptied or cut CURRENT (a copy that lost its files' contents): RocksDB's own words
    // ("CURRENT file does not end with newline") do not say what the user has.
    return Status::corruption("cache " + dir + " is damaged: its CURRENT file is empty or cut (" +
                              s.ToString() + "); build it again with --rebuild, or restore it");
  }
  return from_rocks(s, "cannot open cache " + dir);
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
  store->verify_reads_ = options.verify_read_checksums;
  st = verify_reads_from_environment(&store->verify_reads_);
  if (!st.ok()) return st;
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
  st = open_failure(s, dir, real);
  if (!st.ok()) return st;
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
