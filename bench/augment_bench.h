// recycle-bench --augment: caches of augmented views on a small-data task, against training
// without augmentation and against online augmentation through the frozen prefix every epoch
// (what a user without a cache of views does), docs/augmentation.md.
//
// With the pretrained encoder (classes 0-4): --augment-samples training samples of classes 5-9
// (the first ones), the recycle ratio --augment-ratio, --epochs epochs (default 8), each row
// --seeds seeds; the test split (all test samples of classes 5-9) cached plainly. Rows:
//   cache, no views            recycle-build of the plain split, recycle-train --cache
//   cache, K views (each of --augment-views, default 4 and 8)
//                              recycle-build --augment SPEC --views K, recycle-train --cache
//   online augmentation        recycle-train --data --recycle R --no-cache --augment SPEC
//   frozen, no augmentation    recycle-train --data --recycle R --no-cache
// For each: the build's seconds (train split), the median epoch seconds and the whole training
// run's, test accuracy (mean and sd over the seeds). Writes augment.json and augment.md to the
// output directory. No LibTorch here.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/common_options.h"

namespace recycle::bench {

struct AugmentBenchOptions {
  CommonOptions common;  // epochs, seeds, batch, threads, codec, weights, out
  bool selected = false;  // --augment: this benchmark is the one run
  std::string spec = "hflip,crop=2";
  std::vector<int64_t> views = {4, 8};
  int64_t samples = 1000;  // training samples of classes 5-9
  double ratio = 0.5;
};

// Registers --augment (takes the spec; "--augment hflip,crop=2") and its flags on `app`;
// returns --augment.
CLI::Option* add_augment_flags(CLI::App* app, AugmentBenchOptions* o);

// Throws std::invalid_argument with one line when `spec` is not an augmentation spec.
void check_augment_spec(const std::string& spec);

// --quick's defaults of this benchmark for the flags not given (after apply_common_defaults),
// and its own default epochs (8) when --epochs is not given.
void apply_augment_defaults(const CLI::App& app, AugmentBenchOptions* o);

// Pretrains the encoder if needed, runs the rows and prints the table. Throws
// std::runtime_error with one line when a child fails.
void run_augment_bench(AugmentBenchOptions options);

}  // namespace recycle::bench
