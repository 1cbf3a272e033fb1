// recycle-bench --shards W[,W...]: training from shards (recycle-build/recycle-train --sharded,
// docs/scale.md) against training from one shared cache at the same world size, on the transfer
// task: does a rank that trains on its own shard (shuffled within it, padded to the largest
// shard) learn what a rank that takes its share of the whole split's order learns, and at what
// epoch time?
//
// With the pretrained encoder (classes 0-4): --samples training samples of classes 5-9 and the
// whole test split of classes 5-9, cut at 0.5, codec --codec. Per W: one cache built by one
// process (the shared one, as a shared filesystem would hold it) and W shards built by
// recycle-build --nproc W --sharded; then per seed recycle-train --nproc W from the shared cache
// and recycle-train --nproc W --sharded from the shards (--epochs, --batch, --threads in all).
// Rows: the test accuracy (mean and sd over the seeds), the median epoch seconds, the build's
// seconds; and per W the difference of the accuracies and the ratio of the epochs. Writes
// shards.json and shards.md to the output directory. No LibTorch here.
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "bench/common_options.h"

namespace recycle::bench {

struct ShardBenchOptions {
  CommonOptions common;  // samples, epochs, seeds, batch, threads, codec, weights, out
  bool selected = false;  // --shards: this benchmark is the one run
  std::vector<int> worlds = {2, 3};
};

// Registers --shards on `app`; returns it.
CLI::Option* add_shard_flags(CLI::App* app, ShardBenchOptions* o);

// Pretrains the encoder if needed, builds, trains and prints the table. Throws
// std::runtime_error with one line when a child fails.
void run_shard_bench(ShardBenchOptions options);

}  // namespace recycle::bench
