// recycle-bench --large GB: a cache many times the memory (docs/scale.md). Builds a cache of
// about GB gigabytes of 100 KB records (Fashion-MNIST training images, augmented views, through
// a width-64 ResNet-18 to layer1.1, fp16: 64x28x28 values a record), then, in --seeds rounds,
// side by side with the page cache dropped before each (echo 1 > /proc/sys/vm/drop_caches:
// root only):
//   - the disk's own rate: the cache's files read in order, 1 MB at a time (what cat does);
//   - one epoch of recycle-train from the cache, --memory-budget --large-budget (MB), with a
//     TorchScript head that pools and classifies (made by --python's torch), so that the
//     step costs little and the epoch is as fast as reading and decoding let it be: its read
//     rate (the bytes of the records it read over the epoch's seconds) against the disk's, and
//     its peak RSS;
//   - the same epoch again without dropping the page cache (warm), which tells the read's
//     share of the cold epoch: what is left when the disk is out of the way is decoding and
//     the step;
//     per core (its rate over the threads) beside what one core copies (memcpy) and hashes
//     (XXH3-64) of a 256 MB buffer, measured right after it;
//   - the cold epoch again with each batch read by one MultiGet (RECYCLE_READ_THREADS=1: the
//     read path before the store's read threads);
//   - when --python imports recycle: one cold epoch of recycle.CachedLoader (shuffled, block
//     cache --large-budget), and the same with RECYCLE_READ_THREADS=1.
// Beside them, once: the same epoch from a small cache of the same records (its peak RSS is
// the constant: LibTorch, the model, the process), and the disk's sequential write rate (a
// file of the cache's size in 1 MB writes, then fdatasync) against the build's (the cache's
// bytes over the build's seconds, and over its seconds outside the prefix's forward).
// Writes large.json and large.md to the output directory. No LibTorch here.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

#include "bench/common_options.h"

namespace recycle::bench {

struct LargeBenchOptions {
  CommonOptions common;      // seeds (rounds), threads, out, tools, python
  bool selected = false;     // --large: this benchmark is the one run
  double gigabytes = 8;      // the cache's size
  int64_t budget_mb = 512;   // recycle-train --memory-budget
  bool keep = false;         // --large-keep: keep the cache (and reuse one left by a run before)
};

// Registers --large, --large-budget and --large-keep on `app`; returns --large.
CLI::Option* add_large_flags(CLI::App* app, LargeBenchOptions* o);

// Builds, measures and prints the table. Throws std::runtime_error with one line when a child
// fails or the page cache cannot be dropped (not root).
void run_large_bench(LargeBenchOptions options);

}  // namespace recycle::bench
