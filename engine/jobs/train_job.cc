// run_train: the job behind recycle-train, in its three modes (cache, full, frozen).
#include "engine/jobs/train_job.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <thread>

#include "base/error_cause.h"
#include "base/strings.h"
#include "cache/activation_store.h"
#include "cache/open_existing.h"
#include "engine/distributed/async_sgd.h"
#include "engine/distributed/data_parallel.h"
#include "engine/distributed/dist_context.h"
#include "engine/distributed/dist_options.h"  // path_for_rank
#include "engine/jobs/checkpoint.h"
#include "engine/jobs/head_file.h"
#include "engine/jobs/train_job_parts.h"
#include "engine/models/block_model.h"
#include "engine/models/device.h"
#include "engine/models/encoder_registry.h"
#include "engine/models/memory_format.h"
#include "engine/models/model_setup.h"
#include "engine/models/preprocess.h"  // kTokenIdsPreprocess
#include "engine/models/split_model.h"
#include "engine/models/tensor_file.h"  // is_torch_archive
#include "engine/models/torchscript_model.h"
#include "engine/models/transformer.h"
#include "engine/models/weights_io.h"
#include "engine/precompute/prefix_identity.h"
#include "engine/train/batch_sources.h"
#include "engine/train/epoch_profiler.h"
#include "engine/train/memory_budget.h"
#include "engine/models/precision.h"
#include "engine/train/prefetch.h"
#include "engine/train/preload.h"
#include "engine/train/text_batches.h"
#include "engine/train/trainer.h"
#include "recycle/errors.h"

namespace recycle {

SplitModel model_of_cache(const Manifest& m, const std::string& cache_dir,
                          const std::string& model_given, BlockModel* model) {
  const int64_t classes = static_cast<int64_t>(m.class_names.size());
  const bool file_model = [&] {
    try {
      return encoder_info(EncoderSpec::parse(m.model).name).takes_file;
    } catch (const std::invalid_argument&) {
      return false;  // make_encoder says what is wrong with the spec
    }
  }();
  if (!model_given.empty() && !file_model) {
    throw InvalidArgument("--model does not apply with --cache " + cache_dir + ", whose model (" +
                          m.model + ") is the engine's own (the cache fixes the model)");
  }
  const std::string spec = spec_with_given_file(m.model, model_given, "cache " + cache_dir);
  try {
    *model = make_encoder(spec, classes);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("cache " + cache_dir + " was built for a model this version does "
                             "not know: " + e.what() + " (for a cache of a Python prefix, give "
                             "the head as TorchScript: --script-head FILE)");
  }
  model->class_names = m.class_names;
  // A scripted model keeps its own classifier when the class counts match; the build stored a
  // new linear one when its classes differed from the weights' (as prepare_model made it).
  if (m.classifier == kClassifierNew && model->classifier->is_own()) {
    model->reset_classifier(classes);
  }
  SplitModel split = split_block_model(*model, m.prefix_blocks);
  if (spec != m.model) {  // a model from the user's file: its prefix must be the cache's
    CacheIdentity have = m.identity();
    set_prefix_identity(*model, split, &have);
    const auto diffs = m.identity().identity_differences(have);
    if (!diffs.empty()) {
      throw StaleCacheError(mismatch_message(cache_dir, diffs,
                                             "give --model the file it was built from"));
    }
  }
  return split;
}

SplitModel head_from_cache(const ActivationStore& store, const Manifest& m, uint64_t seed,
                           const torch::Device& device, BlockModel* model,
                           const std::string& model_given) {
  SplitModel split = model_of_cache(m, store.dir(), model_given, model);
  std::string head_bytes;
  store.get_blob("head", &head_bytes).throw_if_error();
  if (is_torch_archive(head_bytes)) {  // loading it would run any code it holds
    throw std::runtime_error("cache " + store.dir() + " stores its head in the format of an older "
                             "recycle (a TorchScript archive, whose loading runs any code it "
                             "holds): if you trust the cache, convert it once with "
                             "recycle-inspect --cache " + store.dir() + " --convert-old-head");
  }
  module_from_bytes(*split.head, head_bytes, "cache " + store.dir() + "'s stored head");
  if (m.classifier == kClassifierNew) {
    torch::manual_seed(seed);
    model->classifier->reset_parameters();
  }
  split.head->to(device);
  return split;
}

namespace {

// The module's parameters and buffers, copied (a snapshot), and put back.
std::vector<torch::Tensor> copy_state(BlockStack& module) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> state;
  for (const torch::Tensor& t : module->parameters()) state.push_back(t.detach().clone());
  for (const torch::Tensor& t : module->buffers()) state.push_back(t.detach().clone());
  return state;
}

void restore_state(BlockStack& module, const std::vector<torch::Tensor>& state) {
  torch::NoGradGuard no_grad;
  size_t i = 0;
  for (torch::Tensor& t : module->parameters()) t.detach().copy_(state.at(i++));
  for (torch::Tensor& t : module->buffers()) t.detach().copy_(state.at(i++));
}

// The trainer's hooks that change no figure: the alternating source's switch at each epoch's
// start, --profile's epoch (rank 0), and --throttle's pause on its rank.
void add_side_hooks(Trainer& trainer, const TrainOptions& o, DistContext* dist,
                    AlternatingBatches* alternating) {
  if (alternating) {
    trainer.add_epoch_start_hook(
        [alternating](Trainer&, int64_t epoch) { alternating->select(epoch); });
  }
  if (!o.profile.empty() && (!dist || dist->rank() == 0)) {
    profile_epoch(trainer, o.profile, epoch_to_profile(o.hyper.epochs));
  }
  if (dist && o.dist.throttle_rank == dist->rank()) {
    // A straggler on purpose (--throttle RANK:MS): it sleeps before its gradients leave.
    const auto pause = std::chrono::milliseconds(o.dist.throttle_ms);
    trainer.add_after_backward_hook(
        [pause](Trainer&, int64_t) { std::this_thread::sleep_for(pause); });
  }
}

// The test accuracy of `head` with each of `snapshots` (copy_state) in turn, onto
// report->epoch_test_acc; `head` gets its own state back.
void evaluate_snapshots(BlockStack& head, const std::vector<std::vector<torch::Tensor>>& snapshots,
                        const std::function<double()>& evaluate, TrainReport* report) {
  const std::vector<torch::Tensor> last = copy_state(head);
  for (const auto& s : snapshots) {
    restore_state(head, s);
    report->epoch_test_acc.push_back(evaluate());
  }
  restore_state(head, last);
}

// The order of each epoch on this rank: alone, the rank's share of the split, a shard (every
// rank's even_share of its shard's order: a shared cache's steps), or the one-process order (async
// workers take chunks of it as they are dealt).
Sampler epoch_sampler(const BatchSource& train, const TrainOptions& o, DistContext* dist,
                      bool async, int64_t draws) {
  const bool shared = dist && !async && !o.dist.sharded;
  Sampler sampler(train.size(), /*shuffle=*/true, o.hyper.seed, shared ? dist->rank() : 0,
                  shared ? dist->world() : 1);
  if (dist && o.dist.sharded) sampler.set_epoch_samples(even_share(*dist, train.size()));
  sampler.set_draws(draws);
  return sampler;
}

// Trains `head` on `train` for hyper.epochs epochs: alone, or as one rank of `dist` (its share
// of each epoch's order, gradients or parameters averaged with the others). `alternating`, when
// given, is `train` and switches source as each epoch starts.
// `draws`: the views each sample is drawn from (Sampler::set_draws; 0: none).
// `evaluate`, when given (rank 0 with --eval-every-epoch), gives the test accuracy after each
// epoch but the last (report->epoch_test_acc; the caller adds the last).
// `checkpoint`, when given: every rank resumes from rank 0's file when there is one, and rank 0
// writes it after every epoch (under async, when it sees the epoch complete: the servers'
// parameters, whose optimizer state starts over in a resumed run), and with
// --checkpoint-every N after every N-th step (but an epoch's last: the epoch's end writes).
void fit_head(BlockStack& head, BatchSource& train, const TrainOptions& o, DistContext* dist,
              TrainReport* report, AlternatingBatches* alternating = nullptr,
              int64_t draws = 0, const std::function<double()>& evaluate = {},
              const CheckpointPlan* checkpoint = nullptr) {
  Trainer trainer(head, o.hyper);
  const EpochPosition from =
      checkpoint ? resume_from_checkpoint(*checkpoint, dist, head, trainer, report)
                 : EpochPosition{};
  const CheckpointWrite write_checkpoint =
      checkpoint ? checkpoint_writer(*checkpoint, head, trainer) : CheckpointWrite{};
  // Registered last, after the evaluation's: the epoch's final parameters and optimizer state.
  auto checkpoint_epochs = [&] {
    if (checkpoint && (!dist || dist->rank() == 0)) {
      add_checkpoint_hooks(trainer, o.checkpoint_every, write_checkpoint);
    }
  };
  // Registered last (after DataParallel's hooks): it sees the epoch's final parameters.
  auto evaluate_epochs = [&] {
    if (!evaluate) return;
    trainer.add_epoch_end_hook([&](Trainer&, int64_t epoch) {
      if (epoch + 1 < o.hyper.epochs) report->epoch_test_acc.push_back(evaluate());
    });
  };
  add_side_hooks(trainer, o, dist, alternating);
  const bool async = dist && o.dist.sync.kind == Sync::Kind::kAsync;
  Sampler sampler = epoch_sampler(train, o, dist, async, draws);
  if (async) {
    try {
      // The other workers train on while rank 0 would evaluate: it keeps a copy of the head as
      // each epoch completes instead, and evaluates the copies when training is over.
      // A checkpoint is written then too: the servers' parameters, the epochs done.
      std::vector<std::vector<torch::Tensor>> snapshots;
      const std::function<void(int64_t)> epoch_done = [&](int64_t epoch) {
        if (evaluate && epoch + 1 < o.hyper.epochs) snapshots.push_back(copy_state(head));
        if (checkpoint) write_checkpoint(epochs_done(epoch + 1));
      };
      const AsyncReport a = train_async(*dist, trainer, train, sampler, o.progress,
                                        evaluate || checkpoint ? epoch_done : nullptr,
                                        from.epoch);
      if (!snapshots.empty()) evaluate_snapshots(head, snapshots, evaluate, report);
      fill_report(report, a.epochs);
      fill_async_report(report, *dist, o, a);
    } catch (const CommFailure& e) {
      throw std::runtime_error(dist->explain_failure(e.what()));
    }
    return;
  }
  if (!dist) {
    evaluate_epochs();
    checkpoint_epochs();
    fill_report(report, trainer.fit(train, sampler, o.progress, from));
    report->steps =
        report->epochs * ((sampler.samples_per_rank() + o.hyper.batch - 1) / o.hyper.batch) -
        report->resumed_batches;
    return;
  }
  // A failure of the group is explained by naming the rank that was lost; a failure of this
  // rank's own (a corrupt record, a loss that is not finite) speaks for itself.
  try {
    DataParallel dp(*dist, trainer);
    evaluate_epochs();
    checkpoint_epochs();
    fill_report(report, trainer.fit(train, sampler, o.progress, from));
    dp.finish();
    fill_dist_report(report, *dist, o, dp.stats());
  } catch (const CommFailure& e) {
    throw std::runtime_error(dist->explain_failure(e.what()));
  }
}

// What every rank of a job must agree on about the cache it trains from: the whole identity
// (its digest: model, weights, split point, keyer, codec, preprocessing, input shape, record
// layout), named for a reader by its model and split point, and the split's size (not its data
// string: the ranks of several machines may have built their copies from other paths).
// A shard counts as its whole split: its size and the rule that made the shards.
std::string cache_identity(const Manifest& m, const std::string& split) {
  const auto it = m.splits.find(split);
  const SplitShard shard = it == m.splits.end() ? SplitShard() : it->second.shard;
  const int64_t samples = it == m.splits.end() ? 0
                          : shard.sharded()    ? shard.split_samples
                                               : it->second.samples;
  return "identity " + m.identity().digest() + " (model " + m.model + " split at " + m.split_at +
         "), " + std::to_string(samples) + " samples of '" + split + "'" +
         (shard.sharded() ? " in " + std::to_string(shard.count) + " shards" : std::string());
}

// What every rank must agree on about a split's data: its data description without the source's
// path ("fashion-mnist split=train classes=5-9 limit=500": the ranks of several machines may
// have their data elsewhere), the class names, the views, and the whole split's size (a shard
// counts as its split).
std::string split_data_words(const Manifest& m, const std::string& split) {
  const auto it = m.splits.find(split);
  if (it == m.splits.end()) return "no split '" + split + "'";
  const SplitInfo& s = it->second;
  const size_t space = s.data.find(' ');
  const std::string source = s.data.substr(0, std::min(space, s.data.find(':')));
  const std::string rest = space == std::string::npos ? "" : s.data.substr(space);
  return "'" + source + rest + "', " + std::to_string(s.shard.sharded() ? s.shard.split_samples
                                                                        : s.samples) +
         " samples, classes " + join(m.class_names, ",") +
         (s.views > 0 ? ", " + std::to_string(s.views) + " views of " + s.augment : "");
}

// With --weights (and optionally --recycle or --split-at) beside --cache: refuses a cache that
// was not built from those weights at that split point.
void check_cache_identity(const TrainOptions& o, const Manifest& m) {
  if (o.model.weights.empty()) return;  // validate() refused --recycle/--split-at without them
  BlockModel model = load_block_model(o.model.weights, o.model.encoder);
  const int64_t blocks = o.recycle >= 0          ? prefix_blocks_for_ratio(model, o.recycle)
                         : !o.split_at.empty() ? prefix_blocks_for_name(model, o.split_at)
                                               : m.prefix_blocks;
  const SplitModel split = split_block_model(model, blocks);
  CacheIdentity want = m.identity();
  set_prefix_identity(model, split, &want);
  const auto diffs = m.identity().identity_differences(want);
  if (!diffs.empty()) {
    throw StaleCacheError(mismatch_message(
        o.cache_dir, diffs,
        "give the --weights it was built from, or rebuild it with recycle-build --rebuild"));
  }
}

// The shapes of a batch's inputs: "2x4x6x6" for one, "hidden 2x24x384, mask 2x24" for several.
std::string inputs_string(const Batch& b) {
  if (b.inputs.size() == 1) return shape_string(b.features().sizes().vec());
  std::vector<std::string> parts;
  for (const auto& [name, t] : b.inputs) {
    parts.push_back(name + " " + shape_string(t.sizes().vec()));
  }
  return "(" + join(parts, ", ") + ")";
}

// Refuses, with one line, a --script-head that does not take the cache's records (one tensor,
// or a record's several as its forward's arguments in the layout's order) to [N, classes]
// logits: it runs on the first two samples of `split`, in eval mode.
void check_script_head(BlockStack& head, const ActivationStore& store, const Manifest& m,
                       const std::string& split, const torch::Device& device,
                       const std::string& file) {
  CachedBatches probe(store, m, split, device);
  if (probe.size() == 0) return;  // nothing to train on: said later
  const std::vector<int64_t> first = {0, std::min<int64_t>(1, probe.size() - 1)};
  probe.plan(first, 2);
  Batch b;
  probe.load(first.data(), 2, &b);
  const int64_t classes = static_cast<int64_t>(m.class_names.size());
  torch::Tensor logits;
  try {
    torch::NoGradGuard no_grad;
    head->eval();
    logits = head->forward_all(b.tensors());
    head->train();
  } catch (const std::exception& e) {
    throw std::invalid_argument("--script-head " + file + " does not run on the cache's " +
                                "activations " + inputs_string(b) + ": " + error_cause(e.what()));
  }
  if (!logits.is_floating_point()) {  // the loss would fail with "does not require grad"
    const std::string dtype = c10::toString(logits.scalar_type());  // "Long"
    const std::string as_python = dtype == "Long" ? "int64" : dtype == "Int" ? "int32"
                                : dtype == "Bool" ? "bool" : dtype == "Byte" ? "uint8" : dtype;
    throw std::invalid_argument("--script-head " + file + " returns " + as_python +
                                " from the cache's activations " + inputs_string(b) +
                                ": it must return floating-point logits (N x classes)");
  }
  if (logits.dim() != 2 || logits.size(0) != 2 || logits.size(1) != classes) {
    throw std::invalid_argument("--script-head " + file + " maps the cache's activations " +
                                inputs_string(b) + " to " + shape_string(logits.sizes().vec()) +
                                ", not to 2x" + std::to_string(classes) + " (the cache's classes)");
  }
}

// The cache a head trains from: its manifest, its store and the split evaluated on (kNoEvalSplit:
// none). Filled in place: the store is opened again, into the same manifest, once the memory
// is planned.
struct TrainCache {
  Manifest m;
  std::unique_ptr<ActivationStore> store;
  std::string eval_split;
};

// Opens --cache and checks it: the identity --weights asks for, a split to train on and one
// to evaluate on (data-parallel: the same on every rank). Without --eval-split, 'test' is
// evaluated on, or nothing when the cache has none (a note says so).
void open_train_cache(const TrainOptions& o, DistContext* dist, TrainCache* c,
                      TrainReport* report) {
  const Manifest& m = c->m;
  c->store = open_cache_for_read(o.cache_dir, &c->m);
  check_cache_identity(o, m);
  // A Python prefix's cache (recycle.build) holds no engine model: its ratio is unknown, not 0.
  report->recycle = m.total_blocks > 0 ? m.recycle_ratio() : -1.0;

  auto split_info = [&](const std::string& split) -> const SplitInfo& {
    return require_split(*c->store, m, split, o.allow_partial, "--allow-partial");
  };
  split_info(o.data.split);
  check_split_shard(o, dist, m, o.data.split);
  if (dist) {
    dist->check_same("cache identity", cache_identity(m, o.data.split));
    dist->check_same("data of split '" + o.data.split + "'", split_data_words(m, o.data.split));
  }
  std::string& eval_split = c->eval_split;
  eval_split = o.eval_split;
  if (eval_split.empty()) {
    eval_split = m.splits.count("test") ? "test" : kNoEvalSplit;
    if (eval_split == kNoEvalSplit) {
      report->notes.push_back("cache " + o.cache_dir + " has no split 'test', so nothing is "
                              "evaluated (build one with recycle-build --split test, or pass "
                              "--eval-split none)");
    }
  }
  if (eval_split != kNoEvalSplit) {
    split_info(eval_split);
    check_split_shard(o, dist, m, eval_split);
    if (dist) dist->check_same("data of split '" + eval_split + "'", split_data_words(m, eval_split));
  }
}

// The block cache is what the budget leaves after the batches, the preloaded split and the
// index, which the manifest and the open store size: the store is opened again with it.
void plan_memory_and_reopen(const TrainOptions& o, TrainCache* c, TrainReport* report) {
  const Manifest& m = c->m;
  const std::string& eval_split = c->eval_split;
  MemoryNeeds needs;
  needs.sample_bytes = decoded_sample_bytes(m.layout());
  needs.batch = o.hyper.batch;
  needs.prefetch_depth = o.preload ? 0 : prefetch_depth(o.prefetch);
  needs.preload_samples =
      o.preload || o.alternate_preload ? m.splits.at(o.data.split).samples : 0;
  // The evaluation's batches hold at most the split's samples.
  needs.eval_batch = eval_split != kNoEvalSplit ? std::min(o.hyper.eval_batch(),
                                                     m.splits.at(eval_split).samples)
                                          : 0;
  int64_t indexed = m.splits.at(o.data.split).samples;
  if (eval_split != kNoEvalSplit) indexed += m.splits.at(eval_split).samples;
  needs.index_bytes = indexed * kIndexBytesPerSample +
                      static_cast<int64_t>(c->store->table_readers_bytes());
  report->memory = plan_memory(o.memory_budget_mb << 20, needs);
  c->store.reset();
  c->store = open_cache_for_read(o.cache_dir, &c->m,
                                 static_cast<size_t>(report->memory.block_cache_bytes));
}

// The head: the --script-head file's module, or the blocks after the split point and the
// classifier (of *model), initialised as the build stored them (a classifier new to these
// classes drawn from the seed).
BlockStack make_cache_head(const TrainOptions& o, const torch::Device& device, DistContext* dist,
                           const TrainCache& c, bool script, BlockModel* model) {
  if (!script && c.m.preprocess == kTokenIdsPreprocess) {
    throw std::invalid_argument("cache " + o.cache_dir + " holds the hidden states of token ids "
                                "(a pt2 text prefix's): recycle-train's heads do not take them; "
                                "train its head in Python (recycle.CachedLoader and "
                                "recycle.hf.split's head, docs/pytorch2.md) or give --script-head");
  }
  if (script) {
    std::string digest;
    BlockStack head = load_script_head(o.script_head, &digest);
    if (dist) dist->check_same("--script-head file (xxh3)", digest);
    head->to(device);
    check_script_head(head, *c.store, c.m, o.data.split, device, o.script_head);
    return head;
  }
  return head_from_cache(*c.store, c.m, o.hyper.seed, device, model, o.model.encoder).head;
}

// Refuses --preload and --alternate-preload where the split's records are not one per sample
// of one shape. Returns the split's views.
int64_t check_preload(const TrainOptions& o, const Manifest& m, bool text) {
  // A text cache (the engine's, or records as long as the text that recycle.build wrote).
  bool varies = text;
  for (const TensorLayout& t : m.layout()) {
    varies = varies || std::count(t.shape.begin(), t.shape.end(), kVariableDim) > 0;
  }
  if (varies && (o.preload || o.alternate_preload)) {
    throw std::invalid_argument(std::string(o.preload ? "--preload" : "--alternate-preload") +
                                " needs records of one shape; this cache's vary in length "
                                "(use --prefetch)");
  }
  // A split of K augmented views: each epoch reads one view of every sample (K epochs, each
  // view once).
  const int64_t views = m.splits.at(o.data.split).views;
  if (views > 0 && (o.preload || o.alternate_preload)) {
    throw std::invalid_argument(std::string(o.preload ? "--preload" : "--alternate-preload") +
                                " holds one record per sample; split '" + o.data.split +
                                "' has " + std::to_string(views) +
                                " views of each (use --prefetch)");
  }
  return views;
}

// Rank 0's evaluation split: its batches, and for a text head those packed into features.
struct CacheEval {
  std::unique_ptr<CachedBatches> batches;
  std::unique_ptr<TextFeatureBatches> text;  // reads `batches`, so declared after (gone first)

  void open(const TrainCache& c, const torch::Device& device, bool text_head) {
    batches = std::make_unique<CachedBatches>(*c.store, c.m, c.eval_split, device);
    batches->set_load_threads(at::get_num_threads());
    if (text_head) text = std::make_unique<TextFeatureBatches>(*batches);
  }
  BatchSource& source() { return text ? static_cast<BatchSource&>(*text) : *batches; }
};

// fit_head on one source (`alternating`: the same source, when it alternates).
using FitOn = std::function<void(BatchSource& source, AlternatingBatches* alternating)>;

// Trains through `fit` on the training split as the options read it: preloaded, alternating
// between the cache and a preloaded copy, loaded ahead, or read a batch at a time.
void fit_training_split(const TrainOptions& o, const torch::Device& device, const TrainCache& c,
                        const FitOn& fit, TrainReport* report) {
  // Image features decoded straight into the layout the head trains in. Its batches are
  // gone before the evaluation's, as the budget plans.
  CachedBatches cached(*c.store, c.m, o.data.split, device, to_c10(o.hyper.memory_format));
  report->train_samples = cached.size();
  if (o.preload) {
    cached.set_load_threads(at::get_num_threads());
    PreloadedBatches train(cached);
    fit(train, nullptr);
  } else if (o.alternate_preload) {
    cached.set_load_threads(at::get_num_threads());
    PreloadedBatches preloaded(cached);
    cached.set_load_threads(1);  // as load_ahead expects it (a background loader's)
    const auto ahead = load_ahead(cached, o.prefetch);
    AlternatingBatches train(ahead ? static_cast<BatchSource&>(*ahead) : cached, preloaded);
    fit(train, &train);
    for (bool second : train.selected()) {
      report->epoch_sources.push_back(second ? "preloaded" : "cache");
    }
  } else if (auto ahead = load_ahead(cached, o.prefetch)) {
    fit(*ahead, nullptr);
  } else {
    fit(cached, nullptr);
  }
}

// --save-head: a script head as TorchScript, else with the cache's identity.
void save_cache_head(const TrainOptions& o, BlockStack& head, bool script, const Manifest& m) {
  if (!o.save_head.empty()) {
    if (script) {
      save_script_head(head, o.save_head);
    } else {
      save_head(head, head_identity_of_cache(m), o.save_head);
    }
  }
}

TrainReport train_from_cache(const TrainOptions& o, const torch::Device& device,
                             DistContext* dist) {
  TrainReport report;
  report.mode = "cache";
  TrainCache c;
  open_train_cache(o, dist, &c, &report);
  plan_memory_and_reopen(o, &c, &report);

  BlockModel model;
  const bool script = !o.script_head.empty();
  BlockStack head = make_cache_head(o, device, dist, c, script, &model);
  // A text cache's records are hidden states and lengths: its batches are packed into the
  // features a text head takes (text_batches.h). A script head takes the tensors of its
  // records as they are (check_script_head).
  const bool text =
      !script && encoder_info(resolve_encoder_spec(c.m.model).name).input == EncoderInput::kText;
  const int64_t views = check_preload(o, c.m, text);
  report.views = views;
  // Rank 0 evaluates, or with --sharded every rank its own shard and the counts are summed:
  // when training ends, and after every epoch with --eval-every-epoch.
  const bool every_shard = dist && o.dist.sharded;
  CacheEval eval;
  if ((!dist || dist->rank() == 0 || every_shard) && c.eval_split != kNoEvalSplit) {
    eval.open(c, device, text);
  }
  auto evaluate = [&] {
    const EvalResult own = evaluate_module(head, eval.source(), o.hyper.eval_batch());
    return every_shard ? evaluation_of_every_shard(*dist, own) : own;
  };
  std::function<double()> each_epoch;
  if (eval.batches && o.eval_every_epoch) each_epoch = [&] { return evaluate().accuracy; };
  const CheckpointPlan plan{o.checkpoint, checkpoint_job(o, dist ? dist->world() : 1), &c.m};
  const CheckpointPlan* checkpoint = o.checkpoint.empty() ? nullptr : &plan;
  auto fit = [&](BatchSource& source, AlternatingBatches* alternating) {
    if (!text) {
      return fit_head(head, source, o, dist, &report, alternating, views, each_epoch, checkpoint);
    }
    TextFeatureBatches features(source);
    fit_head(head, features, o, dist, &report, nullptr, 0, each_epoch, checkpoint);
  };
  fit_training_split(o, device, c, fit, &report);
  if (every_shard) report.train_samples = c.m.splits.at(o.data.split).shard.split_samples;
  report.block_cache_used = static_cast<int64_t>(c.store->block_cache_usage());
  // Rank 0 alone evaluates (with --sharded every rank takes part) and writes.
  if (dist && dist->rank() != 0 && !every_shard) return report;
  if (eval.batches) {
    const EvalResult r = evaluate();
    report.test_acc = r.accuracy;
    report.test_samples = r.samples;
    if (each_epoch) report.epoch_test_acc.push_back(r.accuracy);
  }
  if (dist && dist->rank() != 0) return report;
  save_cache_head(o, head, script, c.m);
  return report;
}

TrainReport train_from_data(const TrainOptions& o, const torch::Device& device, DistContext* dist) {
  TrainReport report;
  const DatasetOptions data_options = with_encoder_input(o.data, o.model);
  const Dataset data = load_dataset(data_options);
  if (data.token_ids) {
    throw std::invalid_argument(o.data.spec + " holds token ids: build their cache with "
                                "recycle-build and train its head in Python (docs/pytorch2.md)");
  }
  ModelOptions mo = o.model;
  mo.seed = o.hyper.seed;
  PreparedModel pm = prepare_model(mo, data, o.recycle, o.split_at, device);
  report.recycle = static_cast<double>(pm.split.prefix_blocks) / pm.split.total_blocks;
  report.mode = pm.split.prefix_blocks == 0 ? "full" : "frozen";
  if (pm.split.prefix_blocks > 0 && !o.no_cache) {
    throw std::invalid_argument("--recycle " + std::to_string(o.recycle) +
                                " without a cache needs --no-cache (or build a cache with "
                                "recycle-build and train with --cache)");
  }
  const std::string eval_split = o.eval_split.empty() ? "test" : o.eval_split;  // not data.split

  // Text is tokenized (and cut to the model's max_tokens) a batch at a time.
  auto raw_batches = [&](const Dataset& d) -> std::unique_ptr<BatchSource> {
    if (!d.is_text) return std::make_unique<RawBatches>(d, pm.split.prefix, device);
    if (!o.augment.empty()) {
      throw std::invalid_argument("--augment applies to images; the data holds text");
    }
    return std::make_unique<RawTextBatches>(d, pm.split.prefix,
                                            transformer_max_tokens(pm.model.spec), device);
  };
  // Online augmentation: every epoch a new random view of every sample (draws = epochs).
  std::unique_ptr<BatchSource> train;
  if (o.augment.empty() || data.is_text) {
    train = raw_batches(data);
  } else {
    Augment augment = Augment::parse(o.augment);
    if (data.item_shape.size() == 3) augment.check_image(data.item_shape[1], data.item_shape[2]);
    train = std::make_unique<RawBatches>(data, pm.split.prefix, device, std::move(augment),
                                         o.hyper.seed);
  }
  report.train_samples = train->size();
  // Rank 0 evaluates: when training ends, and after every epoch with --eval-every-epoch.
  Dataset eval_data;
  std::unique_ptr<BatchSource> eval;
  if ((!dist || dist->rank() == 0) && eval_split != kNoEvalSplit) {
    DatasetOptions eo = data_options;
    eo.split = eval_split;
    eo.limit = 0;
    eval_data = load_dataset(eo);
    adopt_class_names(&eval_data, data.class_names, eval_split, "split " + o.data.split);
    eval = raw_batches(eval_data);
  }
  std::function<double()> each_epoch;
  if (eval && o.eval_every_epoch) {
    each_epoch = [&] {
      return evaluate_module(pm.split.head, *eval, o.hyper.eval_batch()).accuracy;
    };
  }
  fit_head(pm.split.head, *train, o, dist, &report, nullptr,
           o.augment.empty() ? 0 : o.hyper.epochs, each_epoch);
  if (dist && dist->rank() != 0) return report;  // rank 0 alone evaluates and writes
  if (eval) {
    const EvalResult r = evaluate_module(pm.split.head, *eval, o.hyper.eval_batch());
    report.test_acc = r.accuracy;
    report.test_samples = r.samples;
    if (each_epoch) report.epoch_test_acc.push_back(r.accuracy);
  }
  if (!o.save_model.empty()) save_block_model(pm.model, o.save_model);
  if (!o.save_head.empty()) {
    save_head(pm.split.head, head_identity_of_model(pm.model, pm.split), o.save_head);
  }
  return report;
}

}  // namespace

TrainReport run_train(const TrainOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  o.validate();
  set_thread_count(o.threads);
  const torch::Device device = usable_device(o.device);
  const bool from_cache = !o.cache_dir.empty();
  const bool bf16 = o.hyper.precision == Precision::kBf16;
  // A data-parallel job: join it (every rank waits here for the others, and they stop here when
  // their options that must agree differ).
  std::unique_ptr<DistContext> dist;
  if (o.dist.distributed()) {
    dist = std::make_unique<DistContext>(o.dist, o.flag_values(), /*gpu=*/device.is_cuda());
  }
  // --sharded: this rank's own cache ("{rank}" in --cache names it on a machine of several).
  TrainOptions own = o;
  if (o.dist.sharded) own.cache_dir = path_for_rank(o.cache_dir, o.dist.rank);
  TrainReport report = o.freeze.enabled() ? train_progressive(own, device, dist.get())
                       : from_cache       ? train_from_cache(own, device, dist.get())
                                          : train_from_data(own, device, dist.get());
  report.precision = precision_name(o.hyper.precision);
  if (bf16 && device.is_cpu() && !cpu_has_bf16_instructions()) {
    report.notes.push_back("this CPU has no bf16 instructions (AVX512_BF16): oneDNN emulates "
                           "them, so --precision bf16 trains slower here than fp32");
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace recycle
