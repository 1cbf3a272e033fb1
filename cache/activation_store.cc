#include "cache/activation_store.h"

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

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
  for (int i = 7; i >= 0; --i) k.push_back(static_cast<char>((uint64_t(position) >> (8 * i)) & 0xFF));
  return k;
}

std::string index_value(const IndexEntry& e) {
  std::string v = e.key.to_bytes();
  for (int i = 0; i < 8; ++i) v.push_back(static_cast<char>((uint64_t(e.label) >> (8 * i)) & 0xFF));
  return v;
}

rocksdb::CompressionType compression_of(const std::string& name, Status* st) {
  if (name == "none") return rocksdb::kNoCompression;
  if (name == "lz4") return rocksdb::kLZ4Compression;
  if (name == "zstd") return rocksdb::kZSTD;
  *st = Status::invalid_argument("unknown compression '" + name + "' (none, lz4, zstd)");
  return rocksdb::kNoCompression;
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

Status ActivationStore::destroy(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status();
  if (!fs::exists(fs::path(dir) / "CURRENT", ec)) {
    if (fs::is_directory(dir, ec) && fs::is_empty(dir, ec)) return Status();
    return Status::invalid_argument(dir + " is not a cache; not deleting it");
  }
  rocksdb::Options options;
  Status st = from_rocks(rocksdb::DestroyDB(dir, options), "deleting cache " + dir);
  if (!st.ok()) return st;
  fs::remove(dir, ec);  // only succeeds when empty; anything else the user put there stays
  return Status();
}

Status ActivationStore::open(const std::string& dir, const StoreOptions& options,
                             std::unique_ptr<ActivationStore>* out) {
  Status st;
  const rocksdb::CompressionType compression = compression_of(options.compression, &st);
  if (!st.ok()) return st;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (options.read_only || !options.create_if_missing) {
    if (!fs::exists(fs::path(dir) / "CURRENT", ec)) {
      return Status::not_found("no cache at " + dir);
    }
  }

  rocksdb::DBOptions db_options;
  db_options.create_if_missing = options.create_if_missing && !options.read_only;
  db_options.create_missing_column_families = !options.read_only;
  db_options.paranoid_checks = true;
  db_options.max_background_jobs = 2;
  db_options.keep_log_file_num = 3;

  auto cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  auto cf_options = [&](bool records) {
    rocksdb::ColumnFamilyOptions cf;
    rocksdb::BlockBasedTableOptions table;
    table.block_cache = cache;
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
    table.block_size = records ? 16 * 1024 : 4 * 1024;
    cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    cf.compression = records ? compression : rocksdb::kLZ4Compression;
    cf.write_buffer_size = records ? 64 << 20 : 16 << 20;
    return cf;
  };
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
      {rocksdb::kDefaultColumnFamilyName, cf_options(false)},
      {"records", cf_options(true)},
      {"samples", cf_options(false)},
  };

  auto open_db = [&](const std::string& path, bool read_only, ActivationStore* store,
                     rocksdb::DB** db) {
    store->handles_.clear();
    return read_only ? rocksdb::DB::OpenForReadOnly(db_options, path, cfs, &store->handles_, db)
                     : rocksdb::DB::Open(db_options, path, cfs, &store->handles_, db);
  };

  std::unique_ptr<ActivationStore> store(new ActivationStore());
  store->dir_ = dir;
  store->read_only_ = options.read_only;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s;
  if (options.read_only) {
    // A writer may delete an old WAL or SST file while this instance opens (after a flush or
    // a compaction): retry a few times before calling it an error.
    for (int attempt = 0; attempt < 20; ++attempt) {
      s = open_db(dir, true, store.get(), &db);
      if (s.ok() || !(s.IsIOError() || s.IsPathNotFound())) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  } else {
    if (!fs::exists(fs::path(dir) / "CURRENT", ec)) {
      // A new cache is made whole in a sibling directory, then renamed into place, so that a
      // kill during creation never leaves a half-made cache behind.
      if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec))) {
        return Status::invalid_argument(dir + " exists and is not a cache; not writing into it");
      }
      const fs::path parent = fs::absolute(dir).parent_path();
      fs::create_directories(parent, ec);
      if (ec) return Status::io_error("cannot create " + parent.string() + ": " + ec.message());
      const std::string staging = dir + ".creating";
      fs::remove_all(staging, ec);
      ActivationStore scratch;
      rocksdb::DB* fresh = nullptr;
      s = open_db(staging, false, &scratch, &fresh);
      if (!s.ok()) return from_rocks(s, "cannot create cache " + dir);
      for (auto* h : scratch.handles_) fresh->DestroyColumnFamilyHandle(h);
      scratch.handles_.clear();
      s = fresh->Close();
      delete fresh;
      if (!s.ok()) return from_rocks(s, "cannot create cache " + dir);
      fs::remove(dir, ec);  // an empty directory the user made
      fs::rename(staging, dir, ec);
      if (ec) return Status::io_error("cannot create cache " + dir + ": " + ec.message());
    }
    s = open_db(dir, false, store.get(), &db);
  }
  if (s.IsInvalidArgument() && s.ToString().find("Column family not found") != std::string::npos) {
    return Status::corruption("cache " + dir + " lacks its column families (not a cache?)");
  }
  if (!s.ok()) return from_rocks(s, "cannot open cache " + dir);
  store->db_.reset(db);
  *out = std::move(store);
  return Status();
}

ActivationStore::~ActivationStore() {
  if (db_) {
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
    db_->Close();
  }
}

Status ActivationStore::read_manifest(Manifest* out) const {
  std::string text;
  auto s = db_->Get(rocksdb::ReadOptions(), handles_[kDefault], kManifestKey, &text);
  if (s.IsNotFound()) return Status::not_found("cache " + dir_ + " has no manifest");
  if (!s.ok()) return from_rocks(s, "reading the manifest of " + dir_);
  return Manifest::from_json_string(text, out);
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
  const size_t n = keys.size();
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
    int64_t position = 0;
    for (size_t i = 0; i < 8; ++i) position = (position << 8) | static_cast<uint8_t>(k[prefix.size() + i]);
    if (position != expected) {
      return Status::corruption("samples index of split " + split + " has a gap at position " +
                                std::to_string(expected));
    }
    IndexEntry e;
    Key::from_bytes(std::string_view(v.data(), Key::kBytes), &e.key);
    uint64_t label = 0;
    for (int i = 7; i >= 0; --i) label = (label << 8) | static_cast<uint8_t>(v[Key::kBytes + i]);
    e.label = static_cast<int64_t>(label);
    out->push_back(e);
    ++expected;
  }
  return from_rocks(it->status(), "reading the samples index of split " + split);
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
  return from_rocks(db_->VerifyChecksum(), "verifying the files of " + dir_);
}

uint64_t ActivationStore::disk_bytes() const {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string ext = entry.path().extension().string();
    if (ext == ".sst" || ext == ".log") total += entry.file_size(ec);
  }
  return total;
}

Status ActivationStore::write(Batch* batch, bool sync) {
  if (read_only_) return Status::invalid_argument("cache " + dir_ + " is open read-only");
  if (&batch->store_ != this) return Status::invalid_argument("batch belongs to another cache");
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  return from_rocks(db_->Write(wo, batch->batch_.get()), "writing to cache " + dir_);
}

Status ActivationStore::flush() {
  if (read_only_) return Status();
  rocksdb::FlushOptions fo;
  return from_rocks(db_->Flush(fo, handles_), "flushing cache " + dir_);
}

}  // namespace recycle
