// Prediction from an activation cache: run_predict serves a trained head (recycle-train
// --save-head) over a dataset's samples. A sample whose key is in the cache skips the frozen
// prefix (the head runs on the stored activation); any other sample runs the prefix of the
// weights the cache was built from, then the head (--write-back stores its record, so the next
// call hits). One row per sample goes to a JSONL or CSV file; PredictReport sums it up.
#pragma once

#include <cstdint>
#include <string>

#include "recycle/options.h"  // DatasetOptions

namespace recycle {

struct PredictOptions {
  std::string cache_dir;  // the cache the head was trained from (or one of the same identity)
  std::string head;       // a file written by recycle-train --save-head
  // The weights the cache was built from (recycle-build --weights; its fingerprint is checked).
  // Required: the file the cache's manifest records is named when it is missing, never opened.
  std::string weights;
  // For weights of a model loaded from a file (torchscript:FILE): that file, which the tools
  // open only when the user names it (its digest must be the one the weights record).
  std::string model;
  // The samples; split defaults to "test" here, and classes (when "") to the --classes the
  // cache's splits were built with.
  DatasetOptions data;
  std::string out;        // FILE.jsonl or FILE.csv (by its extension); written atomically
  int64_t top_k = 0;      // per row, the k most probable classes; 0: every class's probability
  bool write_back = false;  // store the records of misses (needs the cache's writer lock)
  // Also run the full model (the prefix and the head, no cache) over the same samples in the
  // same process, and report its time and how often both agree (the benchmark's baseline).
  bool compare_full = false;
  int64_t batch = 256;   // samples per chunk: keyed, looked up, computed and predicted together
  int threads = 0;       // 0 = every core
  bool progress = true;  // progress bar on stderr (when it is a terminal)
  std::string device = "cpu";

  PredictOptions() { data.split = "test"; }
  // --cache, --head, --data and --out given; --out ends in .jsonl or .csv, is none of the
  // inputs and is outside the cache; batch (1..kMaxBatch), threads (0..kMaxThreads) and top_k
  // (0 or more) in range. Throws std::invalid_argument with one line naming the flag.
  // (engine/options/predict_validate.cc)
  void validate() const;
};

struct PredictReport {
  std::string out;
  int64_t samples = 0;
  int64_t hits = 0;     // samples whose record was in the cache
  int64_t misses = 0;   // samples that ran the prefix
  int64_t written_back =
      0;  // records stored by --write-back (distinct keys; not the rows of --out)
  int64_t correct = 0;
  double accuracy = -1;  // correct / samples; -1 when the data has no labels
  double seconds = 0;    // wall time of run_predict (loading the model and data included)
  // The prediction loop: reading, keying, lookup, the prefix on misses, decoding, the head
  // (what --compare-full's full_seconds is compared with); then writing the rows.
  double predict_seconds = 0;
  double prefix_seconds = 0;  // of predict_seconds, the prefix's forward on misses
  double write_seconds = 0;   // formatting and writing the rows
  double samples_per_s = 0;   // samples / (predict_seconds + write_seconds)
  // compare_full only (zeros otherwise): the full model's loop over the same samples, how many
  // predicted the same class, and the largest difference of a probability.
  double full_seconds = 0;
  double full_head_seconds = 0;  // of full_seconds, in the head (the rest: reading, prefix)
  int64_t agree = 0;
  double max_prob_diff = 0;
  std::string to_json() const;  // one line
};

// Calls options.validate() first. Throws std::invalid_argument (InvalidArgument, errors.h) on
// bad options, StaleCacheError for --weights the cache was not built from or a head trained for
// another cache (naming what differs), std::runtime_error otherwise (a head file that is not
// one, an output that cannot be written, --write-back on a cache it cannot write); each with
// one clear line. The output file is left as it was on any failure.
PredictReport run_predict(const PredictOptions& options);

// The identity a head trained from the cache in `cache_dir` carries, as JSON: what
// recycle.export(head, ..., cache=DIR) writes into a compiled head's package ("recycle.head"),
// and recycle-predict --head FILE.pt2 compares with the cache it serves. Opens the cache for
// reading; throws std::runtime_error for a directory that is not a cache.
std::string head_identity_of_cache_dir(const std::string& cache_dir);

}  // namespace recycle
