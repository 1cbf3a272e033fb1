// recycle-bench's default benchmark, the ratio table: recycle ratio against accuracy and speed
// on the transfer task (--task image or text; bench/transfer_task.h).
//
// Runs the real tools as child processes, so it measures exactly what users run: full
// fine-tuning (r = 0), recycling at each ratio (cache build + head training from the cache),
// and freezing without recycling at 0.5 (prefix recomputed every step), with the same
// pretrained encoder, data, batch size and thread count, over several seeds. Each child's
// peak resident memory comes from wait4(). Prints a Markdown table and writes bench.json,
// bench.csv and bench.png (gnuplot) to --out. With --peer it also runs the eager PyTorch
// peer (bench/peers/eager_peer.py) and reports the engine's throughput over the peer's.
// No LibTorch here.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "bench/common_options.h"

namespace recycle::bench {

struct RatioBenchOptions {
  CommonOptions common;
  std::vector<double> ratios = {0.25, 0.5, 0.75, 1.0};  // in (0, 1]; multiples of 1/8 for image
  bool peer = false;
};

// Registers --ratios and --peer on `app`; returns --peer.
CLI::Option* add_ratio_flags(CLI::App* app, RatioBenchOptions* o);

// The usage error of `ratios` on `task` ("" when none): a ratio that is not on a block
// boundary of the image task's ResNet-18. Checked whatever the benchmark, as before.
std::string check_ratios(const std::vector<double>& ratios, Task task);

// Pretrains the encoder if needed, runs the table and writes its files. Throws
// std::runtime_error with one line when a child fails.
void run_ratio_bench(RatioBenchOptions options);

}  // namespace recycle::bench
