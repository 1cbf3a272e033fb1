// recycle-bench --decode: the engine's image folder reader against the loader users write
// today (torchvision's ImageFolder + transforms through DataLoader(num_workers=2)), on folders
// exported here from Fashion-MNIST's training split (classes 5-9) by
// bench/peers/imagefolder_peer.py --export:
//   png28    --decode-samples 28x28 gray PNGs (the images as stored);
//   jpeg224  --decode-jpeg-samples 224x224 RGB JPEGs (PIL bilinear upscale, quality 90).
// Rows, --decode-rounds rounds in turn (engine first in even rounds, peer first in odd ones):
//   decode   images/s of decode + transform + normalisation to float32: the engine in this
//            process (load_dataset + ImageStream, what recycle-build reads with, OpenMP over
//            --threads) against imagefolder_peer.py --decode; goal: at least 2x;
//   build    recycle-build --data imagefolder:png28 --recycle 0.5 (fp16 records, a fresh
//            cache each round; its report's seconds) against imagefolder_peer.py --prefix (the
//            same loader feeding the same untrained prefix under no_grad); goal: at least 1.5x.
// A ratio is the median over rounds of the per-round ratio. Writes decode.json and decode.md.
// Links recycle_data (no LibTorch).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

#include "bench/common_options.h"

namespace recycle::bench {

struct DecodeBenchOptions {
  CommonOptions common;  // threads, out, python
  bool selected = false;                 // --decode
  int64_t samples = 5000;                // PNGs (at most the 30,000 of classes 5-9)
  int64_t jpeg_samples = 1000;           // 224x224 JPEGs
  int64_t rounds = 3;
  std::string peer_script =
      std::string(RECYCLE_SOURCE_DIR) + "/bench/peers/imagefolder_peer.py";
};

// Registers --decode, --decode-samples, --decode-jpeg-samples, --decode-rounds; returns
// --decode.
CLI::Option* add_decode_flags(CLI::App* app, DecodeBenchOptions* o);
// --quick: 1,000 PNGs, 200 JPEGs, 1 round (for the flags not given).
void apply_decode_defaults(const CLI::App& app, DecodeBenchOptions* o);
// Exports the folders (once; kept in the output directory), runs the rows, prints the table.
// Throws std::runtime_error with one line when a child or a read fails.
void run_decode_bench(DecodeBenchOptions options);

}  // namespace recycle::bench
