// train_progressive: recycle-train --freeze (docs/progressive.md). The run starts on raw data
// with every block trainable (--data, --recycle 0) or on an existing level (--cache), and a
// ProgressiveFreezer moves the freeze point at epoch boundaries, making each new level from the
// one before.
//
// Data-parallel (a DistContext): rank R of W trains on its fixed shard of the training split
// (DatasetOptions::shard_*: every W-th sample from R, up to W-1 left out so the shards are the
// same size), and keeps its own levels in LEVELS/shard-R-of-W: the first is built from its raw
// shard, each later one derived from its shard of the one before. Rank 0 decides every freeze
// and broadcasts it (its rule reads gradient norms that are already averaged, so the others
// would decide the same; the broadcast makes it certain); the freezing blocks take rank 0's
// weights and batch-norm statistics first. DataParallel starts a new phase (new buckets) when
// the trainable set shrinks. Every rank evaluates its shard of the evaluation split and the
// counts are summed.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <stdexcept>

#include "cache/activation_store.h"
#include "engine/distributed/data_parallel.h"
#include "engine/distributed/dist_context.h"
#include "engine/jobs/head_file.h"
#include "engine/jobs/train_job_parts.h"
#include "engine/models/encoder_registry.h"
#include "engine/models/model_setup.h"
#include "engine/models/split_model.h"
#include "engine/models/weights_io.h"
#include "engine/train/batch_sources.h"
#include "engine/train/epoch_profiler.h"
#include "engine/train/prefetch.h"
#include "engine/train/progressive.h"

namespace recycle {

namespace {

// The level a run starts from: its store, manifest and model (the head as the cache stored it).
struct StartLevel {
  std::unique_ptr<ActivationStore> store;
  Manifest manifest;
  BlockModel model;
};

StartLevel open_start_level(const TrainOptions& o, const torch::Device& device) {
  StartLevel s;
  s.store = open_level_read_only(o.cache_dir, &s.manifest);
  const Manifest& m = s.manifest;
  if (encoder_info(EncoderSpec::parse(m.model).name).input == EncoderInput::kText) {
    throw std::invalid_argument("--freeze does not apply to text: cache " + o.cache_dir +
                                " holds a text model's activations (docs/progressive.md)");
  }
  const auto it = m.splits.find(o.data.split);
  if (it == m.splits.end() || !it->second.complete) {
    throw std::runtime_error("cache " + o.cache_dir + " has no complete split '" + o.data.split +
                             "' to start a progressive run from");
  }
  head_from_cache(*s.store, m, o.hyper.seed, device, &s.model);
  return s;
}

// Per rank: the rule's decision on rank 0, and with it what it measured.
FreezeSchedule decided_on_rank0(FreezeSchedule schedule, DistContext& dist) {
  return [schedule, &dist](int64_t epoch, int64_t frozen, const GradNormHistory& history,
                           double* measure) {
    const int64_t next = schedule(epoch, frozen, history, measure);
    torch::Tensor decision = torch::tensor({static_cast<double>(next), *measure}, torch::kDouble);
    broadcast_from_rank0(dist, {decision});
    *measure = decision[1].item<double>();
    return static_cast<int64_t>(std::llround(decision[0].item<double>()));
  };
}

// Accuracy and loss over every rank's shard: the ranks' counts summed.
EvalResult summed_over_ranks(const EvalResult& mine, DistContext& dist) {
  torch::Tensor t = torch::tensor({mine.accuracy * static_cast<double>(mine.samples),
                                   mine.loss * static_cast<double>(mine.samples),
                                   static_cast<double>(mine.samples)},
                                  torch::kDouble);
  allreduce_sum(dist, {t});
  EvalResult r;
  r.samples = static_cast<int64_t>(std::llround(t[2].item<double>()));
  if (r.samples > 0) {
    r.accuracy = std::round(t[0].item<double>()) / static_cast<double>(r.samples);
    r.loss = t[1].item<double>() / static_cast<double>(r.samples);
  }
  return r;
}

}  // namespace

TrainReport train_progressive(const TrainOptions& o, const torch::Device& device,
                              DistContext* dist) {
  // run_train validated the options (TrainOptions::validate: --levels given, nothing that
  // does not go with --freeze).
  const FreezeRule rule = parse_freeze_rule(o.freeze);
  const bool from_cache = !o.cache_dir.empty();
  TrainReport report;
  report.mode = "progressive";
  report.freeze = rule.spec();

  // Alone: the whole split and LEVELS. Rank R of W: its shard and LEVELS/shard-R-of-W.
  DatasetOptions shard = with_encoder_input(o.data, o.model);
  std::string levels_dir = o.levels_dir;
  if (dist) {
    shard.shard_index = dist->rank();
    shard.shard_count = dist->world();
    levels_dir += "/shard-" + std::to_string(dist->rank()) + "-of-" + std::to_string(dist->world());
  }

  // The model, where the run starts, and its training source.
  std::optional<StartLevel> level;
  std::optional<PreparedModel> pm;
  std::optional<Dataset> data;
  std::unique_ptr<BatchSource> start_source, start_prefetched;
  BlockModel* model = nullptr;
  int64_t frozen = 0;
  std::string eval_split = o.eval_split;
  if (from_cache) {
    level.emplace(open_start_level(o, device));
    model = &level->model;
    frozen = level->manifest.prefix_blocks;
    if (eval_split.empty()) {
      eval_split = level->manifest.splits.count("test") ? "test" : kNoEvalSplit;
    }
    auto cached = std::make_unique<CachedBatches>(*level->store, level->manifest, o.data.split,
                                                  device);
    start_prefetched = load_ahead(*cached, o.prefetch);
    start_source = std::move(cached);
  } else {
    data.emplace(load_dataset(shard));
    ModelOptions mo = o.model;
    mo.seed = o.hyper.seed;
    pm.emplace(prepare_model(mo, *data, 0.0, "", device));
    model = &pm->model;
    if (eval_split.empty()) eval_split = "test";  // not data.split: validate() refused it
    start_source = std::make_unique<RawBatches>(*data, pm->split.prefix, device);
  }
  if (eval_split != kNoEvalSplit && from_cache) {
    const auto it = level->manifest.splits.find(eval_split);
    if (it == level->manifest.splits.end() || !it->second.complete) {
      throw std::runtime_error("cache " + o.cache_dir + " has no complete split '" + eval_split +
                               "' to evaluate on (build it, or pass --eval-split none)");
    }
  }
  report.train_samples = start_source->size();
  SwappableBatches source(start_prefetched ? start_prefetched.get() : start_source.get());

  ProgressiveOptions po;
  po.rule = rule.spec();
  po.track_grad_norms = rule.kind == FreezeRule::Kind::kAuto;
  po.levels_dir = levels_dir;
  po.derive.batch = std::max<int64_t>(o.hyper.batch, 256);
  po.derive.progress = o.progress;
  po.derive.device = device;
  po.raw.data = shard;
  po.raw.eval_split = eval_split;
  po.raw.codec = o.level_codec;
  po.raw.batch = po.derive.batch;
  po.raw.threads = o.threads;
  po.raw.progress = o.progress;
  po.raw.device = o.device;
  po.prefetch = o.prefetch;
  po.train_split = o.data.split;
  FreezeSchedule schedule = make_freeze_schedule(rule, o.hyper.epochs, model->num_blocks());
  if (dist) {
    schedule = decided_on_rank0(std::move(schedule), *dist);
    po.before_freeze = [dist](const std::vector<torch::Tensor>& state) {
      broadcast_from_rank0(*dist, state);
    };
  }
  ProgressiveFreezer freezer(*model, frozen, from_cache ? o.cache_dir : "", std::move(schedule),
                             po, source);

  Trainer trainer(split_block_model(*model, frozen).head, o.hyper);
  if (!o.profile.empty() && (!dist || dist->rank() == 0)) {
    profile_epoch(trainer, o.profile, epoch_to_profile(o.hyper.epochs));
  }
  // Every rank visits its own shard alone: the sampler is rank 0 of 1 over it.
  const Sampler sampler(source.size(), /*shuffle=*/true, o.hyper.seed);
  // DataParallel's hooks go first: the freezer's gradient norms are of averaged gradients, and
  // its new phase (epoch start) follows the freezer's set_module (epoch end).
  std::unique_ptr<DataParallel> dp;
  try {
    if (dist) dp = std::make_unique<DataParallel>(*dist, trainer);
    freezer.attach(trainer);
    fill_report(&report, trainer.fit(source, sampler, o.progress));
    if (dp) {
      dp->finish();
      fill_dist_report(&report, *dist, o, dp->stats());
    }
  } catch (const CommFailure& e) {
    throw std::runtime_error(dist->explain_failure(e.what()));
  }
  report.steps = report.epochs * ((sampler.samples_per_rank() + o.hyper.batch - 1) / o.hyper.batch);
  report.freezes = freezer.events();
  report.epoch_sources = freezer.epoch_sources();
  report.level_seconds = freezer.level_seconds();
  report.recycle = static_cast<double>(freezer.frozen()) / model->num_blocks();

  BlockStack head = trainer.module();
  if (eval_split != kNoEvalSplit) {
    const int64_t batch = o.hyper.eval_batch();
    EvalResult r;
    if (freezer.frozen() == 0) {
      DatasetOptions eo = shard;
      eo.split = eval_split;
      eo.limit = 0;
      Dataset eval_data = load_dataset(eo);
      adopt_class_names(&eval_data, data->class_names, eval_split, "split " + o.data.split);
      RawBatches eval(eval_data, pm->split.prefix, device);
      r = evaluate_module(head, eval, batch);
    } else {
      Manifest m;
      const std::unique_ptr<ActivationStore> store = open_level_read_only(freezer.level_dir(), &m);
      CachedBatches eval(*store, m, eval_split, device);
      r = evaluate_module(head, eval, batch);
    }
    if (dist) {
      try {
        r = summed_over_ranks(r, *dist);
      } catch (const CommFailure& e) {
        throw std::runtime_error(dist->explain_failure(e.what()));
      }
    }
    report.test_acc = r.accuracy;
    report.test_samples = r.samples;
  }
  if (dist && dist->rank() != 0) return report;  // rank 0 alone writes
  if (!o.save_model.empty()) save_block_model(*model, o.save_model);
  if (!o.save_head.empty()) {
    // Behind a level: that level's identity; on raw data (nothing frozen): the empty prefix's.
    HeadIdentity identity;
    if (freezer.frozen() > 0) {
      Manifest m;
      open_level_read_only(freezer.level_dir(), &m);
      identity = head_identity_of_cache(m);
    } else {
      identity = head_identity_of_model(*model, split_block_model(*model, 0));
    }
    save_head(head, identity, o.save_head);
  }
  return report;
}

}  // namespace recycle
