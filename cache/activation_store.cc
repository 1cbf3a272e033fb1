#include "cache/activation_store.h"

#include "base/coding.h"
#include "cache/cache_dir.h"

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_reader.h>
#include <rocksdb/sst_file_writer.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>
#include <stdexcept>

namespace recycle {

namespace {

constexpr size_t kDefault = 0, kRecords = 1, kSamples = 2;
const char* const kManifestKey = "manifest";
const std::string kBlobPrefix = "blob/";

Status from_rocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status();
  if (s.IsNotFound()) return Status::not_found(what);
  if (s.IsCorruption()) return Status::corruption(what + ": " + s.ToString());
  if (s.IsInvalidArgument()) return Status::invalid_argument(what + ": " + s.ToString());
  return Status::io_error(what + ": " + s.ToString());
}

std::string index_prefix(const std::string& split) { return split + std::string(1, '\0'); }

std::string index_key(const std::string& split, int64_t position) {
  std::string k = index_prefix(split);
  put_be64(&k, static_cast<uint64_t>(position));
  return k;
}

std::string index_value(const IndexEntry& e) {
  std::string v = e.key.to_bytes();
  put_le64(&v, static_cast<uint64_t>(e.label));
  return v;
}

rocksdb::CompressionType compression_of(const std::string& name, Status* st) {
  if (name == "none") return rocksdb::kNoCompression;
  if (name == "lz4") return rocksdb::kLZ4Compression;
  if (name == "zstd") return rocksdb::kZSTD;
  *st = Status::invalid_argument("unknown compression '" + name + "' (none, lz4, zstd)");
  return rocksdb::kNoCompression;
}

// A column family's options: records get larger blocks and the chosen compression, the other
// families LZ4. RecordFileWriter makes its files with the records family's options.
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
  return cf;
}

// The note ingest_records leaves in the default family while its counts are ahead of the
// records: {"records": N, "record_bytes": B, "probe": KEY HEX}.
const char* const kPendingIngestKey = "pending-ingest";

// Key::to_hex's form back into a key; false for anything else.
bool key_from_hex(const std::string& hex, Key* out) {
  if (hex.size() != 2 * Key::kBytes) return false;
  std::string raw(Key::kBytes, '\0');
  for (size_t i = 0; i < hex.size(); ++i) {
    const char c = hex[i];
    const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) return false;
    raw[i / 2] = static_cast<char>(raw[i / 2] | (i % 2 ? v : v << 4));
  }
  return Key::from_bytes(raw, out);
}

}  // namespace

ActivationStore::Batch::Batch(const ActivationStore& store)
    : store_(store), batch_(std::make_unique<rocksdb::WriteBatch>()) {}
ActivationStore::Batch::~Batch() = default;

void ActivationStore::Batch::put_record(const Key& key, std::string_view record) {
  char k[Key::kBytes];
  key.to_bytes(k);
  batch_->Put(store_.handles_[kRecords], rocksdb::Slice(k, Key::kBytes),
              rocksdb::Slice(record.data(), record.size()));
  record_bytes_ += record.size();
}

void ActivationStore::Batch::delete_record(const Key& key) {
  char k[Key::kBytes];
  key.to_bytes(k);
  batch_->Delete(store_.handles_[kRecords], rocksdb::Slice(k, Key::kBytes));
}

void ActivationStore::Batch::put_index(const std::string& split, int64_t position,
                                       const IndexEntry& entry) {
  if (position < 0) throw std::invalid_argument("put_index: negative position");
  batch_->Put(store_.handles_[kSamples], index_key(split, position), index_value(entry));
}

void ActivationStore::Batch::truncate_index(const std::string& split, int64_t from) {
  const std::string end = split + std::string(1, '\1');  // just past every key of the split
  batch_->DeleteRange(store_.handles_[kSamples], index_key(split, std::max<int64_t>(from, 0)), end);
}

void ActivationStore::Batch::put_manifest(const Manifest& manifest) {
  batch_->Put(store_.handles_[kDefault], kManifestKey, manifest.to_json_string());
}

void ActivationStore::Batch::put_blob(const std::string& name, std::string_view bytes) {
  batch_->Put(store_.handles_[kDefault], kBlobPrefix + name,
              rocksdb::Slice(bytes.data(), bytes.size()));
}

size_t ActivationStore::Batch::count() const { return batch_->Count(); }

Status ActivationStore::check_split_name(const std::string& split) {
  if (split.empty() || split.size() > 64) {
    return Status::invalid_argument("split name must have 1 to 64 characters");
  }
  for (char c : split) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) {
      return Status::invalid_argument("split name '" + split +
                                      "' may hold only letters, digits, '.', '_' and '-'");
    }
  }
  return Status();
}

namespace {

// How long an open waits for another process to finish opening, closing or deleting the cache.
constexpr double kOpenLockSeconds = 60.0;

// RocksDB's own words when its LOCK file is held (env/fs_posix.cc): by another process, or
// by this one.
bool is_lock_error(const rocksdb::Status& s) {
  const std::string text = s.ToString();
  return s.IsIOError() && (text.find("While lock file") != std::string::npos ||
                           text.find("lock hold by current process") != std::string::npos);
}

// Why `real` (the resolved `dir`) cannot be opened as a cache when it has no CURRENT file.
Status no_cache_status(const std::string& dir, const std::string& real) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(real, ec)) return Status::not_found("no cache at " + dir);
  if (!fs::is_directory(real, ec)) {
    return Status::invalid_argument(dir + " is not a directory, so not a cache");
  }
  if (looks_like_a_database(real)) {
    return Status::corruption("cache " + dir + " is damaged: its CURRENT file is missing");
  }
  return Status::not_found(dir + " is not a cache (no CURRENT file)");
}

// Makes a new, empty cache at `real`: created whole in a staging directory of this process,
// marked, then renamed into place, so that a kill never leaves a half-made cache and two
// processes creating the same cache never touch each other's files. When another process
// wins the race, its cache is left as it is and opened by the caller.
Status create_cache(const std::string& dir, const std::string& real,
                    const std::function<rocksdb::Status(const std::string&)>& create_db) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(real);
  fs::create_directories(target.parent_path(), ec);
  if (ec) return Status::io_error("cannot create " + target.parent_path().string() + ": " + ec.message());
  fs::path staging;
  for (int attempt = 0;; ++attempt) {
    staging = target.parent_path() / ("." + target.filename().string() + ".recycle-creating-" +
                                      std::to_string(::getpid()) + "-" + std::to_string(attempt));
    if (fs::create_directory(staging, ec)) break;  // false when it exists: not ours, try another
    if (ec) return Status::io_error("cannot create " + staging.string() + ": " + ec.message());
  }
  auto discard = [&] { fs::remove_all(staging, ec); };  // only the directory made above
  const rocksdb::Status s = create_db(staging.string());
  if (!s.ok()) {
    discard();
    return from_rocks(s, "cannot create cache " + dir);
  }
  Status st = write_cache_marker(staging.string());
  if (!st.ok()) {
    discard();
    return st;
  }
  // rename(2) replaces an empty directory (one the user made) but never a non-empty one.
  fs::rename(staging, target, ec);
  if (ec) {
    discard();
    if (fs::exists(target / "CURRENT")) return Status();  // another process made it first
    if (fs::exists(target)) {
      return Status::invalid_argument(dir + " exists and is not a cache; not writing into it");
    }
    return Status::io_error("cannot create cache " + dir + ": " + ec.message());
  }
  return Status();
}

}  // namespace

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

Status ActivationStore::open(const std::string& dir, const StoreOptions& options,
                             std::unique_ptr<ActivationStore>* out) {
  Status st;
  const rocksdb::CompressionType compression = compression_of(options.compression, &st);
  if (!st.ok()) return st;
  std::string real;
  st = resolve_cache_path(dir, &real);
  if (!st.ok()) return st;
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool exists = fs::exists(fs::path(real) / "CURRENT", ec);
  if (!exists && (options.read_only || !options.create_if_missing)) {
    return no_cache_status(dir, real);
  }

  rocksdb::DBOptions db_options;
  db_options.create_if_missing = false;
  db_options.create_missing_column_families = !options.read_only;
  db_options.paranoid_checks = true;
  // Column families flush together: unlogged writes (write_unlogged) lost in a crash are the
  // latest ones in every family, never an index entry without its record.
  db_options.atomic_flush = true;
  db_options.max_background_jobs = 2;
  db_options.keep_log_file_num = 3;
  // Every table file is opened when the cache is opened, so a reader's view never depends on
  // a file that a writer deletes later.
  db_options.max_open_files = -1;

  auto cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  auto cf_options = [&](bool records) { return family_options(records, compression, cache); };
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
      {rocksdb::kDefaultColumnFamilyName, cf_options(false)},
      {"records", cf_options(true)},
      {"samples", cf_options(false)},
  };

  if (!exists) {
    st = create_cache(dir, real, [&](const std::string& path) {
      rocksdb::DBOptions create = db_options;
      create.create_if_missing = true;
      std::vector<rocksdb::ColumnFamilyHandle*> handles;
      rocksdb::DB* fresh = nullptr;
      rocksdb::Status s = rocksdb::DB::Open(create, path, cfs, &handles, &fresh);
      if (!s.ok()) return s;
      for (auto* h : handles) fresh->DestroyColumnFamilyHandle(h);
      s = fresh->Close();
      delete fresh;
      return s;
    });
    if (!st.ok()) return st;
  }

  std::unique_ptr<ActivationStore> store(new ActivationStore());
  store->dir_ = dir;
  store->real_dir_ = real;
  store->read_only_ = options.read_only;
  // Readers open under the shared open lock, writers under the exclusive one: a reader never
  // opens while a writer opens (RocksDB's recovery deletes old WAL files), closes or deletes
  // the cache. While a writer is open it keeps RocksDB from deleting any file (below), so the
  // files a reader's open lists stay whole: it replays a whole prefix of the write batches.
  OpenLock lock;
  st = OpenLock::acquire(real, /*exclusive=*/!options.read_only, kOpenLockSeconds, &lock);
  if (!st.ok()) return st;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s;
  if (options.read_only) {
    // Retries cover file systems that report a transient error; the open lock already keeps
    // this process's writers from deleting files under the open.
    for (int attempt = 0; attempt < 20; ++attempt) {
      store->handles_.clear();
      s = rocksdb::DB::OpenForReadOnly(db_options, real, cfs, &store->handles_, &db);
      if (s.ok() || !(s.IsIOError() || s.IsPathNotFound())) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
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
  if (s.IsInvalidArgument() && s.ToString().find("Column family not found") != std::string::npos) {
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

uint64_t ActivationStore::table_readers_bytes() const {
  uint64_t total = 0;
  for (auto* h : handles_) {
    uint64_t bytes = 0;
    if (db_->GetIntProperty(h, rocksdb::DB::Properties::kEstimateTableReadersMem, &bytes)) {
      total += bytes;
    }
  }
  return total;
}

uint64_t ActivationStore::block_cache_usage() const {
  uint64_t bytes = 0;  // the families share one cache: any family's handle reports it
  db_->GetIntProperty(handles_[kRecords], rocksdb::DB::Properties::kBlockCacheUsage, &bytes);
  return bytes;
}

std::string ActivationStore::other_writer() const {
  if (!read_only_ || writer_pid(real_dir_) == 0) return "";
  return writer_lock_message(dir_, real_dir_);
}

Status ActivationStore::read_manifest(Manifest* out) const {
  std::string text;
  auto s = db_->Get(rocksdb::ReadOptions(), handles_[kDefault], kManifestKey, &text);
  if (s.IsNotFound()) return Status::not_found("cache " + dir_ + " has no manifest");
  if (!s.ok()) return from_rocks(s, "reading the manifest of " + dir_);
  Status st = Manifest::from_json_string(text, out);
  if (!st.ok()) return st;
  // Counts written ahead of an ingest that did not happen (its writer died in between) are
  // taken back here already, for readers that open before a writer settles the note.
  bool found = false, undo = false;
  int64_t records = 0, bytes = 0;
  st = read_pending_ingest(&found, &undo, &records, &bytes);
  if (!st.ok()) return st;
  if (undo) {
    out->records -= records;
    out->record_bytes -= bytes;
    if (out->records < 0 || out->record_bytes < 0) {
      return Status::corruption("cache " + dir_ + ": its note of a pending ingest takes back " +
                                "more records than its manifest counts");
    }
  }
  return Status();
}

Status ActivationStore::read_pending_ingest(bool* found, bool* undo, int64_t* records,
                                            int64_t* bytes) const {
  *found = *undo = false;
  std::string note;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), handles_[kDefault], kPendingIngestKey, &note);
  if (s.IsNotFound()) return Status();
  if (!s.ok()) return from_rocks(s, "reading cache " + dir_);
  const nlohmann::json j = nlohmann::json::parse(note, nullptr, /*allow_exceptions=*/false);
  Key probe;
  if (!j.is_object() || !j.contains("probe") || !j["probe"].is_string() ||
      !j.contains("records") || !j["records"].is_number_integer() ||
      !j.contains("record_bytes") || !j["record_bytes"].is_number_integer() ||
      !key_from_hex(j["probe"].get<std::string>(), &probe)) {
    return Status::corruption("cache " + dir_ + " has a malformed note of a pending ingest");
  }
  *found = true;
  *records = j["records"].get<int64_t>();
  *bytes = j["record_bytes"].get<int64_t>();
  std::string value;
  s = db_->Get(rocksdb::ReadOptions(), handles_[kRecords], probe.to_bytes(), &value);
  if (s.IsNotFound()) {
    *undo = true;  // the ingest is all or nothing: without the probe, none of it happened
    return Status();
  }
  return from_rocks(s, "reading cache " + dir_);
}

Status ActivationStore::get_blob(const std::string& name, std::string* out) const {
  auto s = db_->Get(rocksdb::ReadOptions(), handles_[kDefault], kBlobPrefix + name, out);
  return from_rocks(s, "blob " + name + " in " + dir_);
}

Status ActivationStore::get_record(const Key& key, std::string* out) const {
  auto s = db_->Get(rocksdb::ReadOptions(), handles_[kRecords], key.to_bytes(), out);
  return from_rocks(s, "record " + key.to_hex());
}

void ActivationStore::multi_get(const std::vector<Key>& keys,
                                const std::function<void(size_t, std::string_view)>& fn,
                                std::vector<Status>* statuses) const {
  multi_get(keys.data(), keys.size(), fn, statuses);
}

void ActivationStore::multi_get(const Key* keys, size_t n,
                                const std::function<void(size_t, std::string_view)>& fn,
                                std::vector<Status>* statuses) const {
  statuses->assign(n, Status());
  if (n == 0) return;
  std::vector<char> key_bytes(n * Key::kBytes);
  std::vector<rocksdb::Slice> slices(n);
  for (size_t i = 0; i < n; ++i) {
    keys[i].to_bytes(key_bytes.data() + i * Key::kBytes);
    slices[i] = rocksdb::Slice(key_bytes.data() + i * Key::kBytes, Key::kBytes);
  }
  std::vector<rocksdb::PinnableSlice> values(n);
  std::vector<rocksdb::Status> rs(n);
  db_->MultiGet(rocksdb::ReadOptions(), handles_[kRecords], n, slices.data(), values.data(),
                rs.data());
  for (size_t i = 0; i < n; ++i) {
    if (rs[i].ok()) {
      fn(i, std::string_view(values[i].data(), values[i].size()));
    } else {
      (*statuses)[i] = from_rocks(rs[i], "record " + keys[i].to_hex());
    }
  }
}

Status ActivationStore::read_index(const std::string& split, std::vector<IndexEntry>* out) const {
  out->clear();
  const std::string prefix = index_prefix(split);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), handles_[kSamples]));
  int64_t expected = 0;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const rocksdb::Slice k = it->key();
    const rocksdb::Slice v = it->value();
    if (k.size() != prefix.size() + 8 || v.size() != Key::kBytes + 8) {
      return Status::corruption("samples index of split " + split + " has a malformed entry");
    }
    const int64_t position = static_cast<int64_t>(get_be64(k.data() + prefix.size()));
    if (position != expected) {
      return Status::corruption("samples index of split " + split + " has a gap at position " +
                                std::to_string(expected));
    }
    IndexEntry e;
    Key::from_bytes(std::string_view(v.data(), Key::kBytes), &e.key);
    e.label = static_cast<int64_t>(get_le64(v.data() + Key::kBytes));
    out->push_back(e);
    ++expected;
  }
  return from_rocks(it->status(), "reading the samples index of split " + split);
}

Status ActivationStore::read_split_index(const std::string& split, const SplitInfo& info,
                                         std::vector<IndexEntry>* out) const {
  Status st = read_index(split, out);
  if (!st.ok()) return st;
  const int64_t n = static_cast<int64_t>(out->size());
  if ((info.complete && n != info.samples) || n > info.samples) {
    return Status::corruption("split " + split + " of cache " + dir_ + " has " +
                              std::to_string(n) + " index entries, its manifest says " +
                              std::to_string(info.samples));
  }
  return Status();
}

Status ActivationStore::for_each_record(
    const std::function<bool(const Key&, std::string_view)>& fn) const {
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, handles_[kRecords]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    Key key;
    if (!Key::from_bytes(std::string_view(it->key().data(), it->key().size()), &key)) {
      return Status::corruption("record with a malformed key of " +
                                std::to_string(it->key().size()) + " bytes");
    }
    if (!fn(key, std::string_view(it->value().data(), it->value().size()))) break;
  }
  return from_rocks(it->status(), "reading the records of " + dir_);
}

Status ActivationStore::verify_files() const {
  // VerifyChecksum opens every table file again by name: a reader holds the shared open lock
  // meanwhile, so that no writer's open or close deletes one of them in between.
  OpenLock lock;
  if (read_only_) {
    Status st = OpenLock::acquire(real_dir_, /*exclusive=*/false, kOpenLockSeconds, &lock);
    if (!st.ok()) return st;
  }
  return from_rocks(db_->VerifyChecksum(), "verifying the files of " + dir_);
}

uint64_t ActivationStore::disk_bytes() const {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(real_dir_, ec)) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".sst" && ext != ".log") continue;
    const uintmax_t size = entry.file_size(ec);
    if (!ec) total += size;  // a file deleted since the listing counts nothing
  }
  return total;
}

Status ActivationStore::write(Batch* batch, bool sync) { return apply(batch, sync, /*logged=*/true); }

Status ActivationStore::write_unlogged(Batch* batch) { return apply(batch, false, /*logged=*/false); }

Status ActivationStore::apply(Batch* batch, bool sync, bool logged) {
  if (read_only_) return Status::invalid_argument("cache " + dir_ + " is open read-only");
  if (&batch->store_ != this) return Status::invalid_argument("batch belongs to another cache");
  if (logged && unlogged_) {
    const Status st = flush();
    if (!st.ok()) return st;
  }
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  wo.disableWAL = !logged;
  if (!logged) unlogged_ = true;
  return from_rocks(db_->Write(wo, batch->batch_.get()), "writing to cache " + dir_);
}

std::string ActivationStore::staging_dir() const {
  return (std::filesystem::path(real_dir_) / kStagingDirName).string();
}

Status ActivationStore::settle_pending_ingest() {
  bool found = false, undo = false;
  int64_t records = 0, bytes = 0;
  Status st = read_pending_ingest(&found, &undo, &records, &bytes);
  if (!st.ok() || !found) return st;
  rocksdb::WriteBatch batch;
  if (undo) {
    Manifest m;
    st = read_manifest(&m);  // the counts taken back
    if (!st.ok()) return st;
    batch.Put(handles_[kDefault], kManifestKey, m.to_json_string());
  }
  batch.Delete(handles_[kDefault], kPendingIngestKey);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return from_rocks(db_->Write(wo, &batch), "writing to cache " + dir_);
}

Status ActivationStore::ingest_records(const std::vector<std::string>& files, Manifest* manifest) {
  if (read_only_) return Status::invalid_argument("cache " + dir_ + " is open read-only");
  if (files.empty()) return Status();
  // What the files hold, from their own properties; the probe is the first file's first key.
  int64_t records = 0, bytes = 0;
  std::string probe;
  for (const std::string& file : files) {
    rocksdb::SstFileReader reader{rocksdb::Options()};
    rocksdb::Status s = reader.Open(file);
    if (!s.ok()) return from_rocks(s, "record file " + file);
    const auto props = reader.GetTableProperties();
    records += static_cast<int64_t>(props->num_entries);
    bytes += static_cast<int64_t>(props->raw_value_size);
    if (probe.empty()) {
      std::unique_ptr<rocksdb::Iterator> it(reader.NewIterator(rocksdb::ReadOptions()));
      it->SeekToFirst();
      if (!it->Valid()) {
        return it->status().ok() ? Status::invalid_argument("record file " + file + " is empty")
                                 : from_rocks(it->status(), "record file " + file);
      }
      probe = it->key().ToString();
    }
  }
  Key probe_key;
  if (!Key::from_bytes(probe, &probe_key)) {
    return Status::invalid_argument("record file " + files[0] + " holds a key of " +
                                    std::to_string(probe.size()) + " bytes, not a record's");
  }
  Manifest after = *manifest;
  after.records += records;
  after.record_bytes += bytes;
  const nlohmann::json note = {
      {"records", records}, {"record_bytes", bytes}, {"probe", probe_key.to_hex()}};
  rocksdb::WriteOptions synced;
  synced.sync = true;
  {
    rocksdb::WriteBatch batch;
    batch.Put(handles_[kDefault], kManifestKey, after.to_json_string());
    batch.Put(handles_[kDefault], kPendingIngestKey, note.dump());
    rocksdb::Status s = db_->Write(synced, &batch);
    if (!s.ok()) return from_rocks(s, "writing to cache " + dir_);
  }
  rocksdb::IngestExternalFileOptions io;
  io.move_files = true;                     // hard links on the same file system, else copies
  io.verify_checksums_before_ingest = true;  // a damaged staging file is refused
  io.write_global_seqno = false;            // the files are not modified (the MANIFEST has it)
  const rocksdb::Status ingested = db_->IngestExternalFile(handles_[kRecords], files, io);
  // Settles the note either way: drops it after an ingest, takes the counts back after a failure.
  const Status settled = settle_pending_ingest();
  if (!ingested.ok()) return from_rocks(ingested, "ingesting record files into cache " + dir_);
  if (!settled.ok()) return settled;
  *manifest = after;
  return Status();
}

struct RecordFileWriter::Rep {
  rocksdb::Options options;
  std::unique_ptr<rocksdb::SstFileWriter> writer;
  std::string last_key;
};

Status RecordFileWriter::open(const std::string& path, const StoreOptions& options,
                              std::unique_ptr<RecordFileWriter>* out) {
  Status st;
  const rocksdb::CompressionType compression = compression_of(options.compression, &st);
  if (!st.ok()) return st;
  std::unique_ptr<RecordFileWriter> w(new RecordFileWriter());
  w->rep_ = std::make_unique<Rep>();
  w->path_ = path;
  // The records family's table options, without a block cache (the file is written once).
  w->rep_->options = rocksdb::Options(rocksdb::DBOptions(),
                                      family_options(/*records=*/true, compression, nullptr));
  w->rep_->writer =
      std::make_unique<rocksdb::SstFileWriter>(rocksdb::EnvOptions(), w->rep_->options);
  const rocksdb::Status s = w->rep_->writer->Open(path);
  if (!s.ok()) return from_rocks(s, "cannot create record file " + path);
  *out = std::move(w);
  return Status();
}

RecordFileWriter::~RecordFileWriter() {
  if (rep_ && !finished_) {
    rep_->writer.reset();  // closes the file
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
}

Status RecordFileWriter::add(const Key& key, std::string_view record) {
  if (finished_) return Status::invalid_argument("record file " + path_ + " is finished");
  std::string k = key.to_bytes();
  if (records_ > 0 && !(rep_->last_key < k)) {
    return Status::invalid_argument("record file " + path_ + ": key " + key.to_hex() +
                                    " is not above the previous one");
  }
  const rocksdb::Status s =
      rep_->writer->Put(k, rocksdb::Slice(record.data(), record.size()));
  if (!s.ok()) return from_rocks(s, "writing record file " + path_);
  rep_->last_key = std::move(k);
  ++records_;
  record_bytes_ += static_cast<int64_t>(record.size());
  return Status();
}

Status RecordFileWriter::finish() {
  if (finished_) return Status();
  if (records_ == 0) return Status::invalid_argument("record file " + path_ + " has no records");
  const rocksdb::Status s = rep_->writer->Finish();
  if (!s.ok()) return from_rocks(s, "finishing record file " + path_);
  finished_ = true;
  return Status();
}

Status ActivationStore::flush() {
  if (read_only_) return Status();
  rocksdb::FlushOptions fo;
  const bool unlogged = unlogged_.exchange(false);
  const Status st = from_rocks(db_->Flush(fo, handles_), "flushing cache " + dir_);
  if (!st.ok() && unlogged) unlogged_ = true;
  return st;
}

Status ActivationStore::compact_records() {
  if (read_only_) return Status::invalid_argument("cache " + dir_ + " is open read-only");
  rocksdb::CompactRangeOptions co;
  co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  return from_rocks(db_->CompactRange(co, handles_[kRecords], nullptr, nullptr),
                    "compacting cache " + dir_);
}

}  // namespace recycle
