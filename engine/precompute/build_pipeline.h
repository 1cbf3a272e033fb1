// The build pipeline behind recycle-build: dataset -> keys -> prefix forward (once per new
// key, batched, no grad) -> codec -> cache. Resumable: a rerun computes only what is missing
// and writes nothing when the split is already complete and unchanged. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>

#include "engine/data/dataset.h"
#include "engine/models/model_options.h"
#include "recycle/options.h"

namespace recycle {

struct BuildOptions {
  DatasetOptions data;
  ModelOptions model;
  double recycle = -1.0;       // fraction of blocks in the prefix, (0, 1]; < 0 = use split_at
  std::string split_at;        // name of the prefix's last block (instead of recycle)
  std::string keyer;           // keyer spec; "" = xxh3 for images, text for text data
  Codec codec = Codec::kFp16;  // fp32 | fp16 | bf16 | int8
  // RocksDB's compression of the records written: none | lz4 | zstd. None: float activations
  // gained 11% (fp16) to 20% (fp32) from lz4 and int8 nothing, at about 18% of a build's time
  // (docs/performance.md).
  Compression compression = Compression::kNone;
  std::string cache_dir;
  int64_t batch = 256;         // samples per prefix forward and per write batch
  int threads = 0;             // 0 = every core
  bool rebuild = false;        // delete the cache in cache_dir first
  bool progress = true;        // progress bar on stderr (when it is a terminal)
  std::string device = "cpu";
  // Distributed builds: record bytes a rank gathers in memory before it sorts them and writes
  // them out as one record file for rank 0 to ingest (so memory stays bounded).
  int64_t stage_file_bytes = int64_t{64} << 20;

  // The model options, a batch of at least 1, a cache directory. Throws std::invalid_argument
  // with one line naming the flag. run_build's first stage (load_inputs) calls it.
  void validate() const;
};

struct BuildReport {
  std::string cache_dir;
  std::string split;
  int64_t samples = 0;      // samples in the split
  int64_t unique = 0;       // distinct keys among them
  int64_t computed = 0;     // records computed and written by this run
  int64_t skipped = 0;      // samples whose record was already stored (or a duplicate)
  int64_t index_written = 0;// samples index entries written by this run
  int64_t bytes = 0;        // record bytes written by this run (before compression)
  int64_t records = 0;      // distinct records in the cache after the run
  double seconds = 0;       // wall time of run_build
  double prefix_seconds = 0;// of it, in the prefix's forward (this process; the rest is reading,
                            // keying, encoding, writing and opening/flushing the cache)
  double samples_per_s = 0;
  int ranks = 1;            // processes that computed records (1 unless distributed)
  std::string to_json() const;  // one line
};

// Runs a build. Throws std::runtime_error / std::invalid_argument with one clear line on bad
// input, a mismatched cache (naming what differs) or a storage error.
BuildReport run_build(const BuildOptions& options);

class BuildGroup;  // engine/precompute/build_group.h

// One rank's part of a distributed build (group.world() processes, each calling this with the
// same options; see distributed_build.cc for who reads, computes and writes what). Every rank
// gets the same report: the counts of the whole build. A failure on any rank makes every rank
// throw std::runtime_error (the failing one its own exception) with one line naming the rank.
BuildReport run_distributed_build(const BuildOptions& options, BuildGroup& group);

}  // namespace recycle
