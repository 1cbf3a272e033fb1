// recycle-bench --predict: serving predictions from the cache (recycle-predict) against
// full-model inference over the same samples in the same process (its --compare-full), at
// hit rates 0%, 50% and 100% and recycle ratios 0.25, 0.5 and 0.75, on the image task.
//
// Per ratio r, with the same pretrained encoder (classes 0-4): a cache of --samples training
// samples of classes 5-9 at r (the 0% cache: none of the test samples is in it), a head trained
// from it for one epoch, and caches of the first half and of all --predict-samples test samples
// at r (50% and 100%; the same identity, so the one head serves all three). Then
// recycle-predict --compare-full over the first --predict-samples test samples of each,
// --rounds times in turn; a row's times are the medians over rounds of the cached loop and of
// the full model's loop (both include reading the images; keying, the lookup and decoding are
// the cached side's). The head's share of the full loop's time gives the 100% limit (1.2x of
// full x share) and the 0% goal is at most 1.05x of full. With --peer, the eager PyTorch peer's
// full-model inference (bench/peers/eager_peer.py --infer-only) over as many samples.
// Then, per codec (fp32, fp16, bf16, int8) at 0.5: a head trained from a cache of that codec
// (a head serves caches of its own identity only) predicting every test sample from the cache,
// and how often its class is the full model's, and the largest probability difference.
// Writes predict.json and predict.md to the output directory. No LibTorch here.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <vector>

#include "bench/common_options.h"

namespace recycle::bench {

struct PredictBenchOptions {
  // samples (training samples of each 0% cache and its head), batch, threads, codec, weights
  // (pretrained here when empty), out, python and peer_script.
  CommonOptions common;
  bool selected = false;            // --predict: this benchmark is the one run
  std::vector<double> ratios = {0.25, 0.5, 0.75};
  int64_t predict_samples = 5000;   // test samples predicted (classes 5-9 have 5000)
  int64_t rounds = 3;
  int64_t predict_batch = 256;      // recycle-predict --batch
  bool peer = false;                // also the eager PyTorch peer's full inference
};

// Registers --predict, --predict-samples, --predict-ratios and --predict-peer on `app`;
// returns --predict (the flag that picks this benchmark).
CLI::Option* add_predict_flags(CLI::App* app, PredictBenchOptions* o);

// --quick's defaults of this benchmark for the flags not given (after apply_common_defaults).
void apply_predict_defaults(const CLI::App& app, PredictBenchOptions* o);

// Pretrains the encoder if needed, runs everything above and prints the table. Throws
// std::runtime_error with one line when a child fails.
void run_predict_bench(PredictBenchOptions options);

}  // namespace recycle::bench
