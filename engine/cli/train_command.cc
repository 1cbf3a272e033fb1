// recycle-train's command line.
#include <cstdlib>
#include <iostream>
#include <set>
#include <string>

#include "cache/codec.h"
#include "engine/cli/cli_common.h"
#include "engine/cli/commands.h"
#include "engine/distributed/dist_options.h"
#include "engine/jobs/train_job.h"
#include "recycle/options.h"

namespace recycle {

namespace {

// What recycle-train's command line fills: the options, and the flags read as words that become
// options after parsing (once CLI11 has checked them).
struct TrainFlags {
  TrainOptions o;
  bool json = false;
  std::string prefetch = "auto";
  std::string sync;    // parsed (parse_sync) after the command line
  std::string freeze;  // parsed (parse_freeze_rule) after the command line, when given
  std::string throttle;
};

// Where the samples come from: the cache and how it is read, or the raw data and the model.
void add_source_flags(CLI::App& app, TrainFlags* f) {
  TrainOptions* o = &f->o;
  add_cache_flag(app, &o->cache_dir, "activation cache built by recycle-build");
  app.add_flag("--allow-partial", o->allow_partial, "train on a split whose build did not finish");
  app.add_option("--memory-budget", o->memory_budget_mb,
                 "MiB for the data with --cache: the batches held, the --preload split, the "
                 "samples' index and RocksDB's block cache share it (LibTorch and the model "
                 "come on top), " + range_text(kMinMemoryBudgetMb, kMaxMemoryBudgetMb))
      ->capture_default_str();
  // Its bound is TrainOptions::validate()'s; -1, the library's "auto", is typed as auto.
  app.add_option("--prefetch", f->prefetch,
                 "with --cache: batches loaded ahead on a background thread, " +
                     range_text(int64_t{0}, kMaxPrefetch) +
                     " (0: each batch loaded on the training thread, across --threads; auto: 2 "
                     "when the machine has a core beyond --threads, else 0)")
      ->check(CLI::IsMember({"auto"}) | kZeroOrMore)
      ->capture_default_str();
  app.add_flag("--preload", o->preload,
               "with --cache: decode the whole training split into memory first (it must fit "
               "in --memory-budget)");
  app.add_flag("--alternate-preload", o->alternate_preload,
               "with --cache: train epochs 1, 4, 5, 8, 9, ... from the cache and 2, 3, 6, 7, ... "
               "from the split preloaded in memory (the same samples and batches), to time what "
               "reading from the cache costs within one run; the --json report's epoch_sources "
               "names each epoch's");
  add_data_flags(app, &o->data);
  add_model_flags(app, &o->model);
  add_split_flags(app, &o->recycle, &o->split_at);
  app.add_flag("--no-cache", o->no_cache, "with --data and --recycle R: recompute the prefix");
  app.add_option("--augment", o->augment,
                 "with --data: online augmentation, a new random view of every sample in every "
                 "epoch (ops as recycle-build's --augment; docs/augmentation.md)");
  app.add_option("--eval-split", o->eval_split, "split to evaluate on (default: test; none)");
  app.add_flag("--eval-every-epoch", o->eval_every_epoch,
               "evaluate after every epoch, not only at the end (the --json report's "
               "epoch_test_acc; the evaluations are not in epoch_seconds)");
}

// How the head trains: epochs, batches, the optimizer and its schedule, the seed.
void add_hyper_flags(CLI::App& app, TrainOptions* o) {
  // The bounds are TrainHyper::validate()'s.
  app.add_option("--epochs", o->hyper.epochs, range_text(int64_t{1}, kMaxEpochs))
      ->capture_default_str();
  app.add_option("--batch", o->hyper.batch,
                 "samples per step, " + range_text(int64_t{1}, kMaxBatch))
      ->capture_default_str();
  app.add_option("--lr", o->hyper.lr, "peak learning rate, in (0, " + number_text(kMaxLr) + "]")
      ->capture_default_str();
  add_enum_option(app, "--optimizer", &o->hyper.optimizer, optimizer_names(), parse_optimizer,
                  optimizer_name(o->hyper.optimizer));
  app.add_option("--momentum", o->hyper.momentum,
                 "SGD momentum (Nesterov), " + range_text(0.0, kMaxMomentum))
      ->capture_default_str();
  app.add_option("--weight-decay", o->hyper.weight_decay, range_text(0.0, kMaxWeightDecay))
      ->capture_default_str();
  add_enum_option(app, "--schedule", &o->hyper.schedule, schedule_names(), parse_schedule,
                  schedule_name(o->hyper.schedule), "learning-rate schedule");
  add_seed_flag(app, &o->hyper.seed, "shuffling and new-classifier seed");
}

// What the run writes (head, model, checkpoint, profile), and where and in what arithmetic it
// runs.
void add_run_flags(CLI::App& app, TrainOptions* o) {
  app.add_option("--save-head", o->save_head, "write the trained head's weights here");
  app.add_option("--script-head", o->script_head,
                 "with --cache: train this TorchScript module (from the cached activations to "
                 "[N, classes] logits; torch.jit.script(head).save(FILE); a record of several "
                 "tensors gives its forward as many arguments, in the record's order) as the "
                 "head, instead of "
                 "the one the cache stores: for caches of any Python prefix (recycle.build); "
                 "--save-head then writes the trained module as TorchScript");
  app.add_option("--save-model", o->save_model, "raw data only: write the whole model here");
  app.add_option("--checkpoint", o->checkpoint,
                 "with --cache: resume from FILE when it exists (written by the same job), and "
                 "write it after every epoch: the head, its optimizer's state, the epochs done "
                 "(under --sync async the servers' parameters; their optimizer state starts over)");
  app.add_option("--checkpoint-every", o->checkpoint_every,
                 "with --checkpoint: write it every N steps too (0: at epoch ends only); a rerun "
                 "resumes in the middle of the epoch with the batches it had left, in order")
      ->capture_default_str();
  app.add_option("--threads", o->threads,
                 "threads, " + range_text(0, kMaxThreads) + " (0 = every core)")
      ->capture_default_str();
  app.add_option("--device", o->device, "LibTorch device")->capture_default_str();
  add_enum_option(app, "--memory-format", &o->hyper.memory_format, memory_format_names(),
                  parse_memory_format, memory_format_name(o->hyper.memory_format),
                  "layout of the trained module's convolution weights and inputs while it trains");
  add_enum_option(app, "--precision", &o->hyper.precision,
                  {precision_name(Precision::kFp32), precision_name(Precision::kBf16)},
                  parse_precision, precision_name(o->hyper.precision),
                  "arithmetic of the training forward: fp32, or bf16 mixed precision (LibTorch's "
                  "autocast: convolutions and linear layers in bfloat16; weights, gradients, "
                  "optimizer and loss in fp32; faster on CPUs with AVX512_BF16)");
  app.add_option("--profile", o->profile,
                 "write a Chrome trace of the second epoch (LibTorch's autograd profiler) here; "
                 "summarise it with bench/profile_table.py");
}

// Progressive recycling: the freeze schedule and the cache levels it makes.
void add_freeze_flags(CLI::App& app, TrainFlags* f) {
  TrainOptions* o = &f->o;
  app.add_option("--freeze", f->freeze,
                 "progressive recycling: linear:START:LEVEL (Composer's LayerFreezing over blocks: "
                 "none frozen until a fraction START of the epochs, a fraction LEVEL of the "
                 "blocks at the end, linear between) or auto[:THRESHOLD] (the next block freezes "
                 "when the relative change of its gradient norm between epochs is below "
                 "THRESHOLD, default 0.1); with --data --recycle 0 or with --cache; needs "
                 "--levels. With --nproc/--world-size (raw data only) each rank trains on and "
                 "makes the levels of its own shard, and frozen blocks leave the gradient "
                 "buckets");
  app.add_option("--levels", o->levels_dir,
                 "with --freeze: directory of the cache levels it makes (reused by a rerun whose "
                 "frozen weights match)");
  add_enum_option(app, "--level-codec", &o->level_codec, codec_names(), parse_codec,
                  codec_name(o->level_codec),
                  "with --freeze from raw data: codec of the first level (derived levels keep "
                  "their base's codec)");
}

// Data-parallel training: the ranks, and how gradients and parameters travel between them.
void add_data_parallel_flags(CLI::App& app, TrainFlags* f) {
  TrainOptions* o = &f->o;
  add_dist_flags(app, &o->dist);
  app.add_flag("--sharded", o->dist.sharded,
               "every rank trains on its own shard of the cache (recycle-build --sharded) in its "
               "own --cache, evaluation summed over the shards (with --nproc put {rank} in "
               "--cache); docs/scale.md");
  add_enum_option(app, "--grad-compression", &o->dist.grad_compression, grad_compression_names(),
                  parse_grad_compression, grad_compression_name(o->dist.grad_compression),
                  "how gradients travel between ranks: none (fp32), fp16, topk (AdaComp)");
  f->sync = sync_name(o->dist.sync);
  app.add_option("--sync", f->sync,
                 "allreduce (average gradients every step), average:K (average parameters "
                 "every K local steps) or async[:PUSH[:FETCH]] (Downpour SGD: push gradients to "
                 "a parameter server every PUSH steps, fetch parameters every FETCH steps)")
      ->capture_default_str();
  app.add_option("--bucket-mb", o->dist.bucket_mb,
                 "gradient bucket cap in MiB, in (0, " + number_text(kMaxBucketMb) + "]")
      ->capture_default_str();
  app.add_option("--servers", o->dist.servers,
                 "with --sync async: ranks 0..S-1 serve the parameters, by bucket (S in " +
                     range_text(1, kMaxServers) + ", at most the ranks)")
      ->capture_default_str();
  app.add_option("--max-staleness", o->dist.max_staleness,
                 "with --sync async: a worker more than K server versions behind fetches before "
                 "it goes on (-1: no bound)")
      ->capture_default_str();
  app.add_option("--throttle", f->throttle,
                 "RANK:MS: rank RANK sleeps MS ms every step, MS in " +
                     range_text(1, kMaxThrottleMs) + " (for measuring stragglers)");
}

// Every flag, in the order --help lists them.
void add_train_flags(CLI::App& app, TrainFlags* f) {
  add_source_flags(app, f);
  add_hyper_flags(app, &f->o);
  add_run_flags(app, &f->o);
  add_freeze_flags(app, f);
  add_data_parallel_flags(app, f);
  app.add_flag("--json", f->json, "print one JSON object as the last line of stdout");
}

// The flags whose value alone does not tell whether the user gave them.
std::set<std::string> given_flags(const CLI::App& app) {
  std::set<std::string> given;
  for (const char* flag :
       {"--memory-budget", "--prefetch", "--level-codec", "--width", "--model", "--max-tokens",
        "--grad-compression", "--sync", "--bucket-mb", "--servers", "--max-staleness",
        "--save-head", "--save-model", "--checkpoint"}) {
    if (app.count(flag)) given.insert(flag);
  }
  return given;
}

// After parsing: turns the word flags into options, then checks the options together.
void finish_options(const CLI::App& app, TrainFlags* f) {
  TrainOptions* o = &f->o;
  o->prefetch = f->prefetch == "auto" ? -1 : std::stoll(f->prefetch);  // checked by its validator
  o->dist.sync = parse_sync(f->sync);
  if (!f->freeze.empty()) o->freeze = parse_freeze_rule(f->freeze);
  if (!f->throttle.empty()) parse_throttle(f->throttle, &o->dist);
  o->validate(given_flags(app));
  check_sharded_cache(o->dist, o->cache_dir);
}

// With --nproc N: starts N local workers and returns the launcher's exit code. Otherwise -1: this
// process trains, and learns from the environment whether a launcher hosts the store.
int launch_workers_if_asked(const CLI::App& app, int argc, char** argv, TrainOptions* o) {
  const int launched = launch_if_asked(app, argc, argv, o->dist, o->threads);
  if (launched >= 0) return launched;
  o->dist.store_hosted_elsewhere = std::getenv("RECYCLE_LAUNCHED") != nullptr;
  return -1;
}

// Rank 0's report: notes and resumption on stderr, the epochs and a summary on stdout, then the
// JSON object with --json.
void print_report(const TrainReport& r, const TrainOptions& o, bool json) {
  for (const std::string& note : r.notes)
    std::cerr << "recycle-train: note: " << note << std::endl;
  if (r.resumed_batches > 0) {
    std::cerr << "recycle-train: resumed from --checkpoint " << o.checkpoint << " in epoch "
              << r.resumed_epochs + 1 << ", after its batch " << r.resumed_batches << std::endl;
  } else if (r.resumed_epochs > 0) {
    std::cerr << "recycle-train: resumed from --checkpoint " << o.checkpoint << " after epoch "
              << r.resumed_epochs << std::endl;
  }
  for (size_t e = 0; e < r.epoch_seconds.size(); ++e) {
    std::cout << "epoch " << r.resumed_epochs + static_cast<int64_t>(e) + 1 << "/"
              << r.resumed_epochs + r.epochs << ": loss " << r.epoch_loss[e] << ", "
              << r.epoch_seconds[e] << " s" << std::endl;
  }
  // A script head trains on a cache of any prefix: its recycle ratio is not the engine's to say.
  std::cout << r.mode << " training (";
  if (o.script_head.empty()) {
    std::cout << "recycle " << r.recycle;
  } else {
    std::cout << "script head";
  }
  std::cout << "): " << r.train_samples
            << " samples/epoch"
            << (r.views > 0 ? " (one of " + std::to_string(r.views) + " views each)" : "")
            << ", " << r.train_samples_per_s << " samples/s";
  if (r.test_acc >= 0) std::cout << ", test accuracy " << r.test_acc << " on " << r.test_samples;
  std::cout << std::endl;
  if (json) std::cout << json_with_omp_wait(r.to_json()) << std::endl;
}

}  // namespace

int train_main(int argc, char** argv) {
  TrainFlags f;  // outlives app, whose options write into it
  CLI::App app("Trains a model's head from an activation cache (--cache), or from raw data: "
               "--recycle 0 is full fine-tuning, --recycle R --no-cache freezes the prefix and "
               "recomputes it every step.",
               "recycle-train");
  add_train_flags(app, &f);
  return run_tool(app, argc, argv, [&] {
    finish_options(app, &f);
    TrainOptions& o = f.o;
    const int launched = launch_workers_if_asked(app, argc, argv, &o);
    if (launched >= 0) return launched;
    o.progress = !f.json && o.dist.rank == 0;
    const TrainReport r = run_train(o);
    if (o.dist.rank != 0) return 0;  // rank 0 alone writes: the report too
    print_report(r, o, f.json);
    return 0;
  });
}

}  // namespace recycle
