// The options a user fills to build a cache (BuildOptions) or to train (TrainOptions), with what
// they embed (DatasetOptions, ModelOptions, TrainHyper, DistOptions), each with one validate()
// (every options struct's is defined in engine/options/, its numeric bounds named here);
// and the closed sets of the options (optimizer, schedule, precision, memory format,
// gradient sync and compression, codec, RocksDB compression), each an enum with one table of
// names: parse_X(name) -> X (std::invalid_argument naming the choices otherwise), X_name(X) and
// X_names() (in the order help texts list them). The command line parses its strings with
// these once; the library sees only the enums. No LibTorch here; thread safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "recycle/formats.h"   // Codec, Compression
#include "recycle/manifest.h"  // SplitShard

namespace recycle {

// The optimizer of a training run: SGD (momentum, Nesterov) or AdamW.
enum class Optimizer { kSgd, kAdamW };
Optimizer parse_optimizer(std::string_view name);
std::string optimizer_name(Optimizer optimizer);
std::vector<std::string> optimizer_names();

// The learning-rate schedule: cosine (per step, to 0), step (x0.1 at 50% and 75%), constant.
enum class Schedule { kCosine, kStep, kConstant };
Schedule parse_schedule(std::string_view name);
std::string schedule_name(Schedule schedule);
std::vector<std::string> schedule_names();

// Arithmetic of a forward: fp32, or bf16 or fp16 under LibTorch's autocast
// (engine/models/precision.h). A training forward takes fp32 or bf16 (fp16 training would need a
// gradient scaler); a build's prefix takes any of the three.
enum class Precision { kFp32, kBf16, kFp16 };
Precision parse_precision(std::string_view name);
std::string precision_name(Precision precision);
std::vector<std::string> precision_names();

// Layout of a trained module's 4-D tensors and of its 4-D inputs: NHWC ("channels_last") or
// NCHW ("contiguous"); engine/models/memory_format.h maps it to LibTorch's.
enum class MemoryFormat { kChannelsLast, kContiguous };
MemoryFormat parse_memory_format(std::string_view name);
std::string memory_format_name(MemoryFormat format);
std::vector<std::string> memory_format_names();

// How gradients travel between data-parallel ranks: none (fp32 allreduce), fp16 (halves,
// allreduce), topk (AdaComp: binned adaptive selection, quantised values, error feedback,
// allgather).
enum class GradCompression { kNone, kFp16, kTopk };
GradCompression parse_grad_compression(std::string_view name);
std::string grad_compression_name(GradCompression compression);
std::vector<std::string> grad_compression_names();

// How data-parallel ranks stay in step: "allreduce" averages gradients every step;
// "average:K" takes K local steps, then averages parameters (K >= 1); "async:P:F" is Downpour
// SGD: each worker pushes its gradients to a parameter server every P steps and fetches the
// parameters every F steps, and nobody waits for anybody (docs/data-parallel.md).
struct Sync {
  enum class Kind { kAllreduce, kAverage, kAsync };
  Kind kind = Kind::kAllreduce;
  // Each period belongs to one kind and is 0 with the others.
  int64_t average_every = 0;  // kAverage: K >= 1, local steps between parameter averages
  int64_t push_every = 0;     // kAsync: P >= 1, a worker's steps between gradient pushes
  int64_t fetch_every = 0;    // kAsync: F >= 1, its steps between parameter fetches

  bool operator==(const Sync& o) const {
    return kind == o.kind && average_every == o.average_every && push_every == o.push_every &&
           fetch_every == o.fetch_every;
  }
  bool operator!=(const Sync& o) const { return !(*this == o); }
};
// "allreduce", "average:K", "async", "async:P" or "async:P:F" (each number of 1..6 digits,
// >= 1; an absent one is 1); throws std::invalid_argument otherwise.
Sync parse_sync(std::string_view name);
std::string sync_name(const Sync& sync);  // "allreduce", "average:K" or "async:P:F"

// A progressive run's freeze schedule (--freeze; engine/train/freeze_schedule.h applies it at
// each epoch's end):
//   linear:START:LEVEL  Composer's LayerFreezing over blocks: nothing is frozen until a fraction
//                       START of training is done, a fraction LEVEL of the blocks at its end,
//                       linear between. START in [0, 1), LEVEL in (0, 1].
//   auto[:THRESHOLD]    AutoFreeze's rule: the next block freezes when the relative change of its
//                       gradient norm between two epochs falls below THRESHOLD (in (0, 1],
//                       default kDefaultAutoThreshold).
// kNone, the default: no freezing.
inline constexpr double kDefaultAutoThreshold = 0.1;
struct FreezeRule {
  enum class Kind { kNone, kLinear, kAuto };
  Kind kind = Kind::kNone;
  double start = 0.5;                        // linear: START
  double level = 1.0;                        // linear: LEVEL
  double threshold = kDefaultAutoThreshold;  // auto: THRESHOLD

  bool enabled() const { return kind != Kind::kNone; }
  // "linear:0.25:0.75", "auto:0.1" (the canonical spec: what --json reports); "none".
  std::string spec() const;
  // "linear", "auto" or "none".
  std::string name() const;
};
// Parses --freeze; throws std::invalid_argument with one line naming the accepted forms.
FreezeRule parse_freeze_rule(const std::string& spec);

// Codec (formats.h): how records store activations. codec_name and codec_names are
// formats.h's; this parse throws where cache/codec.h's returns false.
Codec parse_codec(std::string_view name);

// Compression (formats.h): RocksDB's compression of the records a build writes.
Compression parse_compression(std::string_view name);
std::string compression_name(Compression compression);
std::vector<std::string> compression_names();

// ---- the option structs -----------------------------------------------------------------------

// Bounds of numeric options that validate() checks through check_range (base/range_check.h):
// "--batch must be in 1..65536, not 0". The tools' help texts are made from them. Each struct's
// own bounds stand next to it below; these are shared.
inline constexpr int64_t kMaxBatch = int64_t{1} << 16;  // samples per step or per prefix forward
inline constexpr int kMaxThreads = 1024;                 // threads; 0 = every core
// The fraction of blocks recycled (--recycle) is in 0..1; kNoRecycle, the default, says it was
// not given (the split point is split_at's, or the mode's).
inline constexpr double kNoRecycle = -1.0;

// One option as its command-line flag and its value in text ("--lr", "0.05"), and whether the
// ranks of a data-parallel job must all give the same value (it changes the math or the number
// of steps) or may differ (--rank, --threads, a path only rank 0 writes, ...).
struct FlagValue {
  std::string flag;
  std::string value;
  bool same_on_every_rank = false;
};

// Which samples a build or a training run reads (engine/data/dataset.h loads them):
//   fashion-mnist[:DIR]  Debian's IDX .gz files; split "train" reads train-*, "test" t10k-*.
//   tsv:FILE             `label<TAB>text` lines; the split only names it.
//   tsv:DIR              a folder of such files, one per split: split S reads DIR/S.tsv.
// validate() checks what needs no file (the spec's form, --limit, the shard); load_dataset calls
// it and checks the rest against the data (std::invalid_argument naming the flag).
// What an image folder's file that cannot be decoded does: fail the run (naming it), or leave
// the sample out (counted and reported, never silently). Defined in engine/data/dataset.cc.
enum class BadFilePolicy { kFail, kSkip };
BadFilePolicy parse_bad_file_policy(std::string_view name);
std::string bad_file_policy_name(BadFilePolicy policy);
std::vector<std::string> bad_file_policy_names();

struct DatasetOptions {
  // "fashion-mnist[:DIR]", "tsv:FILE|DIR", "imagefolder:DIR", "npy:DIR", "jsonl:PATH", "csv:PATH"
  std::string spec;
  std::string split = "train";  // fashion-mnist: train | test
  std::string classes;          // "" keeps all; "5-9" or "0,2,4": kept classes, relabelled 0..k-1
  int64_t limit = 0;            // keep the first N samples after the class filter; 0 keeps all
  // A data-parallel rank's fixed slice of the split, after the class filter and the limit (no
  // flag sets it: recycle-train --freeze --nproc does, docs/progressive.md): of the first
  // slice_count * floor(n / slice_count) samples (up to slice_count - 1 are left out, so every
  // slice has the same size), those at positions i with i % slice_count == slice_index. A
  // slice is by position; a cache's shard (BuildOptions::shard, SplitShard) is by key.
  int slice_index = 0;
  int slice_count = 1;  // 1 = the whole split
  // imagefolder: how a file becomes the encoder's input (engine/data/image_transform.h);
  // "" = the default: the encoder's channels and (square) size as encoder_input fixes them,
  // else gray and the files' size; the built-in normalisation.
  std::string transform;
  // The encoder's input [C, H, W] as far as its spec fixes it (0: any). No flag sets it: the
  // jobs fill it from ModelOptions (engine/models/model_setup.h, with_encoder_input) before
  // they load the data, so that the default transform makes the encoder's input.
  std::vector<int64_t> encoder_input;
  BadFilePolicy on_bad_file = BadFilePolicy::kFail;  // imagefolder
  std::string text_field = "text";    // jsonl, csv: the field (column) holding the text
  std::string label_field = "label";  // jsonl, csv: the field holding the label

  // Throws std::invalid_argument with one line (engine/options/dataset_validate.cc).
  void validate() const;
};

// Bounds of ModelOptions' numbers (when given: 0 is the model's own).
inline constexpr int64_t kMaxWidth = 1024;         // --width: channels of the first stage
inline constexpr int64_t kMaxTokensPerText = 8192;  // --max-tokens

// Which encoder to make or load.
struct ModelOptions {
  std::string encoder;     // encoder spec (see encoder_registry.h); "" = the default for the data
  int64_t width = 0;       // > 0: sets the encoder's width option (only without weights)
  int64_t max_tokens = 0;  // > 0: sets the encoder's max_tokens option (text; only without weights)
  std::string weights;     // a file saved by recycle-train --save-model; "" = random init
  uint64_t seed = 0;       // initialisation seed when there are no weights

  // A width only without weights. Throws std::invalid_argument with one line.
  void validate() const;
};

// Bounds of TrainHyper's numbers.
inline constexpr int64_t kMaxEpochs = 100000;
inline constexpr double kMaxLr = 10.0;  // --lr: above 0, at most this
inline constexpr double kMaxMomentum = 0.999;
inline constexpr double kMaxWeightDecay = 1.0;

// The hyper-parameters of a training run.
struct TrainHyper {
  int64_t epochs = 4;
  int64_t batch = 128;
  double lr = 0.05;  // peak learning rate
  Optimizer optimizer = Optimizer::kSgd;
  double momentum = 0.9;  // sgd only
  double weight_decay = 5e-4;
  Schedule schedule = Schedule::kCosine;
  uint64_t seed = 0;  // shuffling and any newly initialised classifier
  // Layout of the trained module's 4-D tensors and of its 4-D inputs while it trains:
  // channels_last | contiguous (engine/models/memory_format.h).
  MemoryFormat memory_format = MemoryFormat::kChannelsLast;
  // Arithmetic of the training forward: fp32 | bf16 (mixed precision under LibTorch's
  // autocast; parameters, gradients and optimizer in fp32; engine/models/precision.h).
  Precision precision = Precision::kFp32;

  // Samples per batch when evaluating (no gradients to hold: at least 256).
  int64_t eval_batch() const { return std::max<int64_t>(batch, 256); }

  // Epochs and batch at least 1, a positive learning rate. Throws std::invalid_argument with
  // one line naming the flag.
  void validate() const;
};

// Bounds of DistOptions' numbers.
inline constexpr int kMaxNproc = 256;  // --nproc: local workers (0: no launcher)
inline constexpr int kMaxWorldSize = 65536;
inline constexpr int kMaxTimeoutSeconds = 86400;
inline constexpr double kMaxBucketMb = 1024.0;  // --bucket-mb: above 0, at most this
inline constexpr int kMaxServers = kMaxWorldSize;
inline constexpr int kMaxThrottleMs = 60000;    // --throttle RANK:MS

// How one process takes part in a data-parallel job.
struct DistOptions {
  // --nproc N (launcher only): start N local workers and wait for them. 0 = no launcher.
  int nproc = 0;
  // --rank R --world-size W --master HOST:PORT: this process is rank R of a W-process job whose
  // TCPStore listens at HOST:PORT (hosted by rank 0; on every interface); or --master file:PATH,
  // a FileStore (the launcher behind --nproc makes one in a private directory).
  // world_size 1 = training alone (no process group at all). Every rank must present the job's
  // token, RECYCLE_JOB_TOKEN in its environment (DistContext; engine/distributed/dist_options.h).
  int rank = 0;
  int world_size = 1;
  std::string master;
  // --rank, --world-size or --master was given (the command line sets it): with --nproc, which
  // starts its own ranks, refused by validate() even where the value is the default.
  bool ranks_by_hand = false;
  // The store at `master` is hosted by a launcher (--nproc), not by rank 0 (set by the launcher
  // through the environment of its workers: RECYCLE_LAUNCHED=1).
  bool store_hosted_elsewhere = false;
  // Every collective and store operation gives up after this many seconds, and the job
  // ends naming the rank it lost.
  int timeout_seconds = 60;
  // How gradients travel: none (fp32 allreduce), fp16 (halves, allreduce), topk (AdaComp:
  // binned adaptive selection, quantised values, error feedback, allgather).
  GradCompression grad_compression = GradCompression::kNone;
  // allreduce: average gradients every step; average:K: K local steps, then average
  // parameters (K >= 1).
  Sync sync;
  // Gradient bucket size cap in MiB: buckets are reduced as they fill during backward (with
  // async, the parameter server's buckets, each with its version, dealt round the servers).
  double bucket_mb = 1.0;
  // async: how many ranks serve parameters (ranks 0..S-1, a server thread beside their worker),
  // each the buckets b with b % S == its rank.
  int servers = 1;
  // async: a worker whose parameters are more than K server versions old fetches before it
  // goes on (stale synchronous parallel); -1 = no bound.
  int64_t max_staleness = -1;
  // Testing stragglers (--throttle RANK:MS): rank throttle_rank sleeps throttle_ms ms a step.
  int throttle_rank = -1;
  int throttle_ms = 0;
  // --sharded: every rank keeps its own shard of the cache in its own --cache directory (a
  // path on its own machine; the same string may name another directory on each), and never
  // opens another's. A build computes and stores only its shard's samples; training reads only
  // its shard (docs/scale.md).
  bool sharded = false;

  bool distributed() const { return world_size > 1; }

  // Checks the options together (rank below world size, a master for a world above 1, a
  // timeout, compression only with allreduce or async, a positive bucket cap, --servers and
  // --max-staleness with async only, servers fewer than the world). Throws
  // std::invalid_argument with one line (engine/options/dist_validate.cc).
  void validate() const;
};

// The largest --views: views multiply a split's records (and its build time).
inline constexpr int64_t kMaxViews = 256;

// A build (run_build, build.h): dataset -> keys -> prefix forward -> codec -> cache.
struct BuildOptions {
  DatasetOptions data;
  ModelOptions model;
  double recycle = kNoRecycle;  // fraction of blocks in the prefix, (0, 1]; kNoRecycle: split_at
  std::string split_at;        // name of the prefix's last block (instead of recycle)
  std::string keyer;           // keyer spec; "" = xxh3 for images, text for text data
  Codec codec = Codec::kFp16;  // fp32 | fp16 | bf16 | int8
  // RocksDB's compression of the records written: none | lz4 | zstd. None: float activations
  // gained 11% (fp16) to 20% (fp32) from lz4 and int8 nothing, at about 18% of a build's time
  // (docs/performance.md).
  Compression compression = Compression::kNone;
  std::string cache_dir;
  int64_t batch = 256;   // samples per prefix forward and per write batch
  int threads = 0;       // 0 = every core
  bool rebuild = false;  // delete the cache in cache_dir first
  bool progress = true;  // progress bar on stderr (when it is a terminal)
  std::string device = "cpu";
  // Arithmetic of the prefix's forward: fp32, or bf16 / fp16 under LibTorch's autocast (the
  // records are still stored by `codec`). Part of the cache's identity (prefix_precision): a
  // cache holds the outputs of one arithmetic.
  Precision precision = Precision::kFp32;
  // Distributed builds: record bytes a rank gathers in memory before it sorts them and writes
  // them out as one record file for rank 0 to ingest (so memory stays bounded).
  int64_t stage_file_bytes = int64_t{64} << 20;
  // Augmented views (docs/augmentation.md): with views K >= 1 and an augmentation spec
  // (engine/data/augment.h: "hflip,crop=4", ...), the split stores K augmented views of every
  // distinct sample instead of the sample as it is; training reads one view per sample per
  // epoch. Images of uint8 pixels only. views 0 and "" (the default): no views.
  std::string augment;
  int64_t views = 0;
  // One rank's part of a sharded build (run_build with DistOptions::sharded sets its index and
  // count to the rank and the world size): the cache holds only the samples of that shard
  // (cache/shard_rule.h). count 0: the whole split. The build fills its rule and split_samples.
  SplitShard shard;

  // The model options, a batch of at least 1, a cache directory, views with an augmentation
  // (and neither without the other). Throws std::invalid_argument
  // with one line naming the flag. SplitBuild's constructor calls it.
  // (engine/options/options.cc, with ModelOptions' and TrainHyper's.)
  void validate() const;
};

// TrainOptions::eval_split's word for no evaluation (--eval-split none).
inline constexpr char kNoEvalSplit[] = "none";

// Bounds of TrainOptions' own numbers.
inline constexpr int64_t kMinMemoryBudgetMb = 16;
inline constexpr int64_t kMaxMemoryBudgetMb = int64_t{1} << 20;
inline constexpr int64_t kMaxPrefetch = 64;  // --prefetch: batches ahead (-1: auto)

// A training run (run_train, train.h): from a cache (cache_dir), or from raw data (data).
struct TrainOptions {
  // From a cache: train the head from split data.split, evaluate on `eval_split`.
  std::string cache_dir;
  bool allow_partial = false;  // train on a split whose build did not finish
  // Memory for the data (--memory-budget, MiB): the batches held, the preloaded split, the
  // samples' index and RocksDB's block cache share it (engine/train/memory_budget.h).
  int64_t memory_budget_mb = 256;
  // Batches loaded ahead on a background thread; 0: none, each batch loaded on the training
  // thread across ATen's team; -1 (kAutoPrefetch): prefetch_depth (engine/train/prefetch.h).
  int64_t prefetch = -1;
  bool preload = false;  // decode the whole training split into memory first
  // Epochs 1, 4, 5, 8, 9, ... from the cache and 2, 3, 6, 7, ... from the split preloaded in
  // memory: what reading from the cache costs, timed within one run (AlternatingBatches;
  // report.epoch_sources says which).
  bool alternate_preload = false;
  // From raw data (no cache): --recycle 0 is full fine-tuning; --recycle r with no_cache
  // freezes the prefix but recomputes it every step.
  DatasetOptions data;
  ModelOptions model;
  double recycle = kNoRecycle;
  std::string split_at;
  bool no_cache = false;
  // Raw-data modes: online augmentation (engine/data/augment.h spec), a fresh random view of
  // every sample in every epoch, drawn from the seed, the epoch and the sample's position
  // (what a training loop without a cache of views does). "" = none.
  std::string augment;
  // Progressive recycling (docs/progressive.md): a freeze schedule (parse_freeze_rule; kNone:
  // none), the directory its cache levels go to, and the codec of a first level built from raw
  // data (a level derived from a cache keeps that cache's codec).
  FreezeRule freeze;
  std::string levels_dir;
  Codec level_codec = Codec::kFp16;

  // data.split names the split to train on, in a cache or in the raw data (default train).
  std::string eval_split;  // "" = test when there is one; kNoEvalSplit ("none") = no evaluation
  // Evaluate after every epoch too, not only at the end (report.epoch_test_acc): what time to a
  // target accuracy is measured from. Rank 0 evaluates; its evaluations are not in the epochs'
  // seconds.
  bool eval_every_epoch = false;
  TrainHyper hyper;
  std::string save_head;   // the trained head's weights
  // From a cache: train this TorchScript module (activations -> logits) as the head instead of
  // the head the cache stores; for caches of any Python prefix (recycle.build). save_head then
  // writes the trained module as a TorchScript file. engine/models/torchscript_model.h.
  std::string script_head;
  std::string save_model;  // raw-data modes: the whole model (load with --weights)
  // From a cache: resume from this file when it exists (the same job's: its shared options,
  // world and cache), and write it after every epoch (rank 0, atomically): the head, its
  // optimizer's state and the epochs done (engine/jobs/checkpoint.h; under --sync async the
  // servers' parameters, their optimizer state starting over). "" = none.
  std::string checkpoint;
  // With --checkpoint: write it every this many steps too (0: at epoch ends only); a rerun
  // resumes in the middle of the epoch, with the batches it had left, in the same order.
  int64_t checkpoint_every = 0;
  int threads = 0;
  bool progress = true;
  std::string device = "cpu";
  // A Chrome trace of one epoch's steps from LibTorch's autograd profiler (rank 0 alone):
  // the second epoch, or the only one (engine/train/epoch_profiler.h).
  std::string profile;
  // Data-parallel: this process's rank, the world and how gradients travel (world 1 = alone).
  // Rank 0 alone evaluates and writes (--save-head, --save-model); every rank trains.
  DistOptions dist;

  // Checks the options alone and together (the mode: --cache or --data, what applies to it,
  // what goes together, the freeze schedule's needs; the hyper-parameters, the model, the
  // data-parallel options and, from raw data, the dataset's: their own validate(), last).
  // `given` names the flags the user gave on the command line, for the checks of flags whose
  // value alone does not tell (--memory-budget, --prefetch, --level-codec, --sync, --bucket-mb
  // at their defaults, an empty --save-head); a library caller passes none. Also refused:
  // --freeze on text data, the data-parallel flags without data-parallel training, and on
  // rank 0 an output file (--save-head, --save-model) that cannot be written
  // (util/atomic_file.h: output_path_problem), so that none is found only after training.
  // Throws std::invalid_argument with one line. run_train calls it first; the command line
  // calls it before it launches workers. (engine/options/train_validate.cc)
  void validate(const std::set<std::string>& given = {}) const;

  // Every option above as (flag, value, same_on_every_rank), in a fixed order: the data-parallel
  // ranks compare those marked same_on_every_rank at rendezvous (DistContext), so that ranks
  // started with different options stop with "ranks disagree on --X". A new option is added
  // here too, marked as it must be. Defined in engine/jobs/train_options.cc.
  std::vector<FlagValue> flag_values() const;
};

}  // namespace recycle
