// Cache levels (engine/train/cache_levels.h) and the progressive freezer
// (engine/train/progressive.h): a level derived from level k equals the level built from raw
// data with the same frozen weights, reruns reuse matching levels, and a run that freezes at
// epochs 2 and 3 trains on levels 2 and 3 without touching the raw data after its first freeze.
#include "engine/train/cache_levels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cache/record.h"
#include "engine/data/dataset.h"
#include "engine/models/inference_prefix.h"
#include "engine/models/model_setup.h"
#include "engine/models/split_model.h"
#include "engine/train/progressive.h"
#include "engine/train/trainer.h"
#include "tests/precompute/cache_contents.h"
#include "tests/precompute/pattern_images.h"
#include "tests/test_util.h"

namespace {

using recycle::BlockModel;
using recycle::DatasetOptions;
using recycle::LevelInfo;
using recycle::testing::patterns;
using recycle::testing::read_cache;
using recycle::testing::TempDir;
using recycle::testing::write_pattern_images;

DatasetOptions pattern_data(const TempDir& dir, int unique, int repeats) {
  write_pattern_images(dir.path().string(), patterns(unique, repeats));
  DatasetOptions d;
  d.spec = "fashion-mnist:" + dir.path().string();
  d.split = "train";
  return d;
}

// A width-4 ResNet-18 for the data, with batch-norm statistics moved away from their initial
// values (so folding them is not a no-op).
recycle::PreparedModel pattern_model(const recycle::Dataset& data, uint64_t seed) {
  recycle::ModelOptions mo;
  mo.width = 4;
  mo.seed = seed;
  recycle::PreparedModel pm = recycle::prepare_model(mo, data, 0.0, "", torch::kCPU);
  torch::NoGradGuard no_grad;
  recycle::BlockStack all = pm.model.as_stack();
  all->train();
  for (int i = 0; i < 3; ++i) all->forward(torch::rand({16, 1, 28, 28}) * 2 - 0.5);
  return pm;
}

recycle::RawLevelOptions raw_options(const DatasetOptions& d) {
  recycle::RawLevelOptions ro;
  ro.data = d;
  ro.codec = recycle::Codec::kFp32;
  ro.batch = 16;
  ro.progress = false;
  return ro;
}

std::vector<float> decode(const std::string& record) {
  std::vector<recycle::RecordTensor> tensors;
  EXPECT_OK(recycle::parse_record(record, &tensors));
  if (tensors.size() != 1) return {};
  std::vector<float> v(static_cast<size_t>(tensors[0].numel()));
  recycle::decode_tensor(tensors[0], v.data());
  return v;
}

TEST(CacheLevels, LevelDerivedFromLevelKEqualsLevelBuiltFromRawData) {
  TempDir dir;
  const DatasetOptions d = pattern_data(dir, 40, 8);  // 48 samples, 40 distinct
  const recycle::Dataset data = recycle::load_dataset(d);
  recycle::PreparedModel pm = pattern_model(data, 3);
  const std::string levels = dir.file("levels");

  const LevelInfo level2 = recycle::build_level_from_raw(pm.model, 2, levels, raw_options(d));
  EXPECT_EQ(level2.source, "raw");
  EXPECT_FALSE(level2.reused);
  recycle::DeriveOptions o;
  o.batch = 7;  // chunks that do not divide the split
  const LevelInfo derived = recycle::derive_level(level2.dir, pm.model, 5, levels, o);
  EXPECT_EQ(derived.source, level2.dir);
  EXPECT_EQ(derived.prefix_blocks, 5);
  EXPECT_EQ(derived.computed, 40);
  EXPECT_EQ(derived.samples, 48);
  const LevelInfo raw5 =
      recycle::build_level_from_raw(pm.model, 5, dir.file("levels-raw"), raw_options(d));

  const auto a = read_cache(derived.dir);
  const auto b = read_cache(raw5.dir);
  EXPECT_EQ(a.manifest.split_at, b.manifest.split_at);
  EXPECT_EQ(a.manifest.prefix_blocks, 5);
  EXPECT_EQ(a.manifest.record_shapes, b.manifest.record_shapes);
  EXPECT_EQ(a.manifest.records, b.manifest.records);
  EXPECT_TRUE(a.manifest.splits.at("train").complete);
  // Same weights, another path: the derived fingerprint names both parts, the raw one the prefix.
  EXPECT_NE(a.manifest.fingerprint, b.manifest.fingerprint);
  EXPECT_EQ(a.index, b.index);
  ASSERT_EQ(a.records.size(), b.records.size());
  double worst = 0, scale = 1;
  for (const auto& [key, record] : b.records) {
    ASSERT_TRUE(a.records.count(key)) << key;
    const std::vector<float> want = decode(record);
    const std::vector<float> got = decode(a.records.at(key));
    ASSERT_EQ(got.size(), want.size());
    ASSERT_FALSE(want.empty());
    for (size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::abs(got[i] - want[i])));
      scale = std::max(scale, static_cast<double>(std::abs(want[i])));
    }
  }
  // fp32 records: the bound of the folded prefix (engine/models/inference_prefix.h).
  EXPECT_LE(worst, recycle::kInferencePrefixTolerance * scale) << "scale " << scale;
}

TEST(CacheLevels, RerunReusesAMatchingLevelAndOtherWeightsMakeAnother) {
  TempDir dir;
  const DatasetOptions d = pattern_data(dir, 12, 0);
  const recycle::Dataset data = recycle::load_dataset(d);
  recycle::PreparedModel pm = pattern_model(data, 5);
  const std::string levels = dir.file("levels");
  const LevelInfo level2 = recycle::build_level_from_raw(pm.model, 2, levels, raw_options(d));
  EXPECT_TRUE(recycle::build_level_from_raw(pm.model, 2, levels, raw_options(d)).reused);
  const LevelInfo first = recycle::derive_level(level2.dir, pm.model, 4, levels, {});
  const LevelInfo again = recycle::derive_level(level2.dir, pm.model, 4, levels, {});
  EXPECT_FALSE(first.reused);
  EXPECT_TRUE(again.reused);
  EXPECT_EQ(again.computed, 0);
  EXPECT_EQ(again.dir, first.dir);
  {
    torch::NoGradGuard no_grad;
    pm.model.blocks[3].ptr()->parameters().front().add_(0.01);
  }
  const LevelInfo other = recycle::derive_level(level2.dir, pm.model, 4, levels, {});
  EXPECT_FALSE(other.reused);
  EXPECT_NE(other.dir, first.dir);
  EXPECT_NE(other.fingerprint, first.fingerprint);
  // Not deeper than the base: refused.
  EXPECT_THROW(recycle::derive_level(level2.dir, pm.model, 2, levels, {}), std::runtime_error);
}

// A progressive run derives its training split alone (it evaluates through the frozen blocks at
// its end): DeriveOptions::splits picks the base's splits, and one the base lacks is refused
// before anything is written.
TEST(CacheLevels, DerivesTheSplitsItIsAskedFor) {
  TempDir dir;
  DatasetOptions d = pattern_data(dir, 10, 2);  // 12 samples
  for (const char* file : {"images-idx3-ubyte.gz", "labels-idx1-ubyte.gz"}) {
    std::filesystem::copy_file(dir.file(std::string("train-") + file),
                               dir.file(std::string("t10k-") + file));
  }
  const recycle::Dataset data = recycle::load_dataset(d);
  recycle::PreparedModel pm = pattern_model(data, 7);
  const std::string levels = dir.file("levels");
  const LevelInfo base = recycle::build_level_from_raw(pm.model, 2, levels, raw_options(d));
  EXPECT_EQ(base.samples, 12);  // the training split alone
  d.split = "test";
  ASSERT_EQ(recycle::build_level_from_raw(pm.model, 2, levels, raw_options(d)).dir, base.dir);
  ASSERT_EQ(read_cache(base.dir).manifest.splits.size(), 2u);

  recycle::DeriveOptions o;
  o.splits = {"validation"};
  EXPECT_THROW(recycle::derive_level(base.dir, pm.model, 4, levels, o), std::runtime_error);
  const auto entries = [&levels] {
    return std::distance(std::filesystem::directory_iterator(levels), {});
  };
  EXPECT_EQ(entries(), 1);  // the base alone
  o.splits = {"train"};
  const LevelInfo train_only = recycle::derive_level(base.dir, pm.model, 4, levels, o);
  EXPECT_EQ(train_only.samples, 12);
  const auto m = read_cache(train_only.dir).manifest;
  ASSERT_EQ(m.splits.size(), 1u);
  EXPECT_TRUE(m.splits.at("train").complete);
  o.splits.clear();  // every complete split
  EXPECT_EQ(recycle::derive_level(base.dir, pm.model, 5, levels, o).samples, 24);
}

// Deriving a level is a build: the bytes it reports are the record bytes it wrote, as a build
// from raw data reports them (the derivation's own loop once left them at 0), and a reused
// level reports none.
TEST(CacheLevels, DerivedLevelReportsTheRecordBytesItWrote) {
  TempDir dir;
  const DatasetOptions d = pattern_data(dir, 20, 4);  // 24 samples, 20 distinct
  const recycle::Dataset data = recycle::load_dataset(d);
  recycle::PreparedModel pm = pattern_model(data, 11);
  const std::string levels = dir.file("levels");
  const LevelInfo level2 = recycle::build_level_from_raw(pm.model, 2, levels, raw_options(d));
  EXPECT_EQ(level2.bytes, read_cache(level2.dir).manifest.record_bytes);
  recycle::DeriveOptions o;
  o.batch = 6;
  const LevelInfo derived = recycle::derive_level(level2.dir, pm.model, 4, levels, o);
  const auto c = read_cache(derived.dir);
  EXPECT_GT(derived.bytes, 0);
  EXPECT_EQ(derived.bytes, c.manifest.record_bytes);
  int64_t stored = 0;
  for (const auto& [key, record] : c.records) stored += static_cast<int64_t>(record.size());
  EXPECT_EQ(derived.bytes, stored);
  EXPECT_EQ(recycle::derive_level(level2.dir, pm.model, 4, levels, o).bytes, 0);
}

// A level's directory is named by its whole identity: the input shape and the record layout
// count, as the model, weights and codec do.
TEST(CacheLevels, LevelDirectoryNamesTheWholeIdentity) {
  recycle::CacheIdentity id;
  id.model = "resnet18:width=4";
  id.fingerprint = "00ff";
  id.split_at = "layer1.0";
  id.prefix_blocks = 2;
  id.total_blocks = 10;
  id.keyer = "xxh3";
  id.codec = recycle::Codec::kFp32;
  id.preprocess = "normalize";
  id.input_shape = {1, 28, 28};
  id.record_shapes = {{4, 7, 7}};
  const std::string base = recycle::level_dir("L", id);
  EXPECT_EQ(base.rfind("L/level-2-layer1.0-", 0), 0u) << base;
  EXPECT_EQ(recycle::level_dir("L", id), base);
  recycle::CacheIdentity other_input = id;
  other_input.input_shape = {3, 28, 28};
  EXPECT_NE(recycle::level_dir("L", other_input), base);
  recycle::CacheIdentity other_layout = id;
  other_layout.record_shapes = {{4, 14, 14}};
  EXPECT_NE(recycle::level_dir("L", other_layout), base);
  recycle::CacheIdentity other_codec = id;
  other_codec.codec = recycle::Codec::kFp16;
  EXPECT_NE(recycle::level_dir("L", other_codec), base);
}

// Counts what a run asks of the raw data: every load runs the (empty) prefix over raw images.
class CountingSource final : public recycle::BatchSource {
 public:
  explicit CountingSource(recycle::BatchSource& inner) : inner_(inner) {}
  int64_t size() const override { return inner_.size(); }
  void load(const int64_t* indices, int64_t n, recycle::Batch* out) override {
    ++loads;
    inner_.load(indices, n, out);
  }
  int64_t loads = 0;

 private:
  recycle::BatchSource& inner_;
};

TEST(Progressive, FreezesAtEpochs2And3TrainOnLevels2And3WithoutRawDataAfterTheFirstFreeze) {
  TempDir dir;
  const DatasetOptions d = pattern_data(dir, 56, 8);  // 64 samples: 4 steps of 16
  const recycle::Dataset data = recycle::load_dataset(d);
  recycle::PreparedModel pm = pattern_model(data, 7);
  recycle::RawBatches raw(data, pm.split.prefix, torch::kCPU);
  CountingSource counted(raw);
  recycle::SwappableBatches source(&counted);

  recycle::ProgressiveOptions po;
  po.rule = "table";
  po.levels_dir = dir.file("levels");
  po.raw = raw_options(d);
  po.derive.batch = 16;
  // Frozen blocks for the next epoch: 2 after epoch 1, 3 after epoch 2 (1-based).
  recycle::FreezeSchedule table = [](int64_t epoch, int64_t frozen, const recycle::GradNormHistory&,
                                     double* measure) -> int64_t {
    *measure = static_cast<double>(epoch);
    return epoch == 0 ? 2 : epoch == 1 ? 3 : frozen;
  };
  recycle::ProgressiveFreezer freezer(pm.model, 0, "", table, po, source);
  recycle::TrainHyper hyper;
  hyper.epochs = 4;
  hyper.batch = 16;
  recycle::Trainer trainer(pm.split.head, hyper);
  const int64_t all_parameters = recycle::parameter_count(trainer.trainable());
  freezer.attach(trainer);
  const recycle::Sampler sampler(source.size(), /*shuffle=*/true, 1);
  const auto epochs = trainer.fit(source, sampler, false);
  ASSERT_EQ(epochs.size(), 4u);
  for (const auto& e : epochs) EXPECT_EQ(e.samples, 64);

  // The raw data: the first epoch's 4 loads, then nothing.
  EXPECT_EQ(counted.loads, 4);
  const auto& events = freezer.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].epoch, 2);
  EXPECT_EQ(events[0].from_blocks, 0);
  EXPECT_EQ(events[0].to_blocks, 2);
  EXPECT_EQ(events[0].level.source, "raw");  // the only build from raw data
  EXPECT_EQ(events[0].blocks,
            (std::vector<std::string>{pm.model.block_names[0], pm.model.block_names[1]}));
  EXPECT_EQ(events[1].epoch, 3);
  EXPECT_EQ(events[1].from_blocks, 2);
  EXPECT_EQ(events[1].to_blocks, 3);
  EXPECT_EQ(events[1].level.source, events[0].level.dir);  // derived from level 2
  EXPECT_EQ(events[1].level.computed, 56);
  EXPECT_EQ(freezer.epoch_sources(),
            (std::vector<std::string>{"raw", events[0].level.dir, events[1].level.dir,
                                      events[1].level.dir}));
  EXPECT_EQ(freezer.frozen(), 3);

  // Frozen parameters left the optimizer: what it updates is the head after block 3.
  EXPECT_EQ(events[0].trainable_before, all_parameters);
  EXPECT_LT(events[0].trainable_after, events[0].trainable_before);
  EXPECT_LT(events[1].trainable_after, events[1].trainable_before);
  const recycle::SplitModel head3 = recycle::split_block_model(pm.model, 3);
  int64_t head_parameters = 0;
  for (const auto& p : head3.head->parameters()) head_parameters += p.numel();
  EXPECT_EQ(events[1].trainable_after, head_parameters);
  EXPECT_EQ(recycle::parameter_count(trainer.trainable()), head_parameters);
  size_t in_optimizer = 0;
  for (const auto& group : trainer.optimizer().param_groups()) {
    in_optimizer += group.params().size();
  }
  EXPECT_EQ(in_optimizer, trainer.trainable().size());
  for (int64_t b = 0; b < 3; ++b) {
    for (const auto& p : pm.model.blocks[b].ptr()->parameters()) EXPECT_FALSE(p.requires_grad());
  }
}

}  // namespace
