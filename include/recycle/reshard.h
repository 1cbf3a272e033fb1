// Changing the world size of sharded caches without running the prefix again: run_reshard
// moves the records of shards of W (recycle-build --sharded with W ranks) to where shards of
// another count W' want them, rank to rank over c10d (Gloo's send/recv), with no shared
// filesystem. The shard rule (cache/shard_rule.h) is xxh3_64(key) % count, so shard r of W is the
// union of shards r, r + W, r + 2W, ... of any multiple of W: the records a rank keeps, and the
// ones it sends, follow from their keys alone, and nothing is computed.
//
// Every rank r of the job (max(W, W') ranks) reads its old shard at `cache_dir` ({rank} in the
// path), when r < W, and writes its new shard, r of W', into a new cache at `to`, when r < W'.
// The old shards are only read: a reshard that fails or is killed leaves them as they were, and
// a rerun with rebuild starts the new ones over.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "recycle/options.h"  // DistOptions

namespace recycle {

struct ReshardOptions {
  std::string cache_dir;  // the shards as they are ({rank} replaced by each rank's number)
  std::string to;         // where the new shards go ({rank} too); another path than cache_dir
  int64_t shards = 0;     // W', the new shard count: 2..kMaxWorldSize
  bool rebuild = false;   // delete a cache already at `to` first (only a cache)
  DistOptions dist;       // a job of max(W, W') ranks

  // cache_dir and to given and different, shards in range, the job's options (DistOptions).
  // Throws InvalidArgument with one line naming the flag. (engine/options/reshard_validate.cc)
  void validate() const;
};

struct ReshardReport {
  int rank = 0;
  int shards_from = 0;  // W
  int shards_to = 0;    // W'
  // Of this rank: index entries its new shard holds (every split), the records it kept (read
  // from its old shard into its new one), sent to other ranks and received from them, with their
  // bytes; and the seconds of the exchange (records read, moved and written).
  int64_t samples = 0;
  int64_t records_kept = 0;
  int64_t records_sent = 0;
  int64_t records_received = 0;
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t computed = 0;     // always 0: a reshard runs no prefix
  double seconds = 0;       // the whole run: joining the job, the checks, the moves
  double move_seconds = 0;  // of them, the splits' moves: reads, exchange, writes, flushes
  std::vector<ReshardReport> per_rank;  // rank 0's: every rank's, in rank order
  std::string to_json() const;          // one line
};

// This process's part of a reshard (options.validate() first). Throws InvalidArgument for bad
// options, std::runtime_error with one line for shards that cannot be resharded (not shards of
// one job, incomplete, another job's count of ranks) or a storage error: every check on every
// rank comes before any rank writes.
ReshardReport run_reshard(const ReshardOptions& options);

}  // namespace recycle
