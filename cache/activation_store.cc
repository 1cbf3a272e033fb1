#include "cache/activation_store.h"

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <stdexcept>

#include "base/coding.h"
#include "cache/cache_dir.h"
#include "cache/read_pool.h"
#include "cache/store_rocksdb.h"

// ActivationStore's reads and writes: batches, records, the samples index, the manifest and
// blobs, flushes and compaction. Open, close and destroy are in cache/store_open.cc, the ingest
// of record files in cache/record_ingest.cc, RocksDB's tuning in cache/store_rocksdb.cc.

namespace recycle {

using namespace store_rocksdb;

namespace {

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

}  // namespace

ActivationStore::Batch::Batch(const ActivationStore& store, size_t reserve)
    : store_(store), batch_(std::make_unique<rocksdb::WriteBatch>(reserve)) {}
ActivationStore::Batch::~Batch() = default;

size_t ActivationStore::Batch::capacity() const { return batch_->Data().capacity(); }

void ActivationStore::Batch::clear() {
  batch_->Clear();
  record_bytes_ = 0;
}

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
  // Parts of at least kMinKeysPerPart keys, one MultiGet each: RocksDB reads the blocks one
  // MultiGet misses one after the other, so the parts' threads keep that many reads in flight.
  constexpr size_t kMinKeysPerPart = 4;
  const size_t parts =
      read_pool_ ? std::min<size_t>(read_pool_->threads(), n / kMinKeysPerPart) : 1;
  rocksdb::ReadOptions reads;
  reads.verify_checksums = verify_reads_;
  auto read_part = [&](int p) {
    const size_t begin = n * p / parts, end = n * (p + 1) / parts;
    db_->MultiGet(reads, handles_[kRecords], end - begin, slices.data() + begin,
                  values.data() + begin, rs.data() + begin);
  };
  if (parts > 1) {
    read_pool_->run(static_cast<int>(parts), read_part);
  } else {
    read_part(0);
  }
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
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), handles_[kSamples]));
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
    if (ext != ".sst" && ext != ".blob" && ext != ".log") continue;
    const uintmax_t size = entry.file_size(ec);
    if (!ec) total += size;  // a file deleted since the listing counts nothing
  }
  return total;
}

Status ActivationStore::write(Batch* batch, bool sync) {
  return apply(batch, sync, /*logged=*/true);
}

Status ActivationStore::write_unlogged(Batch* batch) {
  return apply(batch, false, /*logged=*/false);
}

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
  const Status st = from_rocks(db_->Write(wo, batch->batch_.get()), "writing to cache " + dir_);
  // Every 64 MB written (a memtable of records), what compaction made obsolete meanwhile goes;
  // when a reader is opening then, the next writes try again.
  constexpr int64_t kReleaseEveryBytes = int64_t{64} << 20;
  if (st.ok() && written_since_release_.fetch_add(static_cast<int64_t>(
                     batch->batch_->GetDataSize())) >= kReleaseEveryBytes &&
      release_obsolete_files()) {
    written_since_release_ = 0;
  }
  return st;
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
  // Every blob file's live records are written anew, so the files that held deleted ones go.
  co.blob_garbage_collection_policy = rocksdb::BlobGarbageCollectionPolicy::kForce;
  co.blob_garbage_collection_age_cutoff = 1.0;
  return from_rocks(db_->CompactRange(co, handles_[kRecords], nullptr, nullptr),
                    "compacting cache " + dir_);
}

}  // namespace recycle
