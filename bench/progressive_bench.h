// recycle-bench --progressive: progressive recycling (recycle-train --freeze, docs/progressive.md)
// beside full fine-tuning and a fixed recycle point on the image transfer task.
//
// Runs, as child processes, with the same pretrained encoder, data, batch, epochs and threads:
//   - full fine-tuning (recycle-train --data ... --recycle 0), every seed;
//   - the fixed point: recycle-build at --fixed-ratio (train and test splits, once), then
//     recycle-train --cache, every seed;
//   - each --freeze rule (recycle-train --data ... --recycle 0 --freeze RULE, a fresh levels
//     directory per run, so every level is built or derived inside the run), every seed;
// then each configuration once more with --nproc N (seed 0) for its bytes sent per step per rank
// (and, for a rule, per phase as blocks freeze). A row's total time is the wall time of its
// commands, builds included: full and rules, the median run; fixed, its build plus its median
// run. Prints a Markdown table with the target line beside it and writes progressive.json and
// progressive.md in the output directory.
//
// With --composer-python PY, instead: for each rule linear:START:LEVEL, recycle-train --freeze
// and Composer's LayerFreezing(START, LEVEL) (bench/peers/composer_peer.py under PY), the same
// encoder, data, epochs, batch and threads, seeds alternating; each command's wall time, the
// Composer script's own time (after its imports), accuracy, and the speed-ups (target 1.5x at
// accuracy >= Composer's - 0.005: issue 70). Writes composer.json and composer.md. No LibTorch
// here.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "bench/common_options.h"

namespace recycle::bench {

struct ProgressiveBenchOptions {
  // samples (of classes 5-9), epochs, seeds, batch (per process, per rank in the --nproc runs),
  // threads (per 1-process run, and in total for --nproc; 0 = every core), codec (of the fixed
  // cache and of the first level), weights (pretrained here when empty), out.
  CommonOptions common;
  bool selected = false;           // --progressive: this benchmark is the one run
  std::vector<std::string> rules = {"linear:0:0.75", "auto:0.1"};  // --freeze specs
  double fixed_ratio = 0.5;
  int nproc = 2;                   // processes of the bytes-per-step runs (>= 2)
  // Their --timeout: a rank waits in the next collective while the other makes its shard of a
  // level, which on a loaded machine can take longer than training's default 60 s.
  int timeout_seconds = 300;
  // --composer-python: instead of the table above, each linear rule beside MosaicML Composer's
  // LayerFreezing with the same schedule (bench/peers/composer_peer.py under this interpreter,
  // made by bench/peers/composer_venv.sh), seeds alternating engine / Composer.
  std::string composer_python;
  std::string composer_script = std::string(RECYCLE_SOURCE_DIR) + "/bench/peers/composer_peer.py";
};

// Registers --progressive, --freeze-rules and --fixed-ratio on `app`; returns --progressive
// (the flag that picks this benchmark).
CLI::Option* add_progressive_flags(CLI::App* app, ProgressiveBenchOptions* o);

// --quick's defaults of this benchmark for the flags not given (after apply_common_defaults).
void apply_progressive_defaults(const CLI::App& app, ProgressiveBenchOptions* o);

// The usage error of the options ("" when none): a fixed ratio off ResNet-18's block boundaries.
std::string check_progressive_options(const ProgressiveBenchOptions& o);

// Pretrains the encoder if needed, runs everything above and prints the table. Throws
// std::runtime_error with one line when a child fails.
void run_progressive_bench(ProgressiveBenchOptions options);

}  // namespace recycle::bench
