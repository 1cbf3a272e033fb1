// The build pipeline behind recycle-build: dataset -> keys -> prefix forward (once per new
// key, batched, no grad) -> codec -> cache. Resumable: a rerun computes only what is missing
// and writes nothing when the split is already complete and unchanged. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>

#include "engine/data/dataset.h"
#include "engine/models/model_options.h"

namespace recycle {

struct BuildOptions {
  DatasetOptions data;
  ModelOptions model;
  double recycle = -1.0;       // fraction of blocks in the prefix, (0, 1]; < 0 = use split_at
  std::string split_at;        // name of the prefix's last block (instead of recycle)
  std::string keyer;           // keyer spec; "" = xxh3 for images, text for text data
  std::string codec = "fp16";  // fp32 | fp16 | bf16
  std::string cache_dir;
  int64_t batch = 256;         // samples per prefix forward and per write batch
  int threads = 0;             // 0 = every core
  bool rebuild = false;        // delete the cache in cache_dir first
  bool progress = true;        // progress bar on stderr (when it is a terminal)
  std::string device = "cpu";
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
  double samples_per_s = 0;
  std::string to_json() const;  // one line
};

// Runs a build. Throws std::runtime_error / std::invalid_argument with one clear line on bad
// input, a mismatched cache (naming what differs) or a storage error.
BuildReport run_build(const BuildOptions& options);

}  // namespace recycle
