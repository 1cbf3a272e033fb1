// The train room in process: batches, batch sources over a cache and over raw data, and the
// trainer with its hooks (no child processes).
#include "engine/train/trainer.h"

#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/activation_store.h"
#include "cache/record.h"
#include "cache/record_layout.h"
#include "engine/data/sampler.h"
#include "engine/models/precision.h"
#include "engine/models/preprocess.h"
#include "engine/models/torch_compat.h"
#include "engine/train/batch_sources.h"
#include "tests/cache/store_test_access.h"
#include "tests/test_util.h"
#include "tests/train/small_cache.h"

using recycle::Batch;
using recycle::BlockStack;
using recycle::Trainer;
using recycle::TrainHyper;
using recycle::testing::TempDir;

namespace {

// In-memory samples: x [n, features] float32, y [n] int64.
class TensorSource : public recycle::BatchSource {
 public:
  TensorSource(torch::Tensor x, torch::Tensor y) : x_(std::move(x)), y_(std::move(y)) {}
  int64_t size() const override { return x_.size(0); }
  void load(const int64_t* indices, int64_t n, Batch* out) override {
    const torch::Tensor idx =
        torch::from_blob(const_cast<int64_t*>(indices), {n}, torch::kInt64).clone();
    out->clear();
    out->set("activation", x_.index_select(0, idx));
    out->labels = y_.index_select(0, idx);
  }

 private:
  torch::Tensor x_, y_;
};

// Two Gaussian blobs in 4 dimensions, one per class.
TensorSource blobs(int64_t n) {
  torch::manual_seed(1);
  torch::Tensor y = torch::arange(n) % 2;
  torch::Tensor x = torch::randn({n, 4}) * 0.5 + (y.to(torch::kFloat32) * 2 - 1).unsqueeze(1) * 2;
  return TensorSource(x, y);
}

// A head of two linear blocks, the same weights for the same seed.
BlockStack two_blocks(uint64_t seed) {
  torch::manual_seed(seed);
  BlockStack head;
  head->append("a", torch::nn::AnyModule(torch::nn::Linear(4, 8)));
  head->append("b", torch::nn::AnyModule(torch::nn::Linear(8, 2)));
  return head;
}

TrainHyper small_hyper() {
  TrainHyper h;
  h.epochs = 3;
  h.batch = 16;
  h.lr = 0.1;
  h.schedule = recycle::Schedule::kConstant;
  return h;
}

std::vector<torch::Tensor> snapshot(const torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

bool same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i], b[i])) return false;
  }
  return true;
}

}  // namespace

TEST(Batch, NamedInputsAndFeatures) {
  Batch b;
  EXPECT_EQ(b.size(), 0);
  EXPECT_THROW(b.features(), std::out_of_range);
  b.set("activation", torch::zeros({3, 2}));
  b.set("mask", torch::ones({3, 5}, torch::kBool));
  b.set("activation", torch::ones({3, 2}));  // replaces
  b.labels = torch::zeros({3}, torch::kInt64);
  EXPECT_EQ(b.size(), 3);
  ASSERT_EQ(b.inputs.size(), 2u);
  EXPECT_TRUE(torch::equal(b.features(), torch::ones({3, 2})));
  EXPECT_EQ(b.at("mask").scalar_type(), torch::kBool);
  try {
    b.at("lengths");
    FAIL();
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("it has: activation, mask"), std::string::npos)
        << e.what();
  }
}

TEST(Trainer, LearnsASeparableProblem) {
  TensorSource data = blobs(256);
  BlockStack head = two_blocks(0);
  const auto epochs = recycle::train_module(head, data, small_hyper(), /*progress=*/false);
  ASSERT_EQ(epochs.size(), 3u);
  EXPECT_EQ(epochs[0].samples, 256);
  EXPECT_LT(epochs.back().loss, epochs.front().loss);
  EXPECT_GT(recycle::evaluate_module(head, data, 100).accuracy, 0.95);
}

TEST(Trainer, HooksRunAtEpochStartAndBetweenBackwardAndStep) {
  TensorSource data = blobs(64);  // 4 steps of 16 per epoch
  Trainer trainer(two_blocks(0), small_hyper());
  std::vector<int64_t> epochs, steps;
  trainer.add_epoch_start_hook([&](Trainer&, int64_t epoch) {
    epochs.push_back(epoch);
    EXPECT_EQ(static_cast<int64_t>(steps.size()), epoch * 4);  // before the epoch's steps
  });
  trainer.add_after_backward_hook([&](Trainer& t, int64_t step) {
    steps.push_back(step);
    for (const auto& p : t.trainable()) ASSERT_TRUE(p.grad().defined());  // gradients are ready
  });
  trainer.fit(data, recycle::Sampler(data.size(), true, 0), false);
  EXPECT_EQ(epochs, (std::vector<int64_t>{0, 1, 2}));
  std::vector<int64_t> want(12);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(steps, want);
}

TEST(Trainer, EpochEndHooksRunAfterEachEpochsLastStep) {
  TensorSource data = blobs(64);  // 4 steps of 16 per epoch
  Trainer trainer(two_blocks(0), small_hyper());
  int64_t steps = 0;
  std::vector<int64_t> ends;
  trainer.add_after_step_hook([&](Trainer&, int64_t) { ++steps; });
  trainer.add_epoch_end_hook([&](Trainer&, int64_t epoch) {
    EXPECT_EQ(steps, (epoch + 1) * 4);
    ends.push_back(epoch);
  });
  trainer.fit(data, recycle::Sampler(data.size(), true, 0), false);
  EXPECT_EQ(ends, (std::vector<int64_t>{0, 1, 2}));
}

// Images [n, 2, 6, 6]: class 1 brighter in its first channel.
TensorSource small_images(int64_t n) {
  torch::manual_seed(2);
  torch::Tensor y = torch::arange(n) % 2;
  torch::Tensor x = torch::randn({n, 2, 6, 6});
  x.select(1, 0).add_(y.to(torch::kFloat32).view({n, 1, 1}) * 1.5);
  return TensorSource(x, y);
}

// A head with a convolution, batch norm and a linear layer.
BlockStack conv_head(uint64_t seed) {
  torch::manual_seed(seed);
  BlockStack head;
  head->append("conv", torch::nn::AnyModule(
                           torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 4, 3).padding(1))));
  head->append("bn", torch::nn::AnyModule(torch::nn::BatchNorm2d(4)));
  head->append("flat", torch::nn::AnyModule(torch::nn::Flatten()));
  head->append("fc", torch::nn::AnyModule(torch::nn::Linear(4 * 6 * 6, 2)));
  return head;
}

// channels_last changes where values live, not what they are: both layouts train to the same
// parameters (up to the order of float sums), and the module is contiguous NCHW after fit.
TEST(Trainer, ChannelsLastTrainsLikeContiguousAndIsUndoneAfterFit) {
  TensorSource data = small_images(96);
  std::vector<std::vector<torch::Tensor>> trained;
  for (const std::string format : {"contiguous", "channels_last"}) {
    TrainHyper h = small_hyper();
    h.memory_format = recycle::parse_memory_format(format);
    BlockStack head = conv_head(3);
    const torch::Tensor conv_weight = head->parameters()[0];
    bool laid_out = false;
    Trainer trainer(head, h);
    trainer.add_after_backward_hook([&](Trainer&, int64_t) {
      laid_out = format == "channels_last"
                     ? conv_weight.is_contiguous(c10::MemoryFormat::ChannelsLast) &&
                           !conv_weight.is_contiguous()
                     : conv_weight.is_contiguous();
    });
    trainer.fit(data, recycle::Sampler(data.size(), true, 0), false);
    EXPECT_TRUE(laid_out) << format;
    std::vector<torch::Tensor> params;
    for (const torch::Tensor& p : head->parameters()) {
      EXPECT_TRUE(p.is_contiguous()) << format;
      params.push_back(p.detach().clone());
    }
    trained.push_back(params);
  }
  ASSERT_EQ(trained[0].size(), trained[1].size());
  for (size_t i = 0; i < trained[0].size(); ++i) {
    EXPECT_TRUE(torch::allclose(trained[0][i], trained[1][i], 1e-4, 1e-5)) << "parameter " << i;
  }
  TrainHyper bad = small_hyper();
  EXPECT_THROW(recycle::parse_memory_format("nhwc"), std::invalid_argument);
  bad.memory_format = static_cast<recycle::MemoryFormat>(7);  // outside the enum
  EXPECT_THROW(Trainer(conv_head(3), bad), std::invalid_argument);
}

// bf16 mixed precision: the forward's convolution and linear layer run in bfloat16 (the first
// step's loss differs from fp32's, by about bf16's rounding), while the parameters and their
// gradients stay fp32; the two train to parameters close to each other, and autocast is off
// again after fit.
TEST(Trainer, Bf16RunsTheForwardInBfloat16AndKeepsParametersAndGradientsInFp32) {
  TensorSource data = small_images(96);
  std::vector<std::vector<torch::Tensor>> trained;
  std::vector<double> first_loss;
  for (const std::string precision : {"fp32", "bf16"}) {
    TrainHyper h = small_hyper();
    h.precision = recycle::parse_precision(precision);
    BlockStack head = conv_head(3);
    bool grads_fp32 = true;
    Trainer trainer(head, h);
    trainer.add_after_backward_hook([&](Trainer& t, int64_t) {
      for (const torch::Tensor& p : t.trainable()) {
        grads_fp32 = grads_fp32 && p.grad().scalar_type() == torch::kFloat32;
      }
    });
    const auto epochs = trainer.fit(data, recycle::Sampler(data.size(), true, 0), false);
    EXPECT_TRUE(grads_fp32) << precision;
    EXPECT_FALSE(recycle::compat::autocast_enabled(c10::DeviceType::CPU)) << precision;
    EXPECT_LT(epochs.back().loss, epochs.front().loss) << precision;
    first_loss.push_back(epochs.front().loss);
    std::vector<torch::Tensor> params;
    for (const torch::Tensor& p : head->parameters()) {
      EXPECT_EQ(p.scalar_type(), torch::kFloat32) << precision;
      params.push_back(p.detach().clone());
    }
    trained.push_back(params);
  }
  EXPECT_NE(first_loss[0], first_loss[1]);
  EXPECT_NEAR(first_loss[0], first_loss[1], 0.05);
  ASSERT_EQ(trained[0].size(), trained[1].size());
  for (size_t i = 0; i < trained[0].size(); ++i) {
    EXPECT_TRUE(torch::allclose(trained[0][i], trained[1][i], 0.05, 0.02)) << "parameter " << i;
  }
  TrainHyper bad = small_hyper();
  EXPECT_THROW(recycle::parse_precision("fp8"), std::invalid_argument);
  bad.precision = recycle::Precision::kFp16;  // a build's prefix's arithmetic, not training's
  EXPECT_THROW(Trainer(conv_head(3), bad), std::invalid_argument);
  bad.precision = static_cast<recycle::Precision>(7);  // outside the enum
  EXPECT_THROW(Trainer(conv_head(3), bad), std::invalid_argument);
}

// The scope turns autocast to bf16 on for its life and restores what was there before: off,
// or on.
TEST(AutocastScope, TurnsBf16AutocastOnAndRestoresThePreviousState) {
  const torch::Tensor a = torch::randn({4, 4});
  {
    recycle::AutocastScope scope(recycle::Precision::kBf16, c10::DeviceType::CPU);
    EXPECT_TRUE(recycle::compat::autocast_enabled(c10::DeviceType::CPU));
    EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kBFloat16);
  }
  EXPECT_FALSE(recycle::compat::autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kFloat32);
  {
    recycle::AutocastScope scope(recycle::Precision::kFp32, c10::DeviceType::CPU);
    EXPECT_FALSE(recycle::compat::autocast_enabled(c10::DeviceType::CPU));
  }
  recycle::compat::set_autocast_enabled(c10::DeviceType::CPU, true);
  {
    recycle::AutocastScope scope(recycle::Precision::kBf16, c10::DeviceType::CPU);
    EXPECT_TRUE(recycle::compat::autocast_enabled(c10::DeviceType::CPU));
  }
  EXPECT_TRUE(recycle::compat::autocast_enabled(c10::DeviceType::CPU));
  recycle::compat::set_autocast_enabled(c10::DeviceType::CPU, false);
  EXPECT_EQ(recycle::parse_precision("bf16"), recycle::Precision::kBf16);
  EXPECT_THROW(recycle::parse_precision("half"), std::invalid_argument);
}

// What an after-backward hook does to the gradients is what the optimizer applies: zeroed
// gradients (no weight decay) leave every parameter as it was.
TEST(Trainer, AfterBackwardHookSeesTheGradientsTheStepUses) {
  TensorSource data = blobs(64);
  TrainHyper h = small_hyper();
  h.weight_decay = 0;
  Trainer trainer(two_blocks(0), h);
  const auto before = snapshot(*trainer.module());
  trainer.add_after_backward_hook([](Trainer& t, int64_t) {
    for (const auto& p : t.trainable()) p.mutable_grad().zero_();
  });
  trainer.fit(data, recycle::Sampler(data.size(), true, 0), false);
  EXPECT_TRUE(same(before, snapshot(*trainer.module())));
}

// A freeze at an epoch start: the frozen block leaves the optimizer and stops changing.
TEST(Trainer, EpochStartHookCanFreezeABlockAndRebuildTheOptimizer) {
  TensorSource data = blobs(64);
  Trainer trainer(two_blocks(0), small_hyper());
  EXPECT_EQ(trainer.trainable().size(), 4u);
  std::vector<torch::Tensor> first_at_freeze, second_at_freeze;
  torch::nn::Module* first = nullptr;
  trainer.add_epoch_start_hook([&](Trainer& t, int64_t epoch) {
    if (epoch != 1) return;
    first = t.module()->children()[0].get();
    for (auto& p : first->parameters()) p.set_requires_grad(false);
    t.rebuild_optimizer();
    first_at_freeze = snapshot(*first);
    second_at_freeze = snapshot(*t.module()->children()[1]);
  });
  trainer.fit(data, recycle::Sampler(data.size(), true, 0), false);
  EXPECT_EQ(trainer.trainable().size(), 2u);
  ASSERT_NE(first, nullptr);
  EXPECT_TRUE(same(first_at_freeze, snapshot(*first)));
  EXPECT_FALSE(same(second_at_freeze, snapshot(*trainer.module()->children()[1])));
}

// Rebuilding the optimizer keeps the momentum of the parameters that stay: training is the
// same as without the rebuild.
TEST(Trainer, RebuildingTheOptimizerKeepsTheStateOfParametersThatStay) {
  TensorSource data = blobs(64);
  Trainer plain(two_blocks(0), small_hyper());
  plain.fit(data, recycle::Sampler(data.size(), true, 0), false);
  Trainer rebuilt(two_blocks(0), small_hyper());
  rebuilt.add_epoch_start_hook([](Trainer& t, int64_t) { t.rebuild_optimizer(); });
  rebuilt.fit(data, recycle::Sampler(data.size(), true, 0), false);
  EXPECT_TRUE(same(snapshot(*plain.module()), snapshot(*rebuilt.module())));
}

TEST(Trainer, RefusesBadHyperParametersAndAMismatchedSampler) {
  TrainHyper h = small_hyper();
  h.optimizer = static_cast<recycle::Optimizer>(7);  // outside the enum
  EXPECT_THROW(Trainer(two_blocks(0), h), std::invalid_argument);
  h = small_hyper();
  h.schedule = static_cast<recycle::Schedule>(7);
  EXPECT_THROW(Trainer(two_blocks(0), h), std::invalid_argument);
  h = small_hyper();
  h.epochs = 0;
  EXPECT_THROW(Trainer(two_blocks(0), h), std::invalid_argument);
  TensorSource data = blobs(32);
  Trainer t(two_blocks(0), small_hyper());
  EXPECT_THROW(t.fit(data, recycle::Sampler(31, true, 0), false), std::invalid_argument);
}

TEST(CachedBatches, LoadsTheSamplesItIsAskedForInThatOrder) {
  TempDir tmp;
  auto store = recycle::testing::write_small_cache(tmp.file("cache"), 5);
  recycle::Manifest m;
  ASSERT_OK(store->read_manifest(&m));
  recycle::CachedBatches source(*store, m, "train", torch::kCPU);
  EXPECT_EQ(source.size(), 5);
  const std::vector<int64_t> pick = {3, 0, 3};
  Batch b;
  source.load(pick.data(), 3, &b);
  ASSERT_EQ(b.inputs.size(), 1u);
  EXPECT_EQ(b.inputs[0].first, "activation");
  EXPECT_EQ(b.features().sizes(), (std::vector<int64_t>{3, 2, 3}));
  EXPECT_EQ(b.features()[0][1][2].item<float>(), 35.0f);
  EXPECT_EQ(b.features()[1][0][0].item<float>(), 0.0f);
  EXPECT_TRUE(torch::equal(b.labels, torch::tensor({1, 0, 1}, torch::kInt64)));
}

// Loads split into parts, each read and decoded by a thread of ATen's team, give the batches
// of one thread; a record missing from a later part is named as it is on one thread.
TEST(CachedBatches, LoadsInPartsOnATeamWithTheValuesOfOneThread) {
  TempDir tmp;
  auto store = recycle::testing::write_small_cache(tmp.file("cache"), 90);
  recycle::Manifest m;
  ASSERT_OK(store->read_manifest(&m));
  recycle::CachedBatches one(*store, m, "train", torch::kCPU);
  recycle::CachedBatches team(*store, m, "train", torch::kCPU);
  team.set_load_threads(3);
  std::vector<int64_t> pick = recycle::Sampler(90, true, 7).epoch_order(0);
  pick.insert(pick.end(), {5, 5, 89});  // a sample twice in a batch, and in two parts
  Batch a, b;
  for (const int64_t n : {int64_t{93}, int64_t{23}, int64_t{7}}) {
    one.load(pick.data(), n, &a);
    team.load(pick.data(), n, &b);
    EXPECT_EQ(b.features().sizes(), (std::vector<int64_t>{n, 2, 3}));
    EXPECT_TRUE(torch::equal(a.features(), b.features())) << n;
    EXPECT_TRUE(torch::equal(a.labels, b.labels)) << n;
  }
  EXPECT_EQ(b.features()[0][1][2].item<float>(), pick[0] * 10.0f + 5.0f);
  {
    recycle::ActivationStore::Batch batch(*store);
    recycle::StoreTestAccess::delete_record(batch, {1, static_cast<uint64_t>(pick[80])});
    ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
  }
  for (recycle::CachedBatches* source : {&one, &team}) {
    try {
      source->load(pick.data(), 93, &b);
      FAIL();
    } catch (const std::runtime_error& e) {
      const std::string want =
          recycle::Key{1, static_cast<uint64_t>(pick[80])}.to_hex() + ", which has no record";
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

TEST(CachedBatches, RefusesARecordOfAnotherShapeAndAMissingRecord) {
  TempDir tmp;
  auto store = recycle::testing::write_small_cache(tmp.file("cache"), 3);
  {
    recycle::ActivationStore::Batch batch(*store);
    std::vector<float> v(4, 1.0f);
    recycle::StoreTestAccess::put_record(
        batch, {1, 1}, recycle::encode_record(recycle::Codec::kFp32, {{v.data(), {2, 2}}}));
    recycle::StoreTestAccess::delete_record(batch, {1, 2});
    ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
  }
  recycle::Manifest m;
  ASSERT_OK(store->read_manifest(&m));
  recycle::CachedBatches source(*store, m, "train", torch::kCPU);
  Batch b;
  const int64_t one = 1, two = 2, zero = 0;
  source.load(&zero, 1, &b);
  try {
    source.load(&one, 1, &b);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("has shape 2x2, the layout says 2x3"), std::string::npos)
        << e.what();
  }
  try {
    source.load(&two, 1, &b);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("which has no record"), std::string::npos) << e.what();
  }
}

// Records of several named tensors of a variable length: each becomes a batch input of its
// dtype, padded to the longest sample of the batch.
TEST(CachedBatches, NamedTensorsOfVariableLengthArePaddedAtBatchTime) {
  TempDir tmp;
  std::unique_ptr<recycle::ActivationStore> store;
  ASSERT_OK(recycle::ActivationStore::open(tmp.file("cache"), recycle::StoreOptions(), &store));
  recycle::ActivationStore::Batch batch(*store);
  for (int i = 0; i < 3; ++i) {
    const int64_t len = i + 1;  // tokens in sample i
    std::vector<float> hidden(static_cast<size_t>(len * 2), static_cast<float>(i + 1));
    const int64_t length = len;
    std::unique_ptr<bool[]> mask(new bool[len]);
    for (int64_t t = 0; t < len; ++t) mask[t] = true;
    using recycle::TypedArrayRef;
    recycle::StoreTestAccess::put_record(
        batch, {2, static_cast<uint64_t>(i)},
        recycle::encode_record(
            {TypedArrayRef::floats(hidden.data(), {len, 2}, recycle::Codec::kFp16),
             TypedArrayRef::exact(&length, {1}), TypedArrayRef::exact(mask.get(), {len})}));
    recycle::StoreTestAccess::put_index(batch, "train", i, {{2, static_cast<uint64_t>(i)}, 0});
  }
  recycle::Manifest m;
  m.codec = recycle::Codec::kFp16;
  m.record_layout = {
      {"hidden", recycle::Dtype::kFloat32, {recycle::kVariableDim, 2}, recycle::Codec::kFp16},
      {"lengths", recycle::Dtype::kInt64, {1}},
      {"mask", recycle::Dtype::kBool, {recycle::kVariableDim}}};
  m.class_names = {"only"};
  m.splits["train"] = {"test data", 3, 3, true};
  recycle::StoreTestAccess::put_manifest(batch, m);
  ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));

  recycle::Manifest read;
  ASSERT_OK(store->read_manifest(&read));
  recycle::CachedBatches source(*store, read, "train", torch::kCPU);
  const std::vector<int64_t> pick = {2, 0};
  Batch b;
  source.load(pick.data(), 2, &b);
  ASSERT_EQ(b.inputs.size(), 3u);
  EXPECT_EQ(b.features().sizes(), (std::vector<int64_t>{2, 3, 2}));  // padded to 3 tokens
  EXPECT_EQ(b.at("hidden")[0][2][1].item<float>(), 3.0f);
  EXPECT_EQ(b.at("hidden")[1][0][0].item<float>(), 1.0f);
  EXPECT_EQ(b.at("hidden")[1][1][0].item<float>(), 0.0f);  // padding
  EXPECT_EQ(b.at("lengths").scalar_type(), torch::kInt64);
  EXPECT_TRUE(torch::equal(b.at("lengths"), torch::tensor({{3}, {1}}, torch::kInt64)));
  EXPECT_EQ(b.at("mask").scalar_type(), torch::kBool);
  EXPECT_TRUE(
      torch::equal(b.at("mask"), torch::tensor({{true, true, true}, {true, false, false}})));
}

TEST(RawBatches, PreprocessesImagesWithoutAPrefix) {
  recycle::Dataset data;
  data.item_shape = {1, 2, 2};
  data.pixels = {0, 0, 0, 0, 255, 255, 255, 255};
  data.labels = {1, 0};
  data.class_names = {"a", "b"};
  recycle::RawBatches source(data, BlockStack(), torch::kCPU);
  const std::vector<int64_t> pick = {1, 0};
  Batch b;
  source.load(pick.data(), 2, &b);
  EXPECT_EQ(b.inputs[0].first, "input");
  EXPECT_EQ(b.features().sizes(), (std::vector<int64_t>{2, 1, 2, 2}));
  EXPECT_NEAR(b.features()[0][0][0][0].item<float>(),
              (1.0f - recycle::kPixelMean) / recycle::kPixelStd, 1e-5);
  EXPECT_NEAR(b.features()[1][0][0][0].item<float>(), -recycle::kPixelMean / recycle::kPixelStd,
              1e-5);
  EXPECT_TRUE(torch::equal(b.labels, torch::tensor({0, 1}, torch::kInt64)));
}
