// TrainOptions::validate (include/recycle/options.h): every check of recycle-train's options
// that needs no data, model or cache, each in one place (the command line and run_train both
// call it). Compiled into the jobs/ room (recycle_jobs). No LibTorch here.
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "base/range_check.h"
#include "engine/data/augment.h"
#include "engine/data/data_source.h"  // parse_data_spec
#include "engine/util/atomic_file.h"  // output_path_problem
#include "recycle/errors.h"
#include "recycle/options.h"

namespace recycle {

namespace {

// Whether the user gave a flag on the command line: TrainOptions::validate's `given`, for the
// flags whose value alone does not tell.
struct Gave {
  const std::set<std::string>& given;
  bool operator()(const char* flag) const { return given.count(flag) > 0; }
};

// The checks of TrainOptions::validate, in the order it makes them: the first that fails is
// what the user reads, so a check stays where it is even when its concern comes up again later.

// --memory-budget, --prefetch, --preload and --alternate-preload say how a cache is read.
void check_cache_reading(const TrainOptions& o, const Gave& gave) {
  const bool from_cache = !o.cache_dir.empty();
  if (!from_cache) {
    const bool needs_cache[] = {gave("--memory-budget"), gave("--prefetch") || o.prefetch != -1,
                                o.preload, o.alternate_preload};
    const char* flags[] = {"--memory-budget", "--prefetch", "--preload", "--alternate-preload"};
    for (size_t i = 0; i < 4; ++i) {
      if (needs_cache[i]) throw InvalidArgument(std::string(flags[i]) + " needs --cache");
    }
  }
  if (o.preload && o.alternate_preload) {
    throw InvalidArgument(
        "--preload and --alternate-preload do not go together (the "
        "second preloads the split too, and trains half its epochs "
        "from the cache)");
  }
  if (o.preload && (gave("--prefetch") || o.prefetch != -1)) {
    throw InvalidArgument(
        "--preload and --prefetch do not go together (a preloaded "
        "split has nothing to load ahead)");
  }
}

// A cache fixes the data, the model and the prefix: options that would change the model are
// refused rather than ignored.
void check_cache_fixes_the_model(const TrainOptions& o, const Gave& gave) {
  const bool from_cache = !o.cache_dir.empty();
  if (from_cache) {
    // --model names the file of a cache built from one (torchscript:FILE): the tools open no
    // path a cache names (head_from_cache checks it is the cache's).
    const bool file_model = o.model.encoder.rfind("torchscript:", 0) == 0 ||
                            o.model.encoder.rfind("pt2:", 0) == 0;
    const bool set[] = {o.model.width > 0, !o.model.encoder.empty() && !file_model,
                        o.model.max_tokens > 0};
    const char* flags[] = {"--width", "--model", "--max-tokens"};
    for (size_t i = 0; i < 3; ++i) {
      if (set[i] || (gave(flags[i]) && !(i == 1 && file_model))) {
        throw InvalidArgument(std::string(flags[i]) +
                              " does not apply with --cache (the "
                              "cache fixes the data and model; rebuild it to change them)");
      }
    }
  }
}

// --levels and --level-codec say where and how a freeze schedule's levels are written.
void check_freeze_flags_need_freeze(const TrainOptions& o, const Gave& gave) {
  if (!o.freeze.enabled()) {
    const bool set[] = {!o.levels_dir.empty(),
                        gave("--level-codec") || o.level_codec != Codec::kFp16};
    const char* flags[] = {"--levels", "--level-codec"};
    for (size_t i = 0; i < 2; ++i) {
      if (set[i]) throw InvalidArgument(std::string(flags[i]) + " needs --freeze");
    }
  }
}

// Data-parallel progressive recycling shards the raw data: a cache is not split into shards.
void check_data_parallel_freeze(const TrainOptions& o) {
  const bool from_cache = !o.cache_dir.empty();
  if (o.freeze.enabled() && (o.dist.nproc > 1 || o.dist.distributed()) && from_cache) {
    throw InvalidArgument(
        "data-parallel --freeze starts on raw data (--data, --recycle 0): "
        "every rank builds the first level of its own shard (starting "
        "from a cache, which would have to be split into shards, is not "
        "built)");
  }
}

// The options that select the samples are the cache's to fix.
void check_cache_fixes_the_data(const TrainOptions& o) {
  const bool from_cache = !o.cache_dir.empty();
  if (from_cache && (o.data.limit != 0 || !o.data.classes.empty() || o.no_cache)) {
    throw InvalidArgument(
        "--limit, --classes and --no-cache do not apply with --cache (the "
        "cache fixes the data; rebuild it to change them)");
  }
}

// Online augmentation: raw data only, not with --freeze, and a spec that parses.
void check_augment(const TrainOptions& o) {
  const bool from_cache = !o.cache_dir.empty();
  if (!o.augment.empty()) {
    if (from_cache) {
      throw InvalidArgument(
          "--augment does not apply with --cache: a cache's views are made by recycle-build "
          "--augment SPEC --views K, and training reads one per epoch");
    }
    if (o.freeze.enabled()) throw InvalidArgument("--augment does not go with --freeze");
    Augment::parse(o.augment);  // throws naming the op
  }
}

// The mode: a run trains from a cache or from raw data, exactly one of them.
void check_mode(const TrainOptions& o) {
  const bool from_cache = !o.cache_dir.empty();
  if (from_cache && !o.data.spec.empty()) {
    throw InvalidArgument("give either --cache or --data, not both");
  }
  if (!from_cache && o.data.spec.empty()) {
    throw InvalidArgument("give --cache DIR (train from a cache) or --data (train from raw data)");
  }
}

// The files a run reads or writes its model through, each of one mode: --script-head and
// --checkpoint train a head from a cache, --save-model saves the prefix only raw data has.
void check_model_files(const TrainOptions& o) {
  const bool from_cache = !o.cache_dir.empty();
  if (!o.script_head.empty()) {
    if (!from_cache) {
      throw InvalidArgument("--script-head needs --cache (it trains on cached activations)");
    }
    if (o.freeze.enabled()) throw InvalidArgument("--script-head does not apply to --freeze");
    if (!o.model.weights.empty()) {
      throw InvalidArgument("--script-head does not go with --weights (the head is the script's, "
                            "not the encoder's)");
    }
  }
  if (!o.checkpoint.empty()) {
    if (!from_cache) {
      throw InvalidArgument("--checkpoint needs --cache (it resumes training a head from a cache)");
    }
    if (!o.script_head.empty()) {
      throw InvalidArgument("--checkpoint does not go with --script-head yet");
    }
    if (o.freeze.enabled()) throw InvalidArgument("--checkpoint does not apply to --freeze");
  }
  if (o.checkpoint_every < 0) {
    throw InvalidArgument("--checkpoint-every must be 0 (epoch ends only) or a number of steps, "
                          "not " + std::to_string(o.checkpoint_every));
  }
  if (o.checkpoint_every > 0 && o.checkpoint.empty()) {
    throw InvalidArgument("--checkpoint-every needs --checkpoint FILE (where to write)");
  }
  if (o.checkpoint_every > 0 && o.dist.sync.kind == Sync::Kind::kAsync) {
    throw InvalidArgument("--checkpoint-every does not go with --sync async (its checkpoints "
                          "are written as epochs complete)");
  }
  if (from_cache && !o.save_model.empty()) {
    throw InvalidArgument(
        "--save-model needs raw data: a cache holds no prefix weights "
        "(use --save-head)");
  }
}

// Progressive recycling (progressive_job.cc): the rule's syntax, then what it needs and what
// does not go with it.
void check_freeze_schedule(const TrainOptions& o) {
  const bool from_cache = !o.cache_dir.empty();
  if (o.freeze.enabled()) {
    parse_freeze_rule(o.freeze.spec());  // a rule filled by hand: its values in range
    if (o.levels_dir.empty()) {
      throw InvalidArgument("--freeze needs --levels DIR: the directory its cache levels go to");
    }
    if (o.preload || o.alternate_preload) {
      throw InvalidArgument(std::string(o.preload ? "--preload" : "--alternate-preload") +
                            " does not go with --freeze");
    }
    if (o.no_cache || o.recycle > 0 || !o.split_at.empty()) {
      throw InvalidArgument(
          "--freeze starts with every block trainable on raw data "
          "(--recycle 0) or from a cache (--cache): --recycle R, "
          "--split-at and --no-cache do not apply");
    }
    if (from_cache && !o.model.weights.empty()) {
      throw InvalidArgument(
          "--weights does not apply to --freeze with --cache (the cache "
          "holds the head it starts from)");
    }
  }
}

// From a cache without --freeze (which refuses them), --recycle and --split-at name the split
// point the cache is checked against: they need the --weights it is checked with.
void check_cache_split_point(const TrainOptions& o) {
  const bool from_cache = !o.cache_dir.empty();
  if (!o.freeze.enabled() && from_cache && o.model.weights.empty() &&
      (o.recycle >= 0 || !o.split_at.empty())) {
    throw InvalidArgument(
        "--recycle/--split-at with --cache need --weights to check "
        "the cache against");
  }
}

// The evaluation split: another than the training split, and one at all for --eval-every-epoch.
void check_evaluation(const TrainOptions& o) {
  const bool from_cache = !o.cache_dir.empty();
  if (!from_cache) {
    const std::string eval_split = o.eval_split.empty() ? "test" : o.eval_split;
    if (eval_split == o.data.split) {
      throw InvalidArgument("--eval-split names the training split");
    }
  }
  if (o.eval_every_epoch && o.eval_split == kNoEvalSplit) {
    throw InvalidArgument("--eval-every-epoch needs an evaluation split (not --eval-split none)");
  }
  if (o.eval_every_epoch && o.freeze.enabled()) {
    throw InvalidArgument(
        "--eval-every-epoch does not apply to --freeze yet (progressive recycling evaluates "
        "once, at the end)");
  }
}

// Progressive freezing trains image models only.
void check_freeze_data(const TrainOptions& o) {
  if (!o.freeze.enabled()) return;
  const std::optional<DataSpec> data = parse_data_spec(o.data.spec);
  if (data && data->text) {
    throw InvalidArgument("--freeze does not apply to text data (" + data->kind +
                          ":): progressive freezing trains image models only "
                          "(docs/progressive.md)");
  }
}

// An asynchronous job has no moment at which every rank is at the same epoch.
void check_async(const TrainOptions& o) {
  if (o.dist.sync.kind == Sync::Kind::kAsync) {
    if (o.freeze.enabled()) {
      throw InvalidArgument(
          "--freeze does not apply to --sync async: a freeze point moves when every rank ends "
          "an epoch, and asynchronous workers never meet (use --sync allreduce or average:K)");
    }
    if (o.alternate_preload) {
      throw InvalidArgument(
          "--alternate-preload does not apply to --sync async (epochs overlap on the workers)");
    }
  }
}

// --sharded: every rank trains on its own shard of a cache (recycle-build --sharded).
void check_sharded(const TrainOptions& o) {
  if (!o.dist.sharded) return;
  if (o.cache_dir.empty()) {
    throw InvalidArgument("--sharded trains each rank on its own shard of a cache: give --cache "
                          "DIR (built with recycle-build --sharded)");
  }
  if (o.freeze.enabled()) {
    throw InvalidArgument("--sharded does not apply to --freeze yet (its levels are derived from "
                          "one whole cache)");
  }
  if (o.dist.sync.kind == Sync::Kind::kAsync) {
    throw InvalidArgument("--sharded does not apply to --sync async yet (its workers share one "
                          "order of the whole split; use --sync allreduce or average:K)");
  }
}

// Flags of data-parallel training: refused, not ignored, when there is none.
void check_data_parallel_flags(const TrainOptions& o, const Gave& gave) {
  if (o.dist.nproc <= 1 && !o.dist.distributed()) {
    const bool set[] = {
        gave("--grad-compression") || o.dist.grad_compression != GradCompression::kNone,
        gave("--sync") || o.dist.sync != Sync(), gave("--bucket-mb"),
        gave("--servers") || o.dist.servers != 1,
        gave("--max-staleness") || o.dist.max_staleness != -1, o.dist.throttle_rank >= 0};
    const char* flags[] = {"--grad-compression", "--sync",          "--bucket-mb",
                           "--servers",          "--max-staleness", "--throttle"};
    for (size_t i = 0; i < 6; ++i) {
      if (set[i]) {
        throw InvalidArgument(std::string(flags[i]) +
                              " applies to data-parallel training only (--nproc N, or "
                              "--world-size W with --rank and --master)");
      }
    }
  }
}

// The files rank 0 writes after training, checked before any work (a missing folder would
// otherwise be found once training is over; --profile checks its file when it starts).
void check_output_files(const TrainOptions& o, const Gave& gave) {
  if (o.dist.rank == 0) {
    const std::pair<const char*, const std::string*> outputs[] = {
        {"--save-head", &o.save_head}, {"--save-model", &o.save_model},
        {"--checkpoint", &o.checkpoint}};
    for (const auto& [flag, path] : outputs) {
      if (path->empty() && !gave(flag)) continue;
      // recycle-predict reads a --head named *.pt2 as a compiled head (an AOTInductor package).
      if (path->size() > 4 && path->compare(path->size() - 4, 4, ".pt2") == 0) {
        throw InvalidArgument(std::string(flag) + " " + *path + ": the tools write tensor files, "
                              "and read a .pt2 as an AOTInductor package: give another name "
                              "(compile a head with recycle.export(head, example, FILE, "
                              "cache=DIR))");
      }
      const std::string problem = output_path_problem(*path);
      if (!problem.empty()) {
        throw InvalidArgument(std::string(flag) + (path->empty() ? "" : " " + *path) + ": " +
                              problem);
      }
    }
  }
}

// The bounds of the run's own numbers (the command line declares none: base/range_check.h).
void check_numbers(const TrainOptions& o) {
  if (o.recycle != kNoRecycle) check_range("--recycle", o.recycle, 0.0, 1.0);
  check_range("--memory-budget", o.memory_budget_mb, kMinMemoryBudgetMb, kMaxMemoryBudgetMb);
  if (o.prefetch != -1)
    check_range("--prefetch", o.prefetch, int64_t{0}, kMaxPrefetch);  // -1: auto
  check_range("--threads", o.threads, 0, kMaxThreads);
}

}  // namespace

void TrainOptions::validate(const std::set<std::string>& given) const {
  const Gave gave{given};
  model.validate();
  hyper.validate();
  check_numbers(*this);
  check_cache_reading(*this, gave);
  check_cache_fixes_the_model(*this, gave);
  check_freeze_flags_need_freeze(*this, gave);
  check_data_parallel_freeze(*this);
  check_cache_fixes_the_data(*this);
  check_augment(*this);
  check_mode(*this);
  check_model_files(*this);
  check_freeze_schedule(*this);
  check_cache_split_point(*this);
  check_evaluation(*this);
  check_freeze_data(*this);
  check_async(*this);
  check_sharded(*this);
  check_data_parallel_flags(*this, gave);
  check_output_files(*this, gave);
  // The embedded options' own checks last, in the order the jobs meet them: the command line's
  // launcher and DistContext check dist before any data is read, and load_dataset checks data
  // (which check_mode made sure a run from raw data names).
  dist.validate();
  if (cache_dir.empty()) data.validate();
}

}  // namespace recycle
