// WritableSplit: a cache opened to write one split, the one way every writer opens it:
// recycle-build's SplitBuild (engine/precompute/build_stages.h, its distributed rank 0 too) and
// the library's CacheWriter (engine/jobs/cache_writer.cc, and through it recycle.build).
//
//   WritableSplit w({dir, split, compression, rebuild});   the store opened for writing (deleted
//                                                          first with rebuild); its manifest read
//   if (w.stored()) ...the caller's checks of the stored manifest (refuse_other_identity,
//                      refuse_other_shard and its own), throwing before anything is written
//   w.start(manifest, head);   the manifest the writes go with; the split's stored index and
//                              whether the store holds any record read
//   w.begin(info); chunks through w.writer() (cache/split_writer.h); w.finish()
//
// Damaged records (cache/damaged_records.h): the records on the cache's damaged-records list are
// damaged(); begin deletes those still stored (the plan of any split that points to one then
// computes it as a missing one), and finish takes those the split computed off the list.
//
// What differs between the writers (how they plan what to write, what they check) stays with
// them. Dropping it closes the store (releasing the cache's writer lock).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "cache/activation_store.h"
#include "cache/manifest.h"
#include "cache/split_writer.h"
#include "cache/store_options.h"

namespace recycle {

class WritableSplit {
 public:
  struct Options {
    std::string dir;
    std::string split;
    Compression compression = Compression::kNone;  // of the records written
    bool rebuild = false;  // delete the cache first (only a directory that is a cache)
  };
  // Opens (or creates) the cache in o.dir for writing and reads its manifest. Throws
  // std::runtime_error with one line (another writer, not a cache, a bad split name).
  explicit WritableSplit(const Options& o);
  ~WritableSplit();
  WritableSplit(const WritableSplit&) = delete;
  WritableSplit& operator=(const WritableSplit&) = delete;

  // The cache's manifest as stored; null for a new cache (none yet).
  const Manifest* stored() const { return is_new_ ? nullptr : &stored_; }
  // After the caller's checks: `manifest` is the one the writes go with (the stored one as the
  // caller reconciled it, or a new cache's requested one) and `head` the blob a new cache gets
  // with its first write ("" for none). Reads the split's index as stored and whether the store
  // holds any record.
  void start(Manifest manifest, const std::string& head);

  // ---- after start -------------------------------------------------------------------------
  Manifest& manifest() { return manifest_; }
  const ActivationStore& store() const { return *store_; }
  SplitWriter& writer() { return *writer_; }
  // The split's index as stored (moved out: call once).
  std::vector<IndexEntry> take_index() { return std::move(index_); }
  // The store held a record when start ran.
  bool had_records() const { return had_records_; }
  // The records on the cache's damaged-records list (KeyPlan::set_damaged).
  const std::unordered_set<Key, KeyHash>& damaged() const { return damaged_; }
  // The stored split is complete, built from `data`, with `samples` entries.
  bool complete_for(const std::string& data, int64_t samples) const;
  // The split's first write (SplitWriter::begin): its manifest entry from `info` marked
  // incomplete, the stored index cut to info.samples, a new cache's head with them; then the
  // damaged records deleted.
  void begin(const SplitInfo& info);
  // The split marked complete (SplitWriter::finish), then the damaged records among `computed`
  // (the records the split computed: KeyPlan::recomputed) taken off the list.
  void finish(const std::unordered_set<Key, KeyHash>& computed);
  // The cache's staging area (ActivationStore::staging_dir), and the ingest of record files
  // made there into it with the manifest's counts (ActivationStore::ingest_records).
  std::string staging_dir() const { return store_->staging_dir(); }
  void ingest_records(const std::vector<std::string>& files);

 private:
  void find_damaged();  // damaged_ from the list

  std::string dir_;
  std::string split_;
  std::unique_ptr<ActivationStore> store_;
  bool is_new_ = true;
  Manifest stored_;
  Manifest manifest_;
  std::string head_;
  std::unique_ptr<SplitWriter> writer_;  // on store_ and manifest_
  std::vector<IndexEntry> index_;
  int64_t stored_entries_ = 0;
  bool had_records_ = false;
  std::unordered_set<Key, KeyHash> damaged_;
  std::string real_dir_;  // the cache directory, links followed: where the list is
};

// Throws StaleCacheError (recycle/errors.h) with mismatch_message(dir, differences, hint) when
// `stored`'s identity is not `wanted`'s.
void refuse_other_identity(const Manifest& stored, const Manifest& wanted, const std::string& dir,
                           const std::string& hint);
// The same when `stored` holds `split` as another shard than `want` (or the whole split, or a
// shard, when the other is asked for): a sharded build's caches are not mixed.
void refuse_other_shard(const Manifest& stored, const std::string& split, const SplitShard& want,
                        const std::string& dir, const std::string& hint);

}  // namespace recycle
