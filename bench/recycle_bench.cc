// recycle-bench: the benchmarks of the engine, running the real tools side by side as child
// processes. This file only parses the command line and picks the benchmark:
//   (default)      the ratio table: recycle ratio against accuracy and speed on the image task
//                  (Fashion-MNIST, ResNet-18: pretrained on classes 0-4, fine-tuned on 5-9) or,
//                  with --task text, the text task (docs/text-task.md); --peer adds the eager
//                  PyTorch peer (bench/ratio_bench.h);
//   --nproc N      data-parallel head training beside the PyTorch DDP peer (bench/dist_bench.h);
//   --targets      the performance targets (bench/target_bench.h);
//   --progressive  progressive recycling beside full fine-tuning and a fixed recycle point
//                  (bench/progressive_bench.h);
//   --predict      recycle-predict at 0/50/100% cache hits against full-model inference
//                  (bench/predict_bench.h);
//   --augment SPEC caches of augmented views on a small-data task against no augmentation and
//                  online augmentation (bench/augment_bench.h);
//   --shards W,... training from W shards (--sharded) against one shared cache at W ranks
//                  (bench/shard_bench.h);
//   --large GB     a cache of GB gigabytes read cold: an epoch's read rate against the disk's,
//                  its peak RSS against the budget, the build's write rate (bench/large_bench.h);
//   --decode       the image folder reader and a build over a folder against torchvision's
//                  ImageFolder + DataLoader (bench/decode_bench.h);
//   --task minilm  a real pretrained encoder, all-MiniLM-L6-v2, recycled at k of its 6 layers
//                  against full fine-tuning, the online prefix and a Python loop
//                  (bench/minilm_bench.h).
// Each benchmark registers its own flags; the flags they share are bench/common_options.h.
// Bad usage exits 2 with one line, a failed run exits 1 with one line.
#include <CLI/CLI.hpp>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>

#include "bench/augment_bench.h"
#include "bench/common_options.h"
#include "bench/decode_bench.h"
#include "bench/dist_bench.h"
#include "bench/large_bench.h"
#include "bench/predict_bench.h"
#include "bench/progressive_bench.h"
#include "bench/ratio_bench.h"
#include "bench/shard_bench.h"
#include "bench/target_bench.h"
#include "bench/minilm_bench.h"
#include "bench/transfer_task.h"

namespace fs = std::filesystem;
using namespace recycle::bench;

namespace {

int usage_error(const std::string& message) {
  std::cerr << "recycle-bench: " << message << " (see --help)" << std::endl;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "Measures recycle ratio against accuracy and speed on a transfer task, running "
      "the real tools side by side: the Fashion-MNIST task (a ResNet-18 pretrained on "
      "classes 0-4, fine-tuned on 5-9) or, with --task text, the SpamAssassin task (the "
      "transformer encoder pretrained on the 2002 mails, fine-tuned on ham against spam "
      "of 2003; docs/text-task.md).",
      "recycle-bench");
  CommonOptions common;
  RatioBenchOptions ratio;
  DistBenchOptions dist;
  TargetBenchOptions targets;
  ProgressiveBenchOptions progressive;
  PredictBenchOptions predict;
  DecodeBenchOptions decode;
  AugmentBenchOptions augment;
  MinilmBenchOptions minilm;
  ShardBenchOptions shards;
  LargeBenchOptions large;
  add_common_flags(&app, &common);
  add_ratio_flags(&app, &ratio);
  add_dist_flags(&app, &dist);
  add_target_flags(&app, &targets);
  add_progressive_flags(&app, &progressive);
  add_predict_flags(&app, &predict);
  add_decode_flags(&app, &decode);
  add_augment_flags(&app, &augment);
  add_minilm_flags(&app, &minilm);
  add_shard_flags(&app, &shards);
  add_large_flags(&app, &large);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << "recycle-bench: " << e.what() << " (see --help)" << std::endl;
    return 2;
  }
  apply_common_defaults(app, &common);
  if (const std::string e = check_ratios(ratio.ratios, common.task); !e.empty())
    return usage_error(e);
  const bool data_parallel = dist.nproc > 0;
  if (common.task == Task::minilm &&
      (ratio.peer || data_parallel || targets.selected || progressive.selected ||
       predict.selected || decode.selected || augment.selected)) {
    return usage_error("--task minilm is its own bench (no --peer, --nproc, --targets, "
                       "--progressive, --predict, --decode or --augment)");
  }
  if (common.text()) {
    if (ratio.peer || data_parallel || targets.selected) {
      return usage_error("--task text runs the ratio table only (no --peer, --nproc or --targets)");
    }
    if (const std::string e = find_text_data(&common); !e.empty()) {
      std::cerr << "recycle-bench: error: " << e << std::endl;
      return 1;
    }
  }
  if (progressive.selected && (targets.selected || data_parallel || ratio.peer || common.text())) {
    return usage_error(
        "--progressive is its own bench on the image task (no --targets, --nproc, --peer or "
        "--task text; its data-parallel runs use 2 processes)");
  }
  if (progressive.selected) {
    if (const std::string e = check_progressive_options(progressive); !e.empty())
      return usage_error(e);
  }
  if (predict.selected &&
      (targets.selected || data_parallel || ratio.peer || common.text() || progressive.selected)) {
    return usage_error("--predict is its own bench on the image task (no --targets, --nproc, "
                       "--peer, --progressive or --task text; --predict-peer adds the peer)");
  }
  if (predict.selected) {
    if (const std::string e = check_ratios(predict.ratios, common.task); !e.empty())
      return usage_error(e);
  }
  if (decode.selected && (targets.selected || data_parallel || ratio.peer || common.text() ||
                          progressive.selected || predict.selected)) {
    return usage_error("--decode is its own bench (no --targets, --nproc, --peer, --progressive, "
                       "--predict or --task text)");
  }
  if (augment.selected && (targets.selected || data_parallel || ratio.peer || common.text() ||
                           progressive.selected || predict.selected || decode.selected)) {
    return usage_error("--augment is its own bench on the image task (no --targets, --nproc, "
                       "--peer, --progressive, --predict, --decode or --task text)");
  }
  if (augment.selected) {
    try {
      check_augment_spec(augment.spec);
    } catch (const std::exception& e) {
      return usage_error(e.what());
    }
  }
  if (shards.selected && (targets.selected || data_parallel || ratio.peer || common.text() ||
                          progressive.selected || predict.selected || decode.selected ||
                          augment.selected || common.task == Task::minilm)) {
    return usage_error("--shards is its own bench on the image task (no --targets, --nproc, "
                       "--peer, --progressive, --predict, --decode, --augment or --task)");
  }
  if (large.selected && (targets.selected || data_parallel || ratio.peer || common.text() ||
                         progressive.selected || predict.selected || decode.selected ||
                         augment.selected || shards.selected || common.task == Task::minilm)) {
    return usage_error("--large is its own bench (no --targets, --nproc, --peer, --progressive, "
                       "--predict, --decode, --augment, --shards or --task)");
  }
  if (targets.selected && data_parallel)
    return usage_error("--targets and --nproc are two different benches");
  if (common.tools_dir.empty())
    common.tools_dir = fs::canonical("/proc/self/exe").parent_path().string();
  try {
    fs::create_directories(common.out);
    if (common.task == Task::minilm) {
      minilm.common = common;
      apply_minilm_defaults(app, &minilm);
      run_minilm_bench(minilm);
    } else if (data_parallel) {
      dist.common = common;
      apply_dist_defaults(app, &dist);
      run_dist_bench(dist);
    } else if (targets.selected) {
      targets.common = common;
      apply_target_defaults(app, &targets);
      run_target_bench(targets);
    } else if (progressive.selected) {
      progressive.common = common;
      apply_progressive_defaults(app, &progressive);
      run_progressive_bench(progressive);
    } else if (large.selected) {
      large.common = common;
      run_large_bench(large);
    } else if (shards.selected) {
      shards.common = common;
      run_shard_bench(shards);
    } else if (augment.selected) {
      augment.common = common;
      apply_augment_defaults(app, &augment);
      run_augment_bench(augment);
    } else if (decode.selected) {
      decode.common = common;
      apply_decode_defaults(app, &decode);
      run_decode_bench(decode);
    } else if (predict.selected) {
      predict.common = common;
      apply_predict_defaults(app, &predict);
      run_predict_bench(predict);
    } else {
      ratio.common = common;
      run_ratio_bench(ratio);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "recycle-bench: error: " << e.what() << std::endl;
    return 1;
  }
}
