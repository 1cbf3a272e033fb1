// recycle-bench --targets: the engine's performance targets, each a ratio measured side by
// side in one run, printed in one table with its target beside it (docs/performance.md).
//
// Runs, as child processes, ROUNDS times in turn (engine, then the eager PyTorch peer):
//   - bench/peers/eager_peer.py: full fine-tuning epochs, one no-grad prefix pass at 0.5 over
//     the samples, head epochs from those in-memory activations;
//   - recycle-train --recycle 0 (full fine-tuning from the images);
//   - recycle-build at 0.5 (the training split's --samples; its report's seconds and prefix
//     seconds), and of the whole training split (30,000 samples), beside the peer's prefix
//     pass over the same (eager_peer.py --prefix-only);
//   - head epochs in the order preloaded, cache, peer, cache, preloaded: recycle-train --cache
//     with --preload (the split decoded into memory first) and without, twice each, around
//     eager_peer.py --head-only;
//   - recycle-train --cache --alternate-preload for twice the epochs: epochs from the cache and
//     from the split preloaded in memory taking turns in one run (cache, preloaded, preloaded,
//     cache, ...; the reads row);
// then, once: the 0.5 cache in fp32 and in int8 over SEEDS seeds (bytes per record, test
// accuracy), and the memory budget: caches of N samples at 0.25 in fp32 (all ten classes)
// trained for one epoch with --memory-budget B, and a cache that fits in B, with peak RSS
// from wait4(). A speed ratio is the median over rounds of the ratio of the two sides' median
// epochs (or builds) in the round. Writes targets.md and targets.json to the output
// directory. No LibTorch here.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <vector>

#include "bench/common_options.h"

namespace recycle::bench {

struct TargetBenchOptions {
  // samples (of classes 5-9), epochs (per training run), seeds (of the int8 against fp32
  // accuracy), batch, threads (0 = every core, resolved when the run starts), weights
  // (pretrained here when empty), out, python and peer_script (bench/peers/eager_peer.py).
  CommonOptions common;
  bool selected = false;         // --targets: this benchmark is the one run
  int64_t rounds = 5;            // rounds of the speed ratios (engine and peer) and memory runs
  int64_t budget_mb = 256;       // --memory-budget of the memory rows
  std::vector<int64_t> memory_samples = {10000, 30000, 60000};  // N of the memory rows
};

// Registers --targets, --rounds, --memory-budget and --memory-samples on `app`; returns
// --targets (the flag that picks this benchmark).
CLI::Option* add_target_flags(CLI::App* app, TargetBenchOptions* o);

// --quick's defaults of this benchmark for the flags not given (after apply_common_defaults).
void apply_target_defaults(const CLI::App& app, TargetBenchOptions* o);

// Pretrains the encoder if needed, runs everything above and prints the table. Throws
// std::runtime_error with one line when a child fails.
void run_target_bench(TargetBenchOptions options);

}  // namespace recycle::bench
