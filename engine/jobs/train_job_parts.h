// Parts of the training job shared by its modes (train_job.cc), progressive recycling
// (progressive_job.cc) and its report (train_report.cc). Internal to engine/jobs.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "engine/jobs/train_job.h"
#include "cache/activation_store.h"
#include "engine/models/block_model.h"
#include "engine/models/split_model.h"
#include "engine/train/trainer.h"

namespace recycle {

class DistContext;
struct DataParallelStats;
struct AsyncReport;

// Epochs, epoch seconds and losses, and samples/s from the median epoch.
void fill_report(TrainReport* report, const std::vector<EpochResult>& epochs);
// The model of cache `store` (manifest m) into *model: the encoder its spec names, its class
// names, the head after the split point from the cache's "head" blob (a classifier new to the
// cache's classes drawn from `seed`), the head moved to `device`. The prefix blocks keep their
// initial weights: a cache holds none. Throws std::runtime_error naming the cache.
SplitModel head_from_cache(const ActivationStore& store, const Manifest& m, uint64_t seed,
                           const torch::Device& device, BlockModel* model);
// The data-parallel figures of the report: world, sync, compression, steps, buckets, bytes per
// step, and the traffic of each phase (trainable set).
void fill_dist_report(TrainReport* report, const DistContext& dist, const TrainOptions& o,
                      const DataParallelStats& s);
// The figures of an asynchronous (parameter-server) run: the world, steps and bytes per step,
// the servers' counts, each worker's share and the workers lost (a note for each).
void fill_async_report(TrainReport* report, const DistContext& dist, const TrainOptions& o,
                       const AsyncReport& a);
// run_train with --freeze (progressive_job.cc): alone (dist null) or as one rank of `dist`.
TrainReport train_progressive(const TrainOptions& options, const torch::Device& device,
                              DistContext* dist);

}  // namespace recycle
