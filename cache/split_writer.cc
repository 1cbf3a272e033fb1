// cache/split_writer.h: the writes of a split, and the free-space check before each.
#include "cache/split_writer.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace recycle {

namespace {

// Stops a write cleanly while the cache's filesystem still has room: RocksDB needs headroom
// to flush its memtables (up to ~96 MB here), and Debian's RocksDB aborts on an assertion
// rather than returning an error when a write fails for lack of space.
constexpr uint64_t kFreeSpaceReserve = 96ull << 20;

}  // namespace

void check_free_space(const std::string& dir, uint64_t batch_bytes) {
  std::error_code ec;
  const std::filesystem::space_info space = std::filesystem::space(dir, ec);
  if (ec) return;  // cannot tell; RocksDB will report real errors
  const uint64_t need = kFreeSpaceReserve + 2 * batch_bytes;
  if (space.available < need) {
    throw std::runtime_error("not enough free space for cache " + dir + ": " +
                             std::to_string(space.available >> 20) +
                             " MB free, the build stops below " + std::to_string(need >> 20) +
                             " MB (what it wrote so far is kept; rerun to resume)");
  }
}

void StagedWrite::require_open(const char* what) const {
  if (!batch_) throw std::logic_error(std::string("StagedWrite::") + what + ": no batch");
  if (sealed) throw std::logic_error(std::string("StagedWrite::") + what + ": sealed already");
}

void StagedWrite::put_record(const Key& key, std::string_view record) {
  require_open("put_record");
  batch_->put_record(key, record);
  ++records;
}

void StagedWrite::delete_record(const Key& key, int64_t bytes) {
  require_open("delete_record");
  batch_->delete_record(key);
  --records;
  deleted_bytes += bytes;
}

void StagedWrite::put_index(int64_t position, const IndexEntry& entry) {
  require_open("put_index");
  if (split.empty()) throw std::logic_error("StagedWrite::put_index: a writer of no split");
  batch_->put_index(split, position, entry);
  ++entries;
}

SplitWriter::SplitWriter(ActivationStore* store, Manifest* manifest, std::string split)
    : store_(store), manifest_(manifest), split_(std::move(split)) {
  if (!store_ || !manifest_)
    throw std::logic_error("SplitWriter: a store and a manifest are needed");
  if (store_->read_only()) throw std::logic_error("SplitWriter: the store is open read-only");
}

void SplitWriter::begin(const SplitInfo& info, int64_t stored_entries, std::string_view head) {
  if (begun_) throw std::logic_error("SplitWriter::begin: the split is begun already");
  if (split_.empty()) throw std::logic_error("SplitWriter::begin: a writer of no split");
  SplitInfo& entry = manifest_->splits[split_];
  entry = info;
  entry.complete = false;
  ActivationStore::Batch first(*store_);
  if (!head.empty()) first.put_blob("head", head);
  first.put_manifest(*manifest_);
  if (stored_entries > info.samples) first.truncate_index(split_, info.samples);
  store_->write(&first).throw_if_error();
  ++writes_;
  begun_ = true;
}

StagedWrite SplitWriter::stage(size_t reserve) const {
  StagedWrite w;
  {
    std::lock_guard<std::mutex> lock(spare_mutex_);
    if (spare_ && spare_->capacity() >= reserve) w.batch_ = std::move(spare_);
  }
  if (!w.batch_) w.batch_ = std::make_unique<ActivationStore::Batch>(*store_, reserve);
  w.split = split_;
  return w;
}

void SplitWriter::seal(StagedWrite* w) {
  w->require_open("seal");
  manifest_->records += w->records;
  manifest_->record_bytes = std::max<int64_t>(
      0, manifest_->record_bytes + static_cast<int64_t>(w->record_bytes()) - w->deleted_bytes);
  w->batch_->put_manifest(*manifest_);  // counts stay consistent with the data after a crash
  w->sealed = true;
}

void SplitWriter::write(StagedWrite* w) {
  if (!w->sealed) throw std::logic_error("SplitWriter::write: the staged write is not sealed");
  if (!w->batch_) throw std::logic_error("SplitWriter::write: the staged write was written");
  check_free_space(store_->dir(), w->record_bytes());
  store_->write_unlogged(w->batch_.get()).throw_if_error();
  ++writes_;
  w->written_bytes_ = w->batch_->record_bytes();
  w->batch_->clear();
  {
    std::lock_guard<std::mutex> lock(spare_mutex_);
    spare_ = std::move(w->batch_);
  }
  if (flush_seconds_ < 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - flushed_).count() >= flush_seconds_) {
    store_->flush().throw_if_error();  // what was written so far survives a kill
    flushed_ = now;
  }
}

void SplitWriter::write_blob(ActivationStore* store, const std::string& name,
                             std::string_view bytes) {
  ActivationStore::Batch batch(*store);
  batch.put_blob(name, bytes);
  store->write(&batch, /*sync=*/true).throw_if_error();
}

void SplitWriter::finish() {
  if (split_.empty()) {
    store_->flush().throw_if_error();
    return;
  }
  manifest_->splits[split_].complete = true;
  ActivationStore::Batch last(*store_);
  last.put_manifest(*manifest_);
  store_->write_unlogged(&last).throw_if_error();
  ++writes_;
  store_->flush().throw_if_error();  // the chunks and the completed manifest, durable together
}

}  // namespace recycle
