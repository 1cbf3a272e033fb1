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
// progressive.md in the output directory. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace recycle::bench {

struct ProgressiveBenchOptions {
  std::vector<std::string> rules = {"linear:0:0.75", "auto:0.1"};  // --freeze specs
  double fixed_ratio = 0.5;
  int nproc = 2;                   // processes of the bytes-per-step runs (>= 2)
  // Their --timeout: a rank waits in the next collective while the other makes its shard of a
  // level, which on a loaded machine can take longer than training's default 60 s.
  int timeout_seconds = 300;
  int64_t samples = 5000;          // training samples of classes 5-9
  int64_t epochs = 4;
  int64_t seeds = 3;
  int64_t batch = 128;             // per process (per rank in the --nproc runs)
  int threads = 0;                 // per 1-process run, and in total for --nproc; 0 = every core
  std::string codec = "fp16";      // of the fixed cache and of the first level
  std::string weights;             // the pretrained encoder (must exist)
  std::string out;                 // output directory (exists)
  std::string tools_dir;           // where recycle-build and recycle-train are
};

// Runs everything above and prints the table. Throws std::runtime_error with one line when a
// child fails.
void run_progressive_bench(const ProgressiveBenchOptions& options);

}  // namespace recycle::bench
