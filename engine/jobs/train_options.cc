// TrainOptions::validate: every check of recycle-train's options that needs no data, model or
// cache, each in one place (the command line and run_train both call it). No LibTorch here.
#include <stdexcept>
#include <utility>

#include "engine/jobs/train_job.h"
#include "engine/util/atomic_file.h"
#include "recycle/errors.h"

namespace recycle {

void TrainOptions::validate(const std::set<std::string>& given) const {
  const TrainOptions& o = *this;
  auto gave = [&](const char* flag) { return given.count(flag) > 0; };
  const bool from_cache = !o.cache_dir.empty();
  model.validate();
  hyper.validate();
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
  if (from_cache) {
    // A cache fixes the data, the model and the prefix: options that would change them are
    // refused rather than ignored.
    const bool set[] = {o.model.width > 0, !o.model.encoder.empty(), o.model.max_tokens > 0};
    const char* flags[] = {"--width", "--model", "--max-tokens"};
    for (size_t i = 0; i < 3; ++i) {
      if (set[i] || gave(flags[i])) {
        throw InvalidArgument(std::string(flags[i]) +
                              " does not apply with --cache (the "
                              "cache fixes the data and model; rebuild it to change them)");
      }
    }
  }
  if (o.freeze.empty()) {
    const bool set[] = {!o.levels_dir.empty(),
                        gave("--level-codec") || o.level_codec != Codec::kFp16};
    const char* flags[] = {"--levels", "--level-codec"};
    for (size_t i = 0; i < 2; ++i) {
      if (set[i]) throw InvalidArgument(std::string(flags[i]) + " needs --freeze");
    }
  }
  if (!o.freeze.empty() && (o.dist.nproc > 1 || o.dist.distributed()) && from_cache) {
    throw InvalidArgument(
        "data-parallel --freeze starts on raw data (--data, --recycle 0): "
        "every rank builds the first level of its own shard (starting "
        "from a cache, which would have to be split into shards, is not "
        "built)");
  }
  if (from_cache && (o.data.limit != 0 || !o.data.classes.empty() || o.no_cache)) {
    throw InvalidArgument(
        "--limit, --classes and --no-cache do not apply with --cache (the "
        "cache fixes the data; rebuild it to change them)");
  }
  if (from_cache && !o.data.spec.empty()) {
    throw InvalidArgument("give either --cache or --data, not both");
  }
  if (!from_cache && o.data.spec.empty()) {
    throw InvalidArgument("give --cache DIR (train from a cache) or --data (train from raw data)");
  }
  if (from_cache && !o.save_model.empty()) {
    throw InvalidArgument(
        "--save-model needs raw data: a cache holds no prefix weights "
        "(use --save-head)");
  }
  if (!o.freeze.empty()) {
    // Progressive recycling (progressive_job.cc): the rule's syntax first.
    parse_freeze_rule(o.freeze);
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
  } else if (from_cache && o.model.weights.empty() && (o.recycle >= 0 || !o.split_at.empty())) {
    // With --weights they name the split point the cache is checked against.
    throw InvalidArgument(
        "--recycle/--split-at with --cache need --weights to check "
        "the cache against");
  }
  if (!from_cache) {
    const std::string eval_split = o.eval_split.empty() ? "test" : o.eval_split;
    if (eval_split == o.data.split) {
      throw InvalidArgument("--eval-split names the training split");
    }
  }
  if (!o.freeze.empty() && o.data.spec.rfind("tsv:", 0) == 0) {
    throw InvalidArgument(
        "--freeze does not apply to text data (tsv:): progressive freezing trains image "
        "models only (docs/progressive.md)");
  }
  // Flags of data-parallel training: refused, not ignored, when there is none.
  if (o.dist.nproc <= 1 && !o.dist.distributed()) {
    const bool set[] = {gave("--grad-compression") || o.dist.grad_compression != GradCompression::kNone,
                        gave("--sync") || o.dist.sync != Sync(), gave("--bucket-mb")};
    const char* flags[] = {"--grad-compression", "--sync", "--bucket-mb"};
    for (size_t i = 0; i < 3; ++i) {
      if (set[i]) {
        throw InvalidArgument(std::string(flags[i]) +
                              " applies to data-parallel training only (--nproc N, or "
                              "--world-size W with --rank and --master)");
      }
    }
  }
  // The files rank 0 writes after training, checked before any work (a missing folder would
  // otherwise be found once training is over; --profile checks its file when it starts).
  if (o.dist.rank == 0) {
    const std::pair<const char*, const std::string*> outputs[] = {
        {"--save-head", &o.save_head}, {"--save-model", &o.save_model}};
    for (const auto& [flag, path] : outputs) {
      if (path->empty() && !gave(flag)) continue;
      const std::string problem = output_path_problem(*path);
      if (!problem.empty()) {
        throw InvalidArgument(std::string(flag) + (path->empty() ? "" : " " + *path) + ": " +
                              problem);
      }
    }
  }
}

}  // namespace recycle
