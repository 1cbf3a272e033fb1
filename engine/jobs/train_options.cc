// TrainOptions::flag_values: recycle-train's options as (flag, value), what data-parallel ranks
// compare (its validate() is engine/options/train_validate.cc's). No LibTorch here.
#include <cstdio>
#include <cstdlib>

#include "engine/jobs/train_job.h"

namespace recycle {

namespace {

// The shortest text that reads back as the same double ("0.05", not "0.050000000000000003").
std::string exact_text(double v) {
  char text[32];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, v);
    if (std::strtod(text, nullptr) == v) break;
  }
  return text;
}

std::string yes_no(bool b) { return b ? "yes" : "no"; }

}  // namespace

std::vector<FlagValue> TrainOptions::flag_values() const {
  const TrainOptions& o = *this;
  const bool same = true, per_rank = false;
  // What changes the data, the model, the math or the number of steps must agree; paths of the
  // outputs rank 0 alone writes, resources (threads, memory, prefetching) and where a rank
  // finds its inputs may differ (a cache or a dataset may sit elsewhere on each machine: the
  // cache's identity is compared on its own).
  return {
      {"--cache", o.cache_dir, per_rank},
      {"--allow-partial", yes_no(o.allow_partial), per_rank},
      {"--memory-budget", std::to_string(o.memory_budget_mb), per_rank},
      {"--prefetch", std::to_string(o.prefetch), per_rank},
      {"--preload", yes_no(o.preload), per_rank},
      {"--alternate-preload", yes_no(o.alternate_preload), per_rank},  // same batches either way
      {"--data", o.data.spec, per_rank},
      {"--split", o.data.split, same},
      {"--classes", o.data.classes, same},
      {"--limit", std::to_string(o.data.limit), same},
      {"--model", o.model.encoder, same},
      {"--width", std::to_string(o.model.width), same},
      {"--max-tokens", std::to_string(o.model.max_tokens), same},
      {"--weights", o.model.weights, per_rank},  // rank 0's parameters are broadcast
      {"--recycle", exact_text(o.recycle), same},
      {"--split-at", o.split_at, same},
      {"--no-cache", yes_no(o.no_cache), same},
      {"--augment", o.augment, same},
      {"--freeze", o.freeze.enabled() ? o.freeze.spec() : std::string(), same},
      {"--levels", o.levels_dir, per_rank},
      {"--level-codec", codec_name(o.level_codec), same},
      // Rank 0 alone evaluates, except with --sharded, where every rank evaluates its shard.
      {"--eval-split", o.eval_split, o.dist.sharded ? same : per_rank},
      {"--eval-every-epoch", yes_no(o.eval_every_epoch), o.dist.sharded ? same : per_rank},
      {"--sharded", yes_no(o.dist.sharded), same},
      {"--script-head", o.script_head, per_rank},  // its bytes are compared on their own
      {"--epochs", std::to_string(o.hyper.epochs), same},
      {"--batch", std::to_string(o.hyper.batch), same},
      {"--lr", exact_text(o.hyper.lr), same},
      {"--optimizer", optimizer_name(o.hyper.optimizer), same},
      {"--momentum", exact_text(o.hyper.momentum), same},
      {"--weight-decay", exact_text(o.hyper.weight_decay), same},
      {"--schedule", schedule_name(o.hyper.schedule), same},
      {"--seed", std::to_string(o.hyper.seed), same},
      {"--memory-format", memory_format_name(o.hyper.memory_format), same},
      {"--precision", precision_name(o.hyper.precision), same},
      {"--save-head", o.save_head, per_rank},
      {"--save-model", o.save_model, per_rank},
      {"--checkpoint", o.checkpoint, per_rank},  // its bytes are compared on their own
      {"--checkpoint-every", std::to_string(o.checkpoint_every), per_rank},  // rank 0 writes
      {"--threads", std::to_string(o.threads), per_rank},
      {"--device", o.device, per_rank},
      {"--profile", o.profile, per_rank},
      {"--nproc", std::to_string(o.dist.nproc), per_rank},
      {"--rank", std::to_string(o.dist.rank), per_rank},
      {"--world-size", std::to_string(o.dist.world_size), same},
      {"--master", o.dist.master, per_rank},  // one store may have several names
      {"--timeout", std::to_string(o.dist.timeout_seconds), per_rank},
      {"--grad-compression", grad_compression_name(o.dist.grad_compression), same},
      {"--sync", sync_name(o.dist.sync), same},
      {"--bucket-mb", exact_text(o.dist.bucket_mb), same},
      {"--servers", std::to_string(o.dist.servers), same},
      {"--max-staleness", std::to_string(o.dist.max_staleness), same},
      {"--throttle",
       o.dist.throttle_rank < 0
           ? std::string()
           : std::to_string(o.dist.throttle_rank) + ":" + std::to_string(o.dist.throttle_ms),
       per_rank},
  };
}

}  // namespace recycle
