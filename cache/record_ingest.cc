// ActivationStore's ingest of record files (made by RecordFileWriter) and its recovery: the
// note of a pending ingest that keeps the manifest's counts exact across a crash between
// writing the counts and ingesting the files (see ActivationStore::ingest_records), and the
// staging area where the files are made.
#include <rocksdb/db.h>
#include <rocksdb/sst_file_reader.h>
#include <rocksdb/write_batch.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cache/activation_store.h"
#include "cache/cache_dir.h"
#include "cache/key_hex.h"
#include "cache/store_rocksdb.h"

namespace recycle {

using namespace store_rocksdb;

std::string ActivationStore::staging_dir() const {
  return (std::filesystem::path(real_dir_) / kStagingDirName).string();
}

Status ActivationStore::read_pending_ingest(bool* found, bool* undo, int64_t* records,
                                            int64_t* bytes) const {
  *found = *undo = false;
  std::string note;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), handles_[kDefault], kPendingIngestKey, &note);
  if (s.IsNotFound()) return Status();
  if (!s.ok()) return from_rocks(s, "reading cache " + dir_);
  const nlohmann::json j = nlohmann::json::parse(note, nullptr, /*allow_exceptions=*/false);
  Key probe;
  if (!j.is_object() || !j.contains("probe") || !j["probe"].is_string() || !j.contains("records") ||
      !j["records"].is_number_integer() || !j.contains("record_bytes") ||
      !j["record_bytes"].is_number_integer() ||
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
  io.move_files = true;                      // hard links on the same file system, else copies
  io.verify_checksums_before_ingest = true;  // a damaged staging file is refused
  io.write_global_seqno = false;             // the files are not modified (the MANIFEST has it)
  const rocksdb::Status ingested = db_->IngestExternalFile(handles_[kRecords], files, io);
  // Settles the note either way: drops it after an ingest, takes the counts back after a failure.
  const Status settled = settle_pending_ingest();
  if (!ingested.ok()) return from_rocks(ingested, "ingesting record files into cache " + dir_);
  if (!settled.ok()) return settled;
  *manifest = after;
  return Status();
}

}  // namespace recycle
