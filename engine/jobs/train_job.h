// The training job behind recycle-train: its options, its report and run_train. No LibTorch here.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "engine/distributed/comm_phase.h"
#include "engine/distributed/dist_options.h"
#include "engine/models/model_options.h"
#include "engine/train/freeze_schedule.h"
#include "engine/train/memory_budget.h"
#include "engine/train/train_hyper.h"
#include "engine/data/dataset.h"

namespace recycle {

struct TrainOptions {
  // From a cache: train the head from split data.split, evaluate on `eval_split`.
  std::string cache_dir;
  bool allow_partial = false;       // train on a split whose build did not finish
  // Memory for the data (--memory-budget, MiB): the batches held, the preloaded split, the
  // samples' index and RocksDB's block cache share it (engine/train/memory_budget.h).
  int64_t memory_budget_mb = 256;
  // Batches loaded ahead on a background thread; 0: none, each batch loaded on the training
  // thread across ATen's team; -1 (kAutoPrefetch): prefetch_depth (engine/train/prefetch.h).
  int64_t prefetch = -1;
  bool preload = false;             // decode the whole training split into memory first
  // Epochs 1, 4, 5, 8, 9, ... from the cache and 2, 3, 6, 7, ... from the split preloaded in
  // memory: what reading from the cache costs, timed within one run (AlternatingBatches;
  // report.epoch_sources says which).
  bool alternate_preload = false;
  // From raw data (no cache): --recycle 0 is full fine-tuning; --recycle r with no_cache
  // freezes the prefix but recomputes it every step.
  DatasetOptions data;
  ModelOptions model;
  double recycle = -1.0;
  std::string split_at;
  bool no_cache = false;
  // Progressive recycling (docs/progressive.md): a freeze schedule (linear:START:LEVEL,
  // auto[:THRESHOLD]; "" = none), the directory its cache levels go to, and the codec of a
  // first level built from raw data (a level derived from a cache keeps that cache's codec).
  std::string freeze;
  std::string levels_dir;
  Codec level_codec = Codec::kFp16;

  // data.split names the split to train on, in a cache or in the raw data (default train).
  std::string eval_split;           // "" = test when there is one; "none" = no evaluation
  TrainHyper hyper;
  std::string save_head;            // the trained head's weights
  std::string save_model;           // raw-data modes: the whole model (load with --weights)
  int threads = 0;
  bool progress = true;
  std::string device = "cpu";
  // A Chrome trace of one epoch's steps from LibTorch's autograd profiler (rank 0 alone):
  // the second epoch, or the only one (engine/train/epoch_profiler.h).
  std::string profile;
  // Data-parallel: this process's rank, the world and how gradients travel (world 1 = alone).
  // Rank 0 alone evaluates and writes (--save-head, --save-model); every rank trains.
  DistOptions dist;

  // Checks the options alone and together (the mode: --cache or --data, what applies to it,
  // what goes together, the freeze schedule's needs; the hyper-parameters and the model).
  // `given` names the flags the user gave on the command line, for the checks of flags whose
  // value alone does not tell (--memory-budget, --prefetch, --level-codec at their defaults);
  // a library caller passes none. Throws std::invalid_argument with one line. run_train calls
  // it first; the command line calls it before it launches workers.
  void validate(const std::set<std::string>& given = {}) const;
};

struct TrainReport {
  std::string mode;                 // "cache", "full", "frozen" (prefix recomputed) or
                                    // "progressive" (--freeze)
  double recycle = 0;
  int64_t epochs = 0;
  int64_t train_samples = 0;        // per epoch
  std::vector<double> epoch_seconds;
  std::vector<double> epoch_loss;
  double train_samples_per_s = 0;   // train_samples / median epoch seconds
  double test_acc = -1;             // -1 without evaluation
  int64_t test_samples = 0;
  double seconds = 0;               // wall time of run_train
  std::vector<std::string> notes;   // what the user should know, e.g. no evaluation
  std::string precision;            // of the training forward: "fp32" or "bf16"
  // Data-parallel figures (world_size 1: no communication, zeros).
  int world_size = 1;
  std::string sync;                 // "allreduce" or "average:K" ("" alone)
  std::string grad_compression;     // "none", "fp16", "topk" ("" alone)
  int64_t steps = 0;                // optimizer steps per rank, all epochs
  int64_t buckets = 0;              // gradient buckets (allreduce)
  double bytes_per_step = 0;        // payload bytes this rank handed to collectives per step
  double fp32_bytes_per_step = 0;   // the same tensors as fp32 allreduce
  double compression_ratio = 0;     // fp32_bytes_per_step / bytes_per_step
  // Per trainable set, in order (one for a run whose trainable set never changes; a new one
  // after each --freeze that shrinks it). Empty alone.
  std::vector<CommPhase> comm_phases;
  // Progressive recycling (--freeze; "" and empty otherwise).
  std::string freeze;               // the rule's spec
  std::vector<FreezeEvent> freezes; // in order
  // Per epoch: with --freeze "raw" or the level trained from; with --alternate-preload "cache"
  // or "preloaded".
  std::vector<std::string> epoch_sources;
  double level_seconds = 0;         // making levels (builds, derivations), within `seconds`
  // From a cache (mode "cache"): how --memory-budget was divided, and the bytes the block
  // cache held when training ended. Zeros otherwise.
  MemoryPlan memory;
  int64_t block_cache_used = 0;
  std::string to_json() const;      // one line
};

// Calls options.validate() first. Throws std::runtime_error / std::invalid_argument with one
// clear line on bad input. In a
// data-parallel job a failure of another rank ends this one with a line naming the lost rank.
TrainReport run_train(const TrainOptions& options);

}  // namespace recycle
