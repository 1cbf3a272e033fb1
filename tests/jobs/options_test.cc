// The options' closed sets (one name table each) and the validate() of the option structs.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "engine/jobs/train_job.h"
#include "engine/precompute/build_pipeline.h"
#include "recycle/options.h"
#include "recycle/predict.h"
#include "recycle/reader.h"
#include "recycle/writer.h"
#include "tests/test_util.h"

namespace {

// The message of the std::invalid_argument `f` throws ("" when it throws none).
template <typename F>
std::string refusal(F f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

template <typename E>
void expect_round_trips(const std::vector<std::string>& names, E (*parse)(std::string_view),
                        std::string (*name)(E)) {
  for (const std::string& n : names) EXPECT_EQ(name(parse(n)), n);
}

TEST(Options, EachClosedSetParsesItsNamesAndNamesTheChoicesOtherwise) {
  using namespace recycle;
  EXPECT_EQ(optimizer_names(), (std::vector<std::string>{"sgd", "adamw"}));
  EXPECT_EQ(schedule_names(), (std::vector<std::string>{"cosine", "step", "constant"}));
  EXPECT_EQ(precision_names(), (std::vector<std::string>{"fp32", "bf16", "fp16"}));
  EXPECT_EQ(memory_format_names(), (std::vector<std::string>{"channels_last", "contiguous"}));
  EXPECT_EQ(grad_compression_names(), (std::vector<std::string>{"none", "fp16", "topk"}));
  EXPECT_EQ(compression_names(), (std::vector<std::string>{"none", "lz4", "zstd"}));
  expect_round_trips(optimizer_names(), parse_optimizer, optimizer_name);
  expect_round_trips(schedule_names(), parse_schedule, schedule_name);
  expect_round_trips(precision_names(), parse_precision, precision_name);
  expect_round_trips(memory_format_names(), parse_memory_format, memory_format_name);
  expect_round_trips(grad_compression_names(), parse_grad_compression, grad_compression_name);
  expect_round_trips(compression_names(), parse_compression, compression_name);
  for (const std::string& n : codec_names()) EXPECT_EQ(codec_name(parse_codec(n)), n);
  EXPECT_EQ(refusal([] { parse_optimizer("lbfgs"); }),
            "unknown --optimizer 'lbfgs' (known: sgd, adamw)");
  EXPECT_EQ(refusal([] { parse_compression("snappy"); }),
            "unknown --compression 'snappy' (known: none, lz4, zstd)");
  EXPECT_EQ(refusal([] { parse_codec("fp8"); }),
            "unknown codec 'fp8' (known: fp32, fp16, bf16, int8)");
  EXPECT_NE(refusal([] { optimizer_name(static_cast<Optimizer>(9)); }), "");
}

TEST(Options, SyncIsAllreduceAverageEveryKOrAsync) {
  using recycle::Sync;
  EXPECT_EQ(recycle::parse_sync("allreduce"), Sync{});
  EXPECT_EQ(recycle::parse_sync("average:4"), (Sync{Sync::Kind::kAverage, 4, 0}));
  EXPECT_EQ(recycle::sync_name(recycle::parse_sync("average:4")), "average:4");
  EXPECT_EQ(recycle::sync_name(Sync{}), "allreduce");
  // async[:PUSH[:FETCH]], each 1 when absent, always named in full.
  EXPECT_EQ(recycle::parse_sync("async"), (Sync{Sync::Kind::kAsync, 0, 1, 1}));
  EXPECT_EQ(recycle::parse_sync("async:4"), (Sync{Sync::Kind::kAsync, 0, 4, 1}));
  EXPECT_EQ(recycle::parse_sync("async:4:2"), (Sync{Sync::Kind::kAsync, 0, 4, 2}));
  EXPECT_EQ(recycle::sync_name(recycle::parse_sync("async")), "async:1:1");
  EXPECT_NE(recycle::parse_sync("async:4:2"), recycle::parse_sync("async:4:3"));
  for (const char* bad : {"average:0", "average:", "average:x", "average:1234567", "mean", "",
                          "async:0", "async:1:0", "async:", "async:1:", "async:1:2:3", "async:x"}) {
    EXPECT_EQ(
        refusal([&] { recycle::parse_sync(bad); }),
        "--sync must be allreduce, average:K or async[:PUSH[:FETCH]] with K, PUSH, FETCH >= 1, "
        "not '" +
            std::string(bad) + "'");
  }
  recycle::DistOptions d;
  d.sync = Sync{Sync::Kind::kAverage, 0, 0};  // filled by hand, not parsed
  EXPECT_NE(refusal([&] { d.validate(); }).find("not 'average:0'"), std::string::npos);
  d.sync = Sync{Sync::Kind::kAllreduce, 2};  // a period allreduce does not read
  EXPECT_NE(refusal([&] { d.validate(); }).find("sets a period of another kind"),
            std::string::npos);
  d.sync = Sync{Sync::Kind::kAverage, 2, 0};
  d.grad_compression = recycle::GradCompression::kFp16;
  EXPECT_NE(refusal([&] { d.validate(); }).find("applies to --sync allreduce and async only"),
            std::string::npos);
  // Compression applies to async pushes; --servers and --max-staleness to async only.
  d.sync = Sync{Sync::Kind::kAsync, 0, 1, 1};
  EXPECT_EQ(refusal([&] { d.validate(); }), "");
  d.sync = Sync{};
  d.servers = 2;
  EXPECT_NE(refusal([&] { d.validate(); }).find("--servers applies to --sync async only"),
            std::string::npos);
  d.servers = 1;
  d.max_staleness = 3;
  EXPECT_NE(refusal([&] { d.validate(); }).find("--max-staleness applies to --sync async only"),
            std::string::npos);
}

// A library caller (no command line, so no 'given' flags) gets the checks its fields tell.
TEST(Options, TrainOptionsValidateTheModeCombinations) {
  recycle::TrainOptions o;
  EXPECT_EQ(refusal([&] { o.validate(); }),
            "give --cache DIR (train from a cache) or --data (train from raw data)");
  o.data.spec = "fashion-mnist";
  o.recycle = 0;
  EXPECT_EQ(refusal([&] { o.validate(); }), "");
  o.preload = true;
  EXPECT_EQ(refusal([&] { o.validate(); }), "--preload needs --cache");
  o.preload = false;
  EXPECT_EQ(refusal([&] { o.validate({"--memory-budget"}); }), "--memory-budget needs --cache");
  o.level_codec = recycle::Codec::kInt8;
  EXPECT_EQ(refusal([&] { o.validate(); }), "--level-codec needs --freeze");
  o.level_codec = recycle::Codec::kFp16;
  o.eval_split = "train";
  EXPECT_EQ(refusal([&] { o.validate(); }), "--eval-split names the training split");
  o.eval_split = "";
  o.freeze = recycle::parse_freeze_rule("linear:0.25:0.75");
  EXPECT_EQ(refusal([&] { o.validate(); }),
            "--freeze needs --levels DIR: the directory its cache levels go to");
  o.levels_dir = "levels";
  EXPECT_EQ(refusal([&] { o.validate(); }), "");
  o.hyper.epochs = 0;
  EXPECT_EQ(refusal([&] { o.validate(); }), "--epochs must be in 1..100000, not 0");

  recycle::TrainOptions c;
  c.cache_dir = "cache";
  c.model.width = 16;
  EXPECT_NE(refusal([&] { c.validate(); }).find("--width does not apply with --cache"),
            std::string::npos);
  c.model.width = 0;
  c.recycle = 0.5;
  EXPECT_EQ(refusal([&] { c.validate(); }),
            "--recycle/--split-at with --cache need --weights to check the cache against");
  c.recycle = -1;
  c.preload = c.alternate_preload = true;
  EXPECT_NE(refusal([&] { c.validate(); }).find("do not go together"), std::string::npos);
}

// The bounds of numeric options are the library's (the command line declares none of its own):
// a program's options are refused where the tools' flags are, in the same words.
TEST(Options, NumericBoundsAreCheckedByTheLibrary) {
  recycle::TrainHyper h;
  EXPECT_EQ(refusal([&] { h.validate(); }), "");
  h.momentum = 1.5;
  EXPECT_EQ(refusal([&] { h.validate(); }), "--momentum must be in 0..0.999, not 1.5");
  h.momentum = 0.9;
  h.weight_decay = -1;
  EXPECT_EQ(refusal([&] { h.validate(); }), "--weight-decay must be in 0..1, not -1");
  h.weight_decay = 0;
  h.batch = recycle::kMaxBatch + 1;
  EXPECT_EQ(refusal([&] { h.validate(); }), "--batch must be in 1..65536, not 65537");

  recycle::ModelOptions m;
  m.width = 2000;
  EXPECT_EQ(refusal([&] { m.validate(); }), "--width must be in 1..1024, not 2000");
  m.width = 0;  // not given
  m.max_tokens = -3;
  EXPECT_EQ(refusal([&] { m.validate(); }), "--max-tokens must be in 1..8192, not -3");

  recycle::BuildOptions b;
  b.cache_dir = "cache";
  b.threads = 2000;
  EXPECT_EQ(refusal([&] { b.validate(); }), "--threads must be in 0..1024, not 2000");
  b.threads = 0;
  b.recycle = 1.5;
  EXPECT_EQ(refusal([&] { b.validate(); }), "--recycle must be in 0..1, not 1.5");

  recycle::DistOptions d;
  EXPECT_EQ(refusal([&] { d.validate(); }), "");
  d.timeout_seconds = 0;
  EXPECT_EQ(refusal([&] { d.validate(); }), "--timeout must be in 1..86400, not 0");
  d.timeout_seconds = 60;
  d.world_size = 0;
  EXPECT_EQ(refusal([&] { d.validate(); }), "--world-size must be in 1..65536, not 0");
  d.world_size = 1;
  d.nproc = 300;
  EXPECT_EQ(refusal([&] { d.validate(); }), "--nproc must be in 0..256, not 300");
}

// Every options struct's bounds go through check_range (or check_at_least where there is no
// largest value), in one form: "--X must be in A..B, not V".
TEST(Options, EveryStructsBoundsSpeakInOneForm) {
  recycle::BuildOptions b;
  b.cache_dir = "cache";
  b.recycle = recycle::kNoRecycle;  // not given: the split point is --split-at's
  EXPECT_EQ(refusal([&] { b.validate(); }), "");
  b.recycle = -0.5;
  EXPECT_EQ(refusal([&] { b.validate(); }), "--recycle must be in 0..1, not -0.5");
  b.recycle = 0.5;
  b.augment = "hflip";
  b.views = recycle::kMaxViews + 1;
  EXPECT_EQ(refusal([&] { b.validate(); }), "--views must be in 0..256, not 257");

  recycle::TrainOptions t;
  t.cache_dir = "cache";
  t.prefetch = recycle::kMaxPrefetch + 1;
  EXPECT_EQ(refusal([&] { t.validate(); }), "--prefetch must be in 0..64, not 65");
  t.prefetch = -1;  // auto
  t.memory_budget_mb = recycle::kMinMemoryBudgetMb - 1;
  EXPECT_EQ(refusal([&] { t.validate(); }), "--memory-budget must be in 16..1048576, not 15");

  recycle::DistOptions d;
  d.world_size = 2;
  d.master = "127.0.0.1:1";
  d.rank = 2;
  EXPECT_EQ(refusal([&] { d.validate(); }), "--rank must be in 0..1, not 2");
  d.rank = 0;
  d.sync = recycle::parse_sync("async");
  d.max_staleness = -2;
  EXPECT_EQ(refusal([&] { d.validate(); }), "--max-staleness must be at least -1, not -2");

  recycle::DatasetOptions data;
  data.spec = "fashion-mnist";
  EXPECT_EQ(refusal([&] { data.validate(); }), "");
  data.limit = -1;
  EXPECT_EQ(refusal([&] { data.validate(); }), "--limit must be at least 0, not -1");
  data.limit = 0;
  data.slice_count = 2;
  data.slice_index = 2;
  EXPECT_EQ(refusal([&] { data.validate(); }), "slice_index must be in 0..1, not 2");
}

// PredictOptions' bounds are the build's and training's (--batch, --threads) and --top-k's own.
TEST(Options, PredictOptionsValidate) {
  recycle::testing::TempDir dir;
  recycle::PredictOptions p;
  p.cache_dir = dir.file("cache");
  p.head = dir.file("head.pt");
  p.data.spec = "fashion-mnist";
  p.out = dir.file("rows.csv");
  EXPECT_EQ(refusal([&] { p.validate(); }), "");
  p.batch = 0;
  EXPECT_EQ(refusal([&] { p.validate(); }), "--batch must be in 1..65536, not 0");
  p.batch = 256;
  p.top_k = -1;
  EXPECT_EQ(refusal([&] { p.validate(); }), "--top-k must be at least 0, not -1");
  p.top_k = 0;
  p.threads = recycle::kMaxThreads + 1;
  EXPECT_EQ(refusal([&] { p.validate(); }), "--threads must be in 0..1024, not 1025");
  p.threads = 0;
  p.out = dir.file("rows.txt");
  EXPECT_NE(refusal([&] { p.validate(); }).find("--out"), std::string::npos);
  p.out = p.cache_dir + "/rows.csv";
  EXPECT_NE(refusal([&] { p.validate(); }).find("is inside the cache"), std::string::npos);
}

// ReaderOptions and LoaderOptions refuse what SplitReader and CacheLoader would before opening
// anything, naming the field; no file is needed (the cache need not exist).
TEST(Options, ReaderAndLoaderOptionsValidateNeedNoFile) {
  recycle::ReaderOptions r;
  EXPECT_EQ(refusal([&] { r.validate(); }), "a cache directory is required");
  r.cache_dir = ::testing::TempDir() + "/reader-options-never-made";
  EXPECT_EQ(refusal([&] { r.validate(); }), "");
  r.block_cache_mb = 0;
  EXPECT_EQ(refusal([&] { r.validate(); }), "block_cache_mb must be at least 1, not 0");
  r.block_cache_mb = 32;
  r.split = "a/b";
  EXPECT_NE(refusal([&] { r.validate(); }), "");
  r.split = "train";

  recycle::LoaderOptions l;
  l.reader = r;
  EXPECT_EQ(refusal([&] { l.validate(); }), "");
  l.batch_size = 0;
  EXPECT_EQ(refusal([&] { l.validate(); }), "batch_size must be at least 1, not 0");
  l.batch_size = 8;
  l.prefetch = -1;
  EXPECT_EQ(refusal([&] { l.validate(); }), "prefetch must be at least 0, not -1");
  l.prefetch = 2;
  l.world_size = 0;
  EXPECT_EQ(refusal([&] { l.validate(); }), "world_size must be at least 1, not 0");
  l.world_size = 2;
  l.rank = 2;
  EXPECT_EQ(refusal([&] { l.validate(); }), "rank must be in 0..1, not 2");
  l.rank = 1;
  l.epoch_samples = 100;
  EXPECT_NE(refusal([&] { l.validate(); }).find("epoch_samples is a rank's own shard's"),
            std::string::npos);
  l.epoch_samples = -1;
  EXPECT_EQ(refusal([&] { l.validate(); }), "epoch_samples must be at least 0, not -1");
  l.epoch_samples = 0;
  l.device = "cpu:0";
  EXPECT_NE(refusal([&] { l.validate(); }).find("device cpu:0"), std::string::npos);
  l.device = "cpu";
  l.reader.block_cache_mb = 0;
  EXPECT_EQ(refusal([&] { l.validate(); }), "block_cache_mb must be at least 1, not 0");
  // The readers start with the same checks.
  EXPECT_EQ(refusal([&] { recycle::CacheLoader loader(l); }),
            "block_cache_mb must be at least 1, not 0");
  EXPECT_EQ(refusal([&] { recycle::SplitReader reader(l.reader); }),
            "block_cache_mb must be at least 1, not 0");
  EXPECT_FALSE(std::filesystem::exists(r.cache_dir));
}

TEST(Options, BuildOptionsValidate) {
  recycle::BuildOptions b;
  b.cache_dir = "cache";
  EXPECT_EQ(refusal([&] { b.validate(); }), "");
  b.batch = 0;
  EXPECT_EQ(refusal([&] { b.validate(); }), "--batch must be in 1..65536, not 0");
  b.batch = 1;
  b.model.width = 8;
  b.model.weights = "w.pt";
  EXPECT_EQ(refusal([&] { b.validate(); }),
            "--width applies only without --weights (the weights file sets the width)");
}

// fp16 is a build's prefix's arithmetic, not a training step's: refused there in one line.
TEST(Options, Fp16PrecisionIsForTheBuildsPrefixOnly) {
  recycle::BuildOptions b;
  b.cache_dir = "cache";
  b.precision = recycle::Precision::kFp16;
  EXPECT_EQ(refusal([&] { b.validate(); }), "");
  recycle::TrainHyper h;
  h.precision = recycle::Precision::kFp16;
  EXPECT_EQ(refusal([&] { h.validate(); }),
            "--precision fp16 applies to a build's prefix; training runs fp32 or bf16 (fp16 "
            "training would need a gradient scaler)");
  h.precision = recycle::Precision::kBf16;
  EXPECT_EQ(refusal([&] { h.validate(); }), "");
}

// Progressive freezing on text (any text source), the data-parallel flags without
// data-parallel training and output files that cannot be written are refused before any work.
TEST(Options, TrainOptionsRefuseWhatWouldFailOnlyLater) {
  recycle::TrainOptions o;
  o.data.spec = "tsv:mail.tsv";
  o.recycle = 0;
  EXPECT_EQ(refusal([&] { o.validate(); }), "");
  o.freeze = recycle::parse_freeze_rule("auto");
  o.levels_dir = "levels";
  EXPECT_NE(refusal([&] { o.validate(); }).find("--freeze does not apply to text data (tsv:)"),
            std::string::npos);
  for (const char* text : {"jsonl:mail.jsonl", "csv:mail.csv"}) {
    o.data.spec = text;
    EXPECT_NE(refusal([&] { o.validate(); }).find("--freeze does not apply to text data"),
              std::string::npos) << text;
  }
  o.data.spec = "tsv:mail.tsv";
  o.freeze = {};
  o.levels_dir = "";

  for (const char* flag : {"--grad-compression", "--sync", "--bucket-mb"}) {
    EXPECT_EQ(refusal([&] { o.validate({flag}); }),
              std::string(flag) + " applies to data-parallel training only (--nproc N, or "
                                  "--world-size W with --rank and --master)");
  }
  o.dist.sync = recycle::parse_sync("average:2");
  EXPECT_NE(refusal([&] { o.validate(); }).find("--sync applies"), std::string::npos);
  o.dist.nproc = 2;
  EXPECT_EQ(refusal([&] { o.validate({"--sync", "--bucket-mb"}); }), "");
  o.dist.nproc = 0;
  o.dist.world_size = 2;
  o.dist.master = "127.0.0.1:1";
  EXPECT_EQ(refusal([&] { o.validate({"--sync", "--bucket-mb"}); }), "");
  o.dist = recycle::DistOptions();

  o.save_head = "/nonexistent-folder/head.pt";
  EXPECT_EQ(refusal([&] { o.validate(); }),
            "--save-head /nonexistent-folder/head.pt: folder /nonexistent-folder does not exist");
  o.dist.rank = 1;  // ranks other than 0 write nothing
  o.dist.world_size = 2;
  o.dist.master = "127.0.0.1:1";
  EXPECT_EQ(refusal([&] { o.validate(); }), "");
  o.dist = recycle::DistOptions();
  o.save_head = "";
  EXPECT_EQ(refusal([&] { o.validate({"--save-head"}); }), "--save-head: the path is empty");
  o.save_model = "/";
  EXPECT_EQ(refusal([&] { o.validate(); }), "--save-model /: it is a directory");
}

// WriterOptions::validate refuses what CacheWriter would, naming the option, and touches no
// file (the cache directory is not made).
TEST(Options, WriterOptionsValidateNamesTheOptionAndTouchesNoFile) {
  recycle::WriterOptions o;
  o.cache_dir = ::testing::TempDir() + "/writer-options-never-made";
  o.samples = 3;
  o.model = "python:Prefix";
  o.layout = {{"features", recycle::Dtype::kFloat32, {4}}};
  EXPECT_EQ(refusal([&] { o.validate(); }), "");
  EXPECT_FALSE(std::filesystem::exists(o.cache_dir));
  auto refused = [&](recycle::WriterOptions bad) { return refusal([&] { bad.validate(); }); };
  // The typed fields' names are parsed at the edge (the Python package), in the writer's words.
  EXPECT_EQ(refusal([] { recycle::parse_writer_codec("fp8"); }),
            "unknown codec 'fp8' (known: fp32, fp16, bf16, int8)");
  EXPECT_EQ(refusal([] { recycle::parse_writer_compression("snappy2"); }),
            "unknown compression 'snappy2' (known: none, lz4, zstd)");
  EXPECT_EQ(refusal([] { recycle::parse_writer_dtype("features", "float64"); }),
            "tensor 'features' has dtype 'float64'; records hold float32, int64, int32, uint8 "
            "or bool");
  EXPECT_EQ(recycle::parse_writer_codec("int8"), recycle::Codec::kInt8);
  EXPECT_EQ(recycle::parse_writer_compression("zstd"), recycle::Compression::kZstd);
  EXPECT_EQ(recycle::parse_writer_dtype("mask", "bool"), recycle::Dtype::kBool);
  recycle::WriterOptions bad = o;
  bad.flush_seconds = -1;
  EXPECT_NE(refused(bad).find("flush_seconds must be a number of seconds, 0 or more"),
            std::string::npos);
  bad = o;
  bad.layout = {{"features", recycle::Dtype::kFloat32, {4, 0}}};
  EXPECT_NE(refused(bad).find("every dimension must be at least 1"), std::string::npos);
  bad = o;
  bad.samples = 0;
  EXPECT_EQ(refused(bad), "a split needs at least one sample");
  bad = o;
  bad.engine_model = "resnet18:width=4";
  EXPECT_EQ(refused(bad), "an engine model needs the class names (its classifier's outputs)");
  bad = o;  // a shard of a sharded build
  bad.shard = {2, 2, "", 5};
  EXPECT_EQ(refused(bad), "the shard index must be in 0..1, not 2");
  bad.shard = {1, 2, "xxh3_64(key) % 7", 5};
  EXPECT_EQ(refused(bad), "the shard rule must be 'xxh3_64(key) % count', not 'xxh3_64(key) % 7'");
  bad.shard = {1, 2, "", 2};
  EXPECT_EQ(refused(bad), "the split's 2 samples cannot hold a shard of 3");
  bad.shard.count = -1;
  EXPECT_EQ(refused(bad), "the shard count must be in 0..65536, not -1");
  EXPECT_FALSE(std::filesystem::exists(o.cache_dir));
}

// A shard's writer takes the whole split's chunks and keeps the rows the shard rule puts in its
// shard (shards_of_rows: the same keys), returning the rows to compute in the caller's chunk;
// the id keyer keys by the split's position, not the shard's.
TEST(Options, CacheWriterOfAShardKeepsTheRowsOfItsShard) {
  recycle::testing::TempDir dir;
  for (const std::string keyer : {"xxh3", "id"}) {
    recycle::WriterOptions o;
    o.cache_dir = dir.file("shard-" + keyer);
    o.model = "python:Prefix";
    o.keyer = keyer;
    o.layout = {{"features", recycle::Dtype::kFloat32, {3}}};
    const torch::Tensor inputs = torch::rand({40, 3});
    const torch::Tensor labels = torch::zeros({40}, torch::kInt64);
    const std::vector<int64_t> first =
        recycle::shards_of_rows(keyer, inputs.narrow(0, 0, 25), 0, 3).shards;
    const std::vector<int64_t> second =
        recycle::shards_of_rows(keyer, inputs.narrow(0, 25, 15), 25, 3).shards;
    std::vector<int64_t> want_first, want_second;
    for (size_t i = 0; i < first.size(); ++i)
      if (first[i] == 1) want_first.push_back(static_cast<int64_t>(i));
    for (size_t i = 0; i < second.size(); ++i)
      if (second[i] == 1) want_second.push_back(static_cast<int64_t>(i));
    o.shard = {1, 3, "", 40};
    o.samples = static_cast<int64_t>(want_first.size() + want_second.size());
    ASSERT_GT(o.samples, 0);
    recycle::CacheWriter writer(o);
    EXPECT_EQ(writer.add_chunk(inputs.narrow(0, 0, 25), labels.narrow(0, 0, 25)), want_first)
        << keyer;
    writer.write_chunk({inputs.index_select(0, torch::tensor(want_first))});
    EXPECT_EQ(writer.add_chunk(inputs.narrow(0, 25, 15), labels.narrow(0, 25, 15)), want_second)
        << keyer;
    writer.write_chunk({inputs.index_select(0, torch::tensor(want_second))});
    const recycle::BuildReport r = writer.finish();
    EXPECT_EQ(r.samples, o.samples);
    EXPECT_EQ(r.computed, o.samples);
    EXPECT_EQ(r.shards, 3);
    EXPECT_EQ(r.shard_index, 1);
  }
}

// A C++ caller's label that is no class id is refused before the writer makes a name for
// every class up to it (2**40 names ran out of memory).
TEST(Options, CacheWriterRefusesALabelThatIsNoClassId) {
  recycle::testing::TempDir dir;
  recycle::WriterOptions o;
  o.cache_dir = dir.file("c");
  o.samples = 2;
  o.model = "python:Prefix";
  o.layout = {{"features", recycle::Dtype::kFloat32, {4}}};
  recycle::CacheWriter writer(o);
  const torch::Tensor inputs = torch::rand({2, 3});
  const torch::Tensor labels = torch::tensor({int64_t{1}, int64_t{1} << 40});
  EXPECT_EQ(refusal([&] { writer.add_chunk(inputs, labels); }),
            "label 1099511627776 of sample 1 is not a class id (0 to 1000000)");
}

}  // namespace
