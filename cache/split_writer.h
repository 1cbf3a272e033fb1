// SplitWriter: the one way records, a split's index and the manifest reach a cache. Every writer
// calls it: recycle-build's chunk loop and its distributed build's rank 0
// (engine/precompute/build_stages.cc), the library's CacheWriter (engine/jobs/cache_writer.cc,
// and through it recycle.build in Python), recycle-predict's --write-back and recycle-inspect
// --compact (both records only: a writer of no split). ActivationStore::Batch keeps every write
// (records, index, manifest, blobs) and ActivationStore its write() private to this file's
// classes (and to ActivationStore's ingest of record files, which WritableSplit calls): a new
// writer cannot appear without one. What decides which
// samples need a record (the plan) stays with them; how a write is made, and what a crash may
// leave, is here:
//
//   begin(info, stored)    the split's first write, logged: its manifest entry (data, counts,
//                          augmentation) marked incomplete, the stored index cut to the split's
//                          length, and a new cache's head in the same batch
//   w = stage(); w.put_record(...); w.put_index(...); seal(&w)
//                          a chunk's records and index entries in one batch, sealed with the
//                          manifest's counts (records, record bytes) as they are after it: the
//                          counts stay consistent with the data after a crash
//   write(&w)              the sealed batch after the free-space check, without the write-ahead
//                          log: a crash loses the chunks since the last flush, and a rerun
//                          computes them again from the index that survived (the column families
//                          flush together). With flush_seconds set, write flushes once that long
//                          has passed since the last flush.
//   finish()               the split marked complete (unlogged) and the memtables flushed: the
//                          chunks and the completed manifest durable together
//
// A record is put in the same batch as, or a batch before, any index entry that points to it
// (ActivationStore's invariant): callers put a chunk's records and its entries in one staged
// write. The manifest is the caller's (the stored one, or the requested one for a new cache):
// the writer changes its counts and its split's entry, nothing else.
//
// Thread safety: stage, seal, begin and finish run on one thread; write may run on another (a
// build's writer thread) while that thread stages the next chunk: write touches only the store,
// the write count and the flush clock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "cache/activation_store.h"
#include "cache/manifest.h"

namespace recycle {

// One chunk's writes: records, index entries, then (seal) the manifest with its counts. Made
// by SplitWriter::stage; its batch is reachable by SplitWriter only.
class StagedWrite {
 public:
  std::string split;     // the split whose index entries it holds
  int64_t records = 0;   // records put (less those deleted)
  int64_t deleted_bytes = 0;  // bytes of the records deleted
  int64_t entries = 0;   // index entries put (a build's progress step)
  bool sealed = false;   // SplitWriter::seal: the manifest is in it; nothing more may be put

  void put_record(const Key& key, std::string_view record);
  // Removes a stored record of `bytes` bytes (recycle-inspect --compact): the counts go down.
  void delete_record(const Key& key, int64_t bytes);
  void put_index(int64_t position, const IndexEntry& entry);  // not for a writer of no split
  // Bytes of the records put (kept after the write, which takes the batch back).
  uint64_t record_bytes() const { return batch_ ? batch_->record_bytes() : written_bytes_; }

 private:
  friend class SplitWriter;
  friend class StoreTestAccess;
  // Throws std::logic_error when there is no batch (a moved-from or default write) or it is
  // sealed.
  void require_open(const char* what) const;

  std::unique_ptr<ActivationStore::Batch> batch_;
  uint64_t written_bytes_ = 0;
};

class SplitWriter {
 public:
  // `store` (open for writing) and `manifest` must outlive the writer. `split` "": a writer of
  // records and counts only (no split's index or entry; begin is refused, finish only flushes).
  SplitWriter(ActivationStore* store, Manifest* manifest, std::string split);
  SplitWriter(const SplitWriter&) = delete;
  SplitWriter& operator=(const SplitWriter&) = delete;

  // Flush the memtables after a write once this many seconds passed since the last flush (or
  // since the writer was made); negative (the default): flush at finish only.
  void set_flush_seconds(double seconds) { flush_seconds_ = seconds; }

  // The split's first write, logged: the manifest's entry for the split set from `info` (data,
  // samples, unique, augment, views) and marked incomplete; the stored index cut to
  // info.samples when it holds more (`stored_entries`); with them, unless empty, the blob
  // "head" (a new cache's initial head). Once only.
  void begin(const SplitInfo& info, int64_t stored_entries, std::string_view head = {});
  bool begun() const { return begun_; }

  // A new batch for a chunk of the split (reserve: the bytes it will hold, when known).
  StagedWrite stage(size_t reserve = 0) const;
  // Adds the chunk's records and bytes to the manifest's counts and puts the manifest into the
  // batch. Once per staged write; nothing may be put after it.
  void seal(StagedWrite* w);
  // Writes a sealed batch without the write-ahead log, after the free-space check (throws
  // std::runtime_error below the reserve: what was written is kept). Flushes per
  // set_flush_seconds. The written batch is emptied and kept for the next stage() (its memory
  // reused, not faulted in again: a chunk's batch holds hundreds of MB); w keeps its counts
  // (records, entries, record_bytes), not its batch.
  void write(StagedWrite* w);
  // Marks the split complete (unlogged) and flushes the memtables; a writer of no split only
  // flushes them.
  void finish();

  // A blob written alone, logged and synced (recycle-inspect --convert-old-head's new head):
  // neither a record nor a split's, so no split writer is needed.
  static void write_blob(ActivationStore* store, const std::string& name, std::string_view bytes);

  // Writes made so far (begin, chunks, finish).
  int64_t writes() const { return writes_.load(); }
  const std::string& split() const { return split_; }

 private:
  ActivationStore* store_;
  Manifest* manifest_;
  std::string split_;
  bool begun_ = false;
  std::atomic<int64_t> writes_{0};
  double flush_seconds_ = -1;
  std::chrono::steady_clock::time_point flushed_ = std::chrono::steady_clock::now();
  // The last written batch, emptied: stage() (the chunk loop's thread) takes what write() (the
  // writer's thread) leaves.
  mutable std::mutex spare_mutex_;
  mutable std::unique_ptr<ActivationStore::Batch> spare_;
};

// Throws std::runtime_error (what was written is kept; rerun to resume) when the file system
// of `dir` has less free space than a reserve for RocksDB's flushes plus twice batch_bytes.
void check_free_space(const std::string& dir, uint64_t batch_bytes);

}  // namespace recycle
