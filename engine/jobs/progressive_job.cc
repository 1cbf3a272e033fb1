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
#include "engine/models/inference_prefix.h"
#include "engine/models/model_setup.h"
#include "engine/models/split_model.h"
#include "engine/models/weights_io.h"
#include "engine/train/batch_sources.h"
#include "engine/train/cache_levels.h"
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
  head_from_cache(*s.store, m, o.hyper.seed, device, &s.model, o.model.encoder);
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

// Alone: the whole split and LEVELS. Rank R of W: its slice (DatasetOptions::slice_*) and
// LEVELS/shard-R-of-W.
DatasetOptions rank_slice(const TrainOptions& o, DistContext* dist, std::string* levels_dir) {
  DatasetOptions slice = with_encoder_input(o.data, o.model);
  *levels_dir = o.levels_dir;
  if (dist) {
    slice.slice_index = dist->rank();
    slice.slice_count = dist->world();
    *levels_dir +=
        "/shard-" + std::to_string(dist->rank()) + "-of-" + std::to_string(dist->world());
  }
  return slice;
}

// Where the run starts: a level (--cache), or raw data and the model prepared for it (--data);
// the model trained, its frozen blocks, its training source and the split evaluated on. Filled
// in place, never moved: `model` and the sources point into `level`, `data` and `pm`. Members
// go in reverse order, so each goes before what it points into (`prefetched` reads `source`).
struct RunStart {
  std::optional<StartLevel> level;
  std::optional<PreparedModel> pm;
  std::optional<Dataset> data;
  std::unique_ptr<BatchSource> source, prefetched;
  BlockModel* model = nullptr;
  int64_t frozen = 0;
  std::string eval_split;  // --eval-split; when empty, the start chooses
};

// Starts from the level of --cache, its training split loaded ahead as --prefetch says. Refuses
// a level without a complete split to evaluate on.
void start_from_level(const TrainOptions& o, const torch::Device& device, RunStart* s) {
  s->level.emplace(open_start_level(o, device));
  const Manifest& m = s->level->manifest;
  std::string& eval_split = s->eval_split;
  s->model = &s->level->model;
  s->frozen = m.prefix_blocks;
  if (eval_split.empty()) {
    eval_split = m.splits.count("test") ? "test" : kNoEvalSplit;
  }
  auto cached = std::make_unique<CachedBatches>(*s->level->store, m, o.data.split, device);
  s->prefetched = load_ahead(*cached, o.prefetch);
  s->source = std::move(cached);
  if (eval_split != kNoEvalSplit) {
    const auto it = m.splits.find(eval_split);
    if (it == m.splits.end() || !it->second.complete) {
      throw std::runtime_error("cache " + o.cache_dir + " has no complete split '" + eval_split +
                               "' to evaluate on (build it, or pass --eval-split none)");
    }
  }
}

// Starts on the raw data of `shard`, every block trainable.
void start_from_data(const TrainOptions& o, const DatasetOptions& shard,
                     const torch::Device& device, RunStart* s) {
  s->data.emplace(load_dataset(shard));
  ModelOptions mo = o.model;
  mo.seed = o.hyper.seed;
  s->pm.emplace(prepare_model(mo, *s->data, 0.0, "", device));
  s->model = &s->pm->model;
  if (s->eval_split.empty()) s->eval_split = "test";  // not data.split: validate() refused it
  s->source = std::make_unique<RawBatches>(*s->data, s->pm->split.prefix, device);
}

// The freezer's options: its rule, where its levels go, and how it makes them (the first from
// the raw `shard`, each later one derived from the one before: the training split alone).
ProgressiveOptions progressive_options(const TrainOptions& o, const FreezeRule& rule,
                                       const std::string& levels_dir, const DatasetOptions& shard,
                                       const torch::Device& device) {
  ProgressiveOptions po;
  po.rule = rule.spec();
  po.track_grad_norms = rule.kind == FreezeRule::Kind::kAuto;
  po.levels_dir = levels_dir;
  po.derive.batch = std::max<int64_t>(o.hyper.batch, 256);
  po.derive.progress = o.progress;
  po.derive.device = device;
  po.derive.splits = {o.data.split};
  po.raw.data = shard;
  po.raw.codec = o.level_codec;
  po.raw.batch = po.derive.batch;
  po.raw.threads = o.threads;
  po.raw.progress = o.progress;
  po.raw.device = o.device;
  po.prefetch = o.prefetch;
  po.train_split = o.data.split;
  return po;
}

// Trains `trainer`'s module on `source` with `freezer` attached: alone, or as one rank of
// `dist` through a DataParallel made into *dp, which the caller holds beside `trainer` (whose
// gradients it hooks) until the run ends. Fills the report's epochs, steps and data-parallel
// figures.
void fit_freezing(const TrainOptions& o, DistContext* dist, Trainer& trainer,
                  ProgressiveFreezer& freezer, SwappableBatches& source,
                  std::unique_ptr<DataParallel>* dp, TrainReport* report) {
  if (!o.profile.empty() && (!dist || dist->rank() == 0)) {
    profile_epoch(trainer, o.profile, epoch_to_profile(o.hyper.epochs));
  }
  // Every rank visits its own shard alone: the sampler is rank 0 of 1 over it.
  const Sampler sampler(source.size(), /*shuffle=*/true, o.hyper.seed);
  // DataParallel's hooks go first: the freezer's gradient norms are of averaged gradients, and
  // its new phase (epoch start) follows the freezer's set_module (epoch end).
  try {
    if (dist) *dp = std::make_unique<DataParallel>(*dist, trainer);
    freezer.attach(trainer);
    fill_report(report, trainer.fit(source, sampler, o.progress));
    if (*dp) {
      (*dp)->finish();
      fill_dist_report(report, *dist, o, (*dp)->stats());
    }
  } catch (const CommFailure& e) {
    throw std::runtime_error(dist->explain_failure(e.what()));
  }
  report->steps =
      report->epochs * ((sampler.samples_per_rank() + o.hyper.batch - 1) / o.hyper.batch);
}

// What the freezer did: its freezes, each epoch's source, the seconds its levels took, and the
// share of `model`'s blocks frozen at the end.
void fill_freeze_report(const ProgressiveFreezer& freezer, const BlockModel& model,
                        TrainReport* report) {
  report->freezes = freezer.events();
  report->epoch_sources = freezer.epoch_sources();
  report->level_seconds = freezer.level_seconds();
  report->recycle = static_cast<double>(freezer.frozen()) / model.num_blocks();
}

// Another source's batches passed through blocks that train no more, folded and in inference
// mode (InferencePrefix, as a build runs a prefix): how the evaluation reaches the trained head
// without a level of its split.
class ThroughFrozenBlocks final : public BatchSource {
 public:
  ThroughFrozenBlocks(BatchSource& inner, const InferencePrefix& blocks)
      : inner_(inner), blocks_(blocks) {}
  int64_t size() const override { return inner_.size(); }
  void plan(const std::vector<int64_t>& order, int64_t batch) override {
    inner_.plan(order, batch);
  }
  void load(const int64_t* indices, int64_t n, Batch* out) override {
    inner_.load(indices, n, out);
    torch::Tensor x = blocks_.forward(out->features());
    out->set(out->inputs.front().first, std::move(x));
  }

 private:
  BatchSource& inner_;
  const InferencePrefix& blocks_;
};

// `head` on `eval`, the blocks between the run's start and its last freeze folded in front.
EvalResult evaluate_frozen_then_head(const BlockModel& model, int64_t from, int64_t to,
                                     BatchSource& eval, int64_t batch) {
  BlockStack head = split_block_model(model, to).head;
  if (to == from) return evaluate_module(head, eval, batch);
  const InferencePrefix frozen(block_range(model, from, to), to - from);
  ThroughFrozenBlocks through(eval, frozen);
  return evaluate_module(head, through, batch);
}

// The trained model's accuracy on the evaluation split, read where the run started (raw data,
// or the start level's split) and passed through the blocks frozen since (folded) and the
// trained head: levels hold the training split alone, so no level derives records that only
// this one pass reads. Data-parallel, over every rank's shard.
EvalResult evaluate_progressive(const TrainOptions& o, const torch::Device& device,
                                DistContext* dist, const DatasetOptions& shard,
                                const RunStart& start, int64_t frozen) {
  const std::string& eval_split = start.eval_split;
  const int64_t batch = o.hyper.eval_batch();
  EvalResult r;
  if (start.level) {
    CachedBatches eval(*start.level->store, start.level->manifest, eval_split, device);
    r = evaluate_frozen_then_head(*start.model, start.frozen, frozen, eval, batch);
  } else {
    DatasetOptions eo = shard;
    eo.split = eval_split;
    eo.limit = 0;
    Dataset eval_data = load_dataset(eo);
    adopt_class_names(&eval_data, start.data->class_names, eval_split, "split " + o.data.split);
    RawBatches eval(eval_data, start.pm->split.prefix, device);
    r = evaluate_frozen_then_head(*start.model, start.frozen, frozen, eval, batch);
  }
  if (dist) {
    try {
      r = summed_over_ranks(r, *dist);
    } catch (const CommFailure& e) {
      throw std::runtime_error(dist->explain_failure(e.what()));
    }
  }
  return r;
}

// Rank 0's files: --save-model and --save-head.
void save_progressive(const TrainOptions& o, const BlockModel& model,
                      const ProgressiveFreezer& freezer, BlockStack& head) {
  if (!o.save_model.empty()) save_block_model(model, o.save_model);
  if (!o.save_head.empty()) {
    // Behind a level: that level's identity; on raw data (nothing frozen): the empty prefix's.
    HeadIdentity identity;
    if (freezer.frozen() > 0) {
      Manifest m;
      open_level_read_only(freezer.level_dir(), &m);
      identity = head_identity_of_cache(m);
    } else {
      identity = head_identity_of_model(model, split_block_model(model, 0));
    }
    save_head(head, identity, o.save_head);
  }
}

}  // namespace

TrainReport train_progressive(const TrainOptions& o, const torch::Device& device,
                              DistContext* dist) {
  // run_train validated the options (TrainOptions::validate: --levels given, nothing that
  // does not go with --freeze).
  const FreezeRule& rule = o.freeze;
  const bool from_cache = !o.cache_dir.empty();
  TrainReport report;
  report.mode = "progressive";
  report.freeze = rule.spec();
  std::string levels_dir;
  const DatasetOptions shard = rank_slice(o, dist, &levels_dir);

  // The model, where the run starts, and its training source.
  RunStart start;
  start.eval_split = o.eval_split;
  if (from_cache) {
    start_from_level(o, device, &start);
  } else {
    start_from_data(o, shard, device, &start);
  }
  report.train_samples = start.source->size();
  SwappableBatches source(start.prefetched ? start.prefetched.get() : start.source.get());

  ProgressiveOptions po = progressive_options(o, rule, levels_dir, shard, device);
  FreezeSchedule schedule = make_freeze_schedule(rule, o.hyper.epochs, start.model->num_blocks());
  if (dist) {
    schedule = decided_on_rank0(std::move(schedule), *dist);
    po.before_freeze = [dist](const std::vector<torch::Tensor>& state) {
      broadcast_from_rank0(*dist, state);
    };
  }
  ProgressiveFreezer freezer(*start.model, start.frozen, from_cache ? o.cache_dir : "",
                             std::move(schedule), po, source);

  Trainer trainer(split_block_model(*start.model, start.frozen).head, o.hyper);
  std::unique_ptr<DataParallel> dp;  // fit_freezing's, held until the run ends
  fit_freezing(o, dist, trainer, freezer, source, &dp, &report);
  fill_freeze_report(freezer, *start.model, &report);

  BlockStack head = trainer.module();
  if (start.eval_split != kNoEvalSplit) {
    const EvalResult r = evaluate_progressive(o, device, dist, shard, start, freezer.frozen());
    report.test_acc = r.accuracy;
    report.test_samples = r.samples;
  }
  if (dist && dist->rank() != 0) return report;  // rank 0 alone writes
  save_progressive(o, *start.model, freezer, head);
  return report;
}

}  // namespace recycle
