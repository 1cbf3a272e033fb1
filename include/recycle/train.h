// Training: run_train trains a model's head from an activation cache, or a model from raw data
// (TrainOptions in options.h), and reports what it did (TrainReport; to_json is the line
// recycle-train --json prints).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "recycle/options.h"

namespace recycle {

// The gradient traffic of one stretch of a data-parallel run over which the trainable parameters
// stay the same (the whole run, unless a freeze schedule shrinks them).
struct CommPhase {
  int64_t first_step = 0;  // optimizer steps before this phase (0-based index of its first)
  int64_t steps = 0;
  int64_t trainable = 0;   // parameter elements whose gradients (or values) travel
  int64_t buckets = 0;     // gradient buckets (allreduce; 0 with average:K)
  int64_t bytes_sent = 0;  // payload this rank handed to collectives in the phase
  int64_t fp32_bytes = 0;  // what fp32 allreduce of the same tensors would have handed
  double bytes_per_step() const { return steps ? static_cast<double>(bytes_sent) / steps : 0.0; }
  double fp32_bytes_per_step() const {
    return steps ? static_cast<double>(fp32_bytes) / steps : 0.0;
  }
};

// A cache level as a progressive run made or found it (engine/train/cache_levels.h).
struct LevelInfo {
  std::string dir;            // its cache directory
  int64_t prefix_blocks = 0;
  std::string split_at;       // its last frozen block
  std::string fingerprint;
  std::string source;         // "raw" (built by run_build) or the level directory it came from
  bool reused = false;        // found complete with this identity: nothing computed
  int64_t computed = 0;       // records computed and written
  int64_t bytes = 0;          // record bytes written (before compression; 0 when reused)
  int64_t samples = 0;        // index entries over its splits
  double seconds = 0;         // wall time of making (or finding) it
};

// One freeze of a progressive run, for its report.
struct FreezeEvent {
  int64_t epoch = 0;          // the first epoch (1-based) trained with these blocks frozen
  std::string rule;           // what decided it: the rule's spec, e.g. "auto:0.1"
  double measure = 0;         // auto: the relative change of the gradient norm; linear: the
                              // fraction of training done
  int64_t from_blocks = 0, to_blocks = 0;
  std::vector<std::string> blocks;  // names of the blocks frozen by it
  int64_t trainable_before = 0, trainable_after = 0;  // parameters (elements) the optimizer
                                                      // updates, before and after
  LevelInfo level;            // the level the next epochs train from
};

// How recycle-train --memory-budget was divided (engine/train/memory_budget.h plans it).
struct MemoryPlan {
  int64_t queue_bytes = 0;        // batches held: the prefetch queue and the trainer's, or the
                                  // evaluation's when it is larger
  int64_t preload_bytes = 0;      // the decoded split (--preload), else 0
  int64_t index_bytes = 0;        // the samples' index in memory
  int64_t block_cache_bytes = 0;  // the rest of the budget
};

// Asynchronous training's figures (--sync async), rank 0's view.
struct AsyncFigures {
  int servers = 0;
  int64_t max_staleness = -1;
  int64_t samples = 0;        // rank 0's worker's samples, all epochs (the others' are theirs)
  int64_t pushes = 0;         // rank 0's worker's pushes
  int64_t fetches = 0;        // its fetches (scheduled ones)
  int64_t stale_fetches = 0;  // its fetches forced by --max-staleness
  double push_bytes_per_step = 0;
  double fetch_bytes_per_step = 0;
  int64_t server_pushes = 0;  // pushes rank 0's shard applied, from every worker
  // Every worker that finished (a lost one is missing): its steps, samples, and the pushed and
  // fetched bytes that crossed a link (to and from servers of other ranks; rank 0's worker
  // reaches its own shard without one).
  struct Worker {
    int rank = 0;
    int64_t steps = 0;
    int64_t samples = 0;
    int64_t link_bytes = 0;
  };
  std::vector<Worker> workers;
  double link_bytes_per_step = 0;  // over those workers: their link bytes over their steps
  std::vector<int> lost_workers;  // ranks lost during the job
  std::vector<int64_t> epoch_samples;  // per epoch, samples trained by all workers together
};

struct TrainReport {
  std::string mode;  // "cache", "full", "frozen" (prefix recomputed) or
                     // "progressive" (--freeze)
  // The prefix's share of the model's blocks; -1 (JSON null) for a cache of a prefix the engine
  // does not know (a Python prefix's: recycle.build), whose ratio is not the engine's to say.
  double recycle = 0;
  int64_t epochs = 0;          // trained by this run
  int64_t resumed_epochs = 0;  // done before it, by the --checkpoint it resumed from
  int64_t resumed_batches = 0;  // of the epoch after those, done before it (--checkpoint-every)
  int64_t train_samples = 0;  // per epoch
  int64_t views = 0;          // from a cache split of augmented views: K (one read per epoch)
  std::vector<double> epoch_seconds;
  std::vector<double> epoch_loss;
  double train_samples_per_s = 0;  // train_samples / median epoch seconds
  double test_acc = -1;            // -1 without evaluation
  // With --eval-every-epoch: the test accuracy after each epoch (the last is test_acc). Under
  // --sync async, epoch e's is of the servers' parameters when rank 0 saw epoch e complete
  // (a copy kept then, evaluated when training ends: the other workers never wait for it).
  std::vector<double> epoch_test_acc;
  int64_t test_samples = 0;
  double seconds = 0;              // wall time of run_train
  std::vector<std::string> notes;  // what the user should know, e.g. no evaluation
  std::string precision;           // of the training forward: "fp32" or "bf16"
  // Data-parallel figures (world_size 1: no communication, zeros).
  int world_size = 1;
  std::string sync;                // "allreduce", "average:K" or "async:P:F" ("" alone)
  std::string grad_compression;    // "none", "fp16", "topk" ("" alone)
  int64_t steps = 0;               // optimizer steps per rank, all epochs
  int64_t buckets = 0;             // gradient buckets (allreduce)
  double bytes_per_step = 0;       // payload bytes this rank handed to collectives per step
  double fp32_bytes_per_step = 0;  // the same tensors as fp32 allreduce
  double compression_ratio = 0;    // fp32_bytes_per_step / bytes_per_step
  // Per trainable set, in order (one for a run whose trainable set never changes; a new one
  // after each --freeze that shrinks it). Empty alone.
  std::vector<CommPhase> comm_phases;
  AsyncFigures async;  // with --sync async; bytes_per_step above counts pushes and fetches
  // Progressive recycling (--freeze; "" and empty otherwise).
  std::string freeze;                // the rule's spec
  std::vector<FreezeEvent> freezes;  // in order
  // Per epoch: with --freeze "raw" or the level trained from; with --alternate-preload "cache"
  // or "preloaded".
  std::vector<std::string> epoch_sources;
  double level_seconds = 0;  // making levels (builds, derivations), within `seconds`
  // From a cache (mode "cache"): how --memory-budget was divided, and the bytes the block
  // cache held when training ended. Zeros otherwise.
  MemoryPlan memory;
  int64_t block_cache_used = 0;
  std::string to_json() const;  // one line
};

// Calls options.validate() first. Throws std::invalid_argument (InvalidArgument, errors.h) for
// bad options, StaleCacheError for a cache that was not built from the given --weights, and
// std::runtime_error otherwise, each with one clear line. In a data-parallel job a failure of
// another rank ends this one with a line naming the lost rank.
TrainReport run_train(const TrainOptions& options);

}  // namespace recycle
