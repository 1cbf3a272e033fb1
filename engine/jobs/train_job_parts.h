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
// The model of the cache at `cache_dir` (manifest m) into *model, split at its split point: the
// encoder its spec names (a torchscript:FILE model from `model_given`, the user's --model, its
// digest and prefix fingerprint the manifest's), its class names, a classifier new to the
// cache's classes where the build made one; the weights as the encoder makes them. Throws
// InvalidArgument (--model for an engine model, or none for a file model), StaleCacheError
// (another file), std::runtime_error (a model this version does not know).
SplitModel model_of_cache(const Manifest& m, const std::string& cache_dir,
                          const std::string& model_given, BlockModel* model);
// The model of cache `store` (manifest m) into *model: the encoder its spec names, its class
// names, the head after the split point from the cache's "head" blob (a classifier new to the
// cache's classes drawn from `seed`), the head moved to `device`. The prefix blocks keep their
// initial weights: a cache holds none. A model loaded from a file (torchscript:FILE) is loaded
// from `model_given` (the user's --model), which must be the file the cache was built from (its
// digest and prefix fingerprint the manifest's); the path the manifest names is never opened.
// Throws std::runtime_error naming the cache (InvalidArgument without the file, StaleCacheError
// for another one).
SplitModel head_from_cache(const ActivationStore& store, const Manifest& m, uint64_t seed,
                           const torch::Device& device, BlockModel* model,
                           const std::string& model_given = "");
// The data-parallel figures of the report: world, sync, compression, steps, buckets, bytes per
// step, and the traffic of each phase (trainable set).
void fill_dist_report(TrainReport* report, const DistContext& dist, const TrainOptions& o,
                      const DataParallelStats& s);
// The figures of an asynchronous (parameter-server) run: the world, steps and bytes per step,
// the servers' counts, each worker's share and the workers lost (a note for each).
void fill_async_report(TrainReport* report, const DistContext& dist, const TrainOptions& o,
                       const AsyncReport& a);
// ---- training from shards (--sharded; train_shards.cc) -----------------------------------------
// Rank r of W trains on the split's shard r of W in its own cache, every rank the same number of
// steps an epoch, and the evaluation covers every shard.

// Refuses, with one line naming the cache, a split whose shard does not fit the job: a shard of
// a job that is not sharded, the whole split (or another rule) in a sharded job, or shard i of N
// where the job has rank r of W. `dist` null: a job of one process.
void check_split_shard(const TrainOptions& o, const DistContext* dist, const Manifest& m,
                       const std::string& split);
// The samples every rank's epoch takes when each trains on its own shard (`samples` its size):
// ceil(the shards' samples / the ranks), the share of a rank of a shared cache (an allreduce),
// so that an epoch has the shared cache's steps whatever the shards' sizes.
int64_t even_share(DistContext& dist, int64_t samples);
// Every rank's evaluation of its own shard, summed: the accuracy and loss of them all, and
// their samples (an allreduce; every rank gets the same).
EvalResult evaluation_of_every_shard(DistContext& dist, const EvalResult& own);

// run_train with --freeze (progressive_job.cc): alone (dist null) or as one rank of `dist`.
TrainReport train_progressive(const TrainOptions& options, const torch::Device& device,
                              DistContext* dist);

}  // namespace recycle
