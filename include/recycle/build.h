// Building an activation cache: run_build runs a model's frozen prefix once per distinct sample
// of a split and stores its outputs (BuildOptions in options.h), in one process or shared out
// among the ranks of a distributed build (DistOptions). Resumable: a rerun computes only what is
// missing and writes nothing when the split is already complete and unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "recycle/options.h"

namespace recycle {

// Where a process's build time went, in seconds: run_build's chunk loop (one process, or each
// rank of a sharded build: per_shard has each rank's; zeros in a distributed build and in the
// sharded job's own counts). On the chunk loop's thread, one stage after another:
struct BuildStageSeconds {
  double open = 0;     // every sample keyed, the cache opened and checked, the plan made
  double lookup = 0;   // each chunk's MultiGet of its keys (which have no record yet)
  double read = 0;     // waiting for a chunk's inputs (read a chunk ahead on a thread of their own)
  double start = 0;    // the inputs made into the prefix's batch, its forward started (on a CPU:
                       // the whole forward; on a GPU: queued, with the copies to the device)
  double outputs = 0;  // waiting for the forward's outputs (a GPU's, copied back), and the
                       // prefix's share measured on the first chunks
  double encode = 0;   // the outputs encoded into records
  double stage = 0;    // the records and index entries put into the chunk's write batch
  double write_wait = 0;  // waiting for the write of the chunk before
  double finish = 0;      // the split marked complete, the memtables flushed
  // Beside the loop, on the writer's thread: the chunks' write batches applied to the store.
  double write = 0;
  bool measured() const { return open > 0 || write > 0; }
};

struct BuildReport {
  std::string cache_dir;
  std::string split;
  int64_t samples = 0;        // samples in the split
  int64_t unique = 0;         // distinct keys among them
  int64_t views = 0;          // augmented views per sample (0: the samples as they are)
  int64_t computed = 0;       // records computed and written by this run (views count each)
  // records this split needs that were stored already or shared: samples (times views) minus
  // computed
  int64_t skipped = 0;
  int64_t index_written = 0;  // samples index entries written by this run
  int64_t files_left_out = 0;  // files that could not be decoded, left out (--on-bad-file skip)
  int64_t bytes = 0;          // record bytes written by this run (before compression)
  int64_t records = 0;        // distinct records of this split: unique (times views, when views)
  int64_t cache_records = 0;  // distinct records in the whole cache after the run (every split's)
  double seconds = 0;         // wall time of run_build
  double prefix_seconds = 0;  // of it, in the prefix's forward (this process; the rest is reading,
                              // keying, encoding, writing and opening/flushing the cache)
  double samples_per_s = 0;
  // The prefix's share of the whole model's forward time, measured on this run's first chunks
  // (the rest of the model timed on some of their outputs); -1 when not measured (nothing
  // computed here). The epoch speedups it implies, with a backward of about two forwards and the
  // cache's reads not counted: against full fine-tuning 3 / 3(1 - s) = 1 / (1 - s), against the
  // frozen prefix run online (s + 3(1 - s)) / 3(1 - s).
  double prefix_share = -1;
  double expected_speedup_vs_full() const;
  double expected_speedup_vs_online() const;
  BuildStageSeconds stage_seconds;  // where seconds went (one process: the chunk loop's stages)
  int ranks = 1;                // processes that computed records (1 unless distributed)
  // A sharded build (DistOptions::sharded): the shard count, and each rank's own report in
  // rank order (its cache, its shard's samples, what it computed). Every rank returns its own
  // report with shards set and per_shard empty, except rank 0, whose counts above are every
  // shard's together (cache_records: in every shard's cache; seconds: the slowest rank's).
  int shards = 0;
  int shard_index = 0;
  std::vector<BuildReport> per_shard;
  std::string to_json() const;  // one line
};

// Runs a build (options.validate() first). Throws std::invalid_argument (InvalidArgument,
// errors.h) on bad input, StaleCacheError for a cache built with another identity (naming what
// differs), std::runtime_error for a storage error; each with one clear line.
BuildReport run_build(const BuildOptions& options);

// With dist.distributed(): this process's part of a distributed build, one rank of
// dist.world_size, every rank calling it with the same options. It joins the job at dist.master
// (rendezvous, heartbeats); each rank reads and computes a share of the split's distinct samples
// and rank 0 writes the cache. A rank lost for dist.timeout_seconds (no heartbeat) or a failure
// on any rank ends every rank with one line. Every rank returns the same report: the counts of
// the whole build (ranks: the world). Without dist.distributed(): run_build(options).
BuildReport run_build(const BuildOptions& options, const DistOptions& dist);

// A sharded build's report from its shards' (BuildReport::to_json, in rank order): shard
// `own`'s with every shard's counts added up (seconds: the slowest shard's; files_left_out: the
// most any shard left out), ranks the shard count and each shard's report in per_shard, as JSON.
// What recycle-build --sharded's rank 0 and recycle.build(..., sharded=True) report.
// std::runtime_error naming the shard whose report is not one; std::invalid_argument for an
// `own` outside the reports.
std::string merged_shard_reports(const std::vector<std::string>& reports, int own);

// The samples rank `part` of a sharded build of `parts` ranks keys in its key pass, ascending:
// its part (the positions p < samples with p % parts == part) and up to 64 of the other parts',
// spread over the split, whose keys it compares with those their ranks send (ranks given
// different data are refused). What recycle-build --sharded and recycle.build(..., sharded=True)
// key. std::invalid_argument unless 0 <= part < parts.
std::vector<int64_t> sharded_key_positions(int64_t samples, int part, int parts);

// Where the cache directory `dir` is, as a text equal for two paths of one directory on one
// machine and different otherwise (the host's name, the device and inode of the directory or of
// its nearest existing ancestor, the rest of the path below it): how the ranks of a sharded build
// tell that two of them were given one directory (cache/cache_dir.h's, for the Python package).
std::string cache_location(const std::string& dir);

}  // namespace recycle
