// SplitTransaction: one split's write, as every writer of a cache makes it: recycle-build's
// SplitBuild (build_stages.h, its distributed rank 0 too) and the library's CacheWriter
// (engine/jobs/cache_writer.cc, and through it recycle.build). What differs between them is only
// where their chunks come from and the rules of their own they check a stored manifest by.
//
//   SplitTransaction t(request, own_checks, start);  the cache opened (WritableSplit: deleted
//                        first with rebuild); a stored manifest checked against the request:
//                        own_checks.before, the identity, own_checks.after, the split's views
//                        and augmentation, its shard (all before anything is written)
//   t.begin(info);       the split's first write (marked incomplete): the request's views,
//                        augmentation and shard with the writer's counts
//   t.stage(...);        each planned chunk's records and index entries in one sealed batch
//                        (written by SplitWriter::write, or a ChunkWriter's thread)
//   t.finish(computed);  the split marked complete, the memtables flushed
//   t.report(counts);    the report: this run's counters, the cache's records, the rates
//
// No LibTorch. Not thread safe (the staged writes are written elsewhere, one at a time).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "cache/manifest.h"
#include "cache/split_writer.h"
#include "cache/writable_split.h"
#include "engine/precompute/key_plan.h"
#include "recycle/build.h"  // BuildReport
#include "recycle/key.h"

namespace recycle {

// What a writer asks of the split it writes.
struct SplitRequest {
  WritableSplit::Options where;  // the cache directory, the split, compression, rebuild
  Manifest wanted;               // what the records are: a new cache's manifest
  // The blob a new cache gets with its first write (empty function or "": none): called for a
  // new cache only, so that a rerun does not serialise the head for nothing.
  std::function<std::string()> head;
  SplitShard shard;              // the manifest's (split_shard): SplitShard{} for the whole split
  std::string augment;           // canonical spec, "" with views 0
  int64_t views = 0;
  // How a refusal says to go on: "use --rebuild to start over" (another identity), and "use
  // another --cache, or --rebuild to start over" (other views, another shard).
  std::string start_over;
  std::string elsewhere;
};

// A writer's own rules for a stored manifest, run by the transaction's open (either may be empty):
// `before` ahead of the identity check (a more telling refusal of a case it would refuse too),
// `after` behind it (checks, and what the writer adopts from the cache: its class names).
struct StoredChecks {
  std::function<void(const Manifest& stored)> before;
  std::function<void(Manifest* stored)> after;
};

class SplitTransaction {
 public:
  using Clock = std::chrono::steady_clock;
  // Opens (or creates) the cache and checks a stored manifest, as the header says; `start` is
  // when the writer started (the report's seconds). Throws as WritableSplit does, and
  // StaleCacheError / std::runtime_error / InvalidArgument with one line for a refused cache
  // (closed again, nothing written).
  SplitTransaction(SplitRequest request, const StoredChecks& own_checks, Clock::time_point start);

  WritableSplit& split() { return *split_; }
  const WritableSplit& split() const { return *split_; }
  SplitWriter& writer() { return split_->writer(); }
  const SplitRequest& request() const { return request_; }

  // The split's first write (WritableSplit::begin): `info`'s data, classes, samples and unique
  // with the request's augmentation, views and shard.
  void begin(SplitInfo info);
  // The distinct keys of the split written so far, as the manifest's split entry counts them.
  void set_unique(int64_t unique);
  // Stages records[i] under record_keys[i] (records emptied: the batch holds its own copy) and
  // the entries entry_at(pos) of the positions plan.todo()[begin, end), seals the write and adds
  // its records, bytes and entries to the counters. The caller writes it.
  StagedWrite stage(const KeyPlan& plan, size_t begin, size_t end,
                    const std::vector<Key>& record_keys, std::vector<std::string>* records,
                    const std::function<IndexEntry(int64_t pos)>& entry_at);
  // Records `computed` of `bytes` bytes written by other means (a distributed build's ingest).
  void add_ingested(int64_t computed, int64_t bytes);
  // The split marked complete (WritableSplit::finish; `computed`: KeyPlan::recomputed).
  void finish(const std::unordered_set<Key, KeyHash>& computed);
  // `counts` (cache_dir, split, samples, unique, ...: the writer's) with this run's computed,
  // bytes and index_written, the shard, the cache's records, and finished_report's rest.
  BuildReport report(BuildReport counts) const;

 private:
  SplitRequest request_;
  Clock::time_point start_;
  std::unique_ptr<WritableSplit> split_;
  BuildReport counters_;  // computed, bytes, index_written
};

// `r` finished: views, records (unique times the views), skipped (what was not computed),
// cache_records, seconds since `start` and samples a second. For a report with no cache opened
// too (a distributed build's rank that only keys).
BuildReport finished_report(BuildReport r, int64_t views, int64_t cache_records,
                            SplitTransaction::Clock::time_point start);

// values[rows[0]], values[rows[1]], ...: the rows a shard keeps.
template <class T>
std::vector<T> rows_at(const std::vector<T>& values, const std::vector<int64_t>& rows) {
  std::vector<T> out;
  out.reserve(rows.size());
  for (int64_t i : rows) out.push_back(values[static_cast<size_t>(i)]);
  return out;
}

}  // namespace recycle
