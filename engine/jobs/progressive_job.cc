// train_progressive: recycle-train --freeze (docs/progressive.md). The run starts on raw data
// with every block trainable (--data, --recycle 0) or on an existing level (--cache), and a
// ProgressiveFreezer moves the freeze point at epoch boundaries, making each new level from the
// one before.
#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>

#include "cache/activation_store.h"
#include "engine/jobs/train_job_parts.h"
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
  const auto it = m.splits.find(o.data.split);
  if (it == m.splits.end() || !it->second.complete) {
    throw std::runtime_error("cache " + o.cache_dir + " has no complete split '" + o.data.split +
                             "' to start a progressive run from");
  }
  head_from_cache(*s.store, m, o.hyper.seed, device, &s.model);
  return s;
}

}  // namespace

TrainReport train_progressive(const TrainOptions& o, const torch::Device& device) {
  const FreezeRule rule = parse_freeze_rule(o.freeze);
  if (o.levels_dir.empty()) {
    throw std::invalid_argument("--freeze needs --levels DIR: the directory its cache levels go to");
  }
  if (o.preload) throw std::invalid_argument("--preload does not go with --freeze");
  if (o.no_cache || o.recycle > 0 || !o.split_at.empty()) {
    throw std::invalid_argument("--freeze starts with every block trainable on raw data "
                                "(--recycle 0) or from a cache (--cache): --recycle R, --split-at "
                                "and --no-cache do not apply");
  }
  const bool from_cache = !o.cache_dir.empty();
  if (from_cache && !o.model.weights.empty()) {
    throw std::invalid_argument("--weights does not apply to --freeze with --cache (the cache "
                                "holds the head it starts from)");
  }
  TrainReport report;
  report.mode = "progressive";
  report.freeze = rule.spec();

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
    if (eval_split.empty()) eval_split = level->manifest.splits.count("test") ? "test" : "none";
    start_source = std::make_unique<CachedBatches>(*level->store, level->manifest, o.data.split,
                                                   device);
    if (o.prefetch > 0) {
      start_prefetched = std::make_unique<PrefetchedBatches>(*start_source, o.prefetch);
    }
  } else {
    data.emplace(load_dataset(o.data));
    ModelOptions mo = o.model;
    mo.seed = o.hyper.seed;
    pm.emplace(prepare_model(mo, *data, 0.0, "", device));
    model = &pm->model;
    if (eval_split.empty()) eval_split = "test";
    if (eval_split == o.data.split) {
      throw std::invalid_argument("--eval-split names the training split");
    }
    start_source = std::make_unique<RawBatches>(*data, pm->split.prefix, device);
  }
  if (eval_split != "none" && from_cache) {
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
  po.levels_dir = o.levels_dir;
  po.derive.batch = std::max<int64_t>(o.hyper.batch, 256);
  po.derive.progress = o.progress;
  po.derive.device = device;
  po.raw.data = o.data;
  po.raw.eval_split = eval_split;
  po.raw.codec = o.level_codec;
  po.raw.batch = po.derive.batch;
  po.raw.threads = o.threads;
  po.raw.progress = o.progress;
  po.raw.device = o.device;
  po.prefetch = o.prefetch;
  po.train_split = o.data.split;
  ProgressiveFreezer freezer(*model, frozen, from_cache ? o.cache_dir : "",
                             make_freeze_schedule(rule, o.hyper.epochs, model->num_blocks()), po,
                             source);

  Trainer trainer(split_block_model(*model, frozen).head, o.hyper);
  freezer.attach(trainer);
  if (!o.profile.empty()) profile_epoch(trainer, o.profile, epoch_to_profile(o.hyper.epochs));
  const Sampler sampler(source.size(), /*shuffle=*/true, o.hyper.seed);
  fill_report(&report, trainer.fit(source, sampler, o.progress));
  report.steps = report.epochs * ((sampler.samples_per_rank() + o.hyper.batch - 1) / o.hyper.batch);
  report.freezes = freezer.events();
  report.epoch_sources = freezer.epoch_sources();
  report.level_seconds = freezer.level_seconds();
  report.recycle = static_cast<double>(freezer.frozen()) / model->num_blocks();

  BlockStack head = trainer.module();
  if (eval_split != "none") {
    const int64_t batch = std::max<int64_t>(o.hyper.batch, 256);
    EvalResult r;
    if (freezer.frozen() == 0) {
      DatasetOptions eo = o.data;
      eo.split = eval_split;
      eo.limit = 0;
      const Dataset eval_data = load_dataset(eo);
      if (eval_data.class_names != data->class_names) {
        throw std::runtime_error("split " + eval_split + " has other classes than " + o.data.split);
      }
      RawBatches eval(eval_data, pm->split.prefix, device);
      r = evaluate_module(head, eval, batch);
    } else {
      Manifest m;
      const std::unique_ptr<ActivationStore> store = open_level_read_only(freezer.level_dir(), &m);
      CachedBatches eval(*store, m, eval_split, device);
      r = evaluate_module(head, eval, batch);
    }
    report.test_acc = r.accuracy;
    report.test_samples = r.samples;
  }
  if (!o.save_model.empty()) save_block_model(*model, o.save_model);
  if (!o.save_head.empty()) save_head(head, o.save_head);
  return report;
}

}  // namespace recycle
