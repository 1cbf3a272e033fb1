// PreloadedBatches: the whole split in memory, the same batches as its source. AlternatingBatches:
// two sources taking turns epoch by epoch.
#include "engine/train/preload.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <vector>

#include "engine/data/sampler.h"
#include "engine/train/batch_sources.h"
#include "tests/cache/store_test_access.h"
#include "tests/test_util.h"
#include "tests/train/small_cache.h"

using recycle::Batch;
using recycle::testing::TempDir;

namespace {

// Samples whose input is [i + 1] long: no single shape.
class RaggedSource : public recycle::BatchSource {
 public:
  int64_t size() const override { return 4; }
  void load(const int64_t* indices, int64_t n, Batch* out) override {
    out->clear();
    out->set("x", torch::zeros({n, indices[0] + 1}));
    out->labels = torch::zeros({n}, torch::kInt64);
  }
};

}  // namespace

TEST(PreloadedBatches, GivesTheBatchesOfItsSourceFromMemory) {
  TempDir tmp;
  auto store = recycle::testing::write_small_cache(tmp.file("cache"), 23);
  recycle::Manifest m;
  ASSERT_OK(store->read_manifest(&m));
  recycle::CachedBatches cached(*store, m, "train", torch::kCPU);
  recycle::PreloadedBatches source(cached, /*chunk=*/5);  // chunks that do not divide 23
  EXPECT_EQ(source.size(), 23);
  EXPECT_EQ(source.bytes(), 23 * (6 * 4 + 8));
  EXPECT_EQ(recycle::batch_bytes(cached, 10), 10 * (6 * 4 + 8));
  const std::vector<int64_t> order = recycle::Sampler(23, true, 3).epoch_order(0);
  Batch got, want;
  const void* first = nullptr;
  for (size_t pos = 0; pos < order.size(); pos += 4) {
    const int64_t n = std::min<int64_t>(4, static_cast<int64_t>(order.size() - pos));
    source.load(order.data() + pos, n, &got);
    cached.load(order.data() + pos, n, &want);
    ASSERT_EQ(got.inputs.size(), 1u);
    EXPECT_EQ(got.inputs[0].first, "activation");
    EXPECT_TRUE(torch::equal(got.features(), want.features()));
    EXPECT_TRUE(torch::equal(got.labels, want.labels));
    if (pos == 0) first = got.features().data_ptr();
    if (n == 4) {
      EXPECT_EQ(got.features().data_ptr(), first);  // gathered into the same buffer
    }
  }
  const int64_t bad = 23;
  EXPECT_THROW(source.load(&bad, 1, &got), std::out_of_range);
}

TEST(PreloadedBatches, RefusesSamplesOfNoSingleShape) {
  RaggedSource ragged;
  try {
    recycle::PreloadedBatches source(ragged, 2);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no single shape"), std::string::npos) << e.what();
  }
}

// With ChannelsLast, CachedBatches decodes [C, H, W] records straight into NHWC batches (the
// strides torch::empty gives channels last, reused batch after batch), with the values of the
// row-major batches; PreloadedBatches keeps that layout and serves the same batches. Shapes
// whose channels and pixels are multiples of 8 go through 8x8 tiles (with AVX), others partly
// or not at all.
void check_channels_last_batches(const std::vector<int64_t>& shape) {
  const int64_t numel = shape[0] * shape[1] * shape[2];
  TempDir tmp;
  std::unique_ptr<recycle::ActivationStore> store;
  ASSERT_OK(recycle::ActivationStore::open(tmp.file("cache"), recycle::StoreOptions(), &store));
  {
    recycle::ActivationStore::Batch batch(*store);
    for (int i = 0; i < 9; ++i) {
      std::vector<float> v(static_cast<size_t>(numel));
      for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(i * 1000 + k);
      recycle::StoreTestAccess::put_record(
          batch, {2, static_cast<uint64_t>(i)},
          recycle::encode_record(recycle::Codec::kFp32, {{v.data(), shape}}));
      recycle::StoreTestAccess::put_index(batch, "train", i,
                                          {{2, static_cast<uint64_t>(i)}, i % 2});
    }
    recycle::Manifest m;
    m.codec = recycle::Codec::kFp32;
    m.record_shapes = {shape};
    m.class_names = {"even", "odd"};
    m.splits["train"] = {"test data", 9, 9, true};
    recycle::StoreTestAccess::put_manifest(batch, m);
    ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
  }
  recycle::Manifest m;
  ASSERT_OK(store->read_manifest(&m));
  const auto cl = c10::MemoryFormat::ChannelsLast;
  const std::vector<int64_t> cl_strides = {numel, 1, shape[2] * shape[0], shape[0]};
  recycle::CachedBatches rows(*store, m, "train", torch::kCPU);
  recycle::CachedBatches nhwc(*store, m, "train", torch::kCPU, cl);
  const std::vector<int64_t> order = recycle::Sampler(9, true, 5).epoch_order(0);
  Batch a, b;
  const void* buffer = nullptr;
  for (size_t pos = 0; pos + 4 <= order.size(); pos += 4) {
    rows.load(order.data() + pos, 4, &a);
    nhwc.load(order.data() + pos, 4, &b);
    EXPECT_TRUE(a.features().is_contiguous());
    EXPECT_EQ(b.features().strides().vec(), cl_strides);
    EXPECT_TRUE(torch::equal(a.features(), b.features()));
    EXPECT_TRUE(torch::equal(a.labels, b.labels));
    if (buffer == nullptr) buffer = b.features().data_ptr();
    EXPECT_EQ(b.features().data_ptr(), buffer);  // decoded into the same buffer again
  }
  recycle::PreloadedBatches preloaded(nhwc, /*chunk=*/4);
  preloaded.load(order.data(), 5, &b);
  rows.load(order.data(), 5, &a);
  EXPECT_EQ(b.features().strides().vec(), cl_strides);
  EXPECT_TRUE(torch::equal(a.features(), b.features()));
  EXPECT_TRUE(torch::equal(a.labels, b.labels));
}

TEST(PreloadedBatches, ChannelsLastBatchesHoldTheValuesOfRowMajorOnes) {
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{3, 2, 5}, {16, 4, 6}, {8, 3, 5}, {12, 4, 4}, {17, 3, 7}}) {
    SCOPED_TRACE(shape[0]);
    check_channels_last_batches(shape);
  }
}

namespace {

// Counts what reaches it; its samples are all `value`.
class CountingSource : public recycle::BatchSource {
 public:
  CountingSource(int64_t size, float value) : size_(size), value_(value) {}
  int64_t size() const override { return size_; }
  void load(const int64_t* /*indices*/, int64_t n, Batch* out) override {
    ++loads;
    out->clear();
    out->set("x", torch::full({n, 1}, value_));
    out->labels = torch::zeros({n}, torch::kInt64);
  }
  void plan(const std::vector<int64_t>& /*order*/, int64_t /*batch*/) override { ++plans; }
  int loads = 0, plans = 0;

 private:
  int64_t size_;
  float value_;
};

}  // namespace

TEST(AlternatingBatches, EpochsGoToTheFirstSecondSecondFirstSourceInTurn) {
  CountingSource first(6, 1.0f), second(6, 2.0f);
  recycle::AlternatingBatches alternating(first, second);
  EXPECT_EQ(alternating.size(), 6);
  const std::vector<int64_t> order = {5, 4, 3, 2, 1, 0};
  Batch b;
  const std::vector<bool> second_serves = {false, true, true,  false, false,
                                           true,  true, false, false};
  for (int64_t epoch = 0; epoch < 9; ++epoch) {
    alternating.select(epoch);
    alternating.plan(order, 4);
    alternating.load(order.data(), 4, &b);
    alternating.load(order.data() + 4, 2, &b);
    EXPECT_TRUE(torch::equal(b.features(), torch::full({2, 1}, second_serves[epoch] ? 2.0f : 1.0f)))
        << "epoch " << epoch;
  }
  EXPECT_EQ(first.plans, 5);  // epochs 0, 3, 4, 7, 8
  EXPECT_EQ(first.loads, 10);
  EXPECT_EQ(second.plans, 4);  // epochs 1, 2, 5, 6
  EXPECT_EQ(second.loads, 8);
  EXPECT_EQ(alternating.selected(), second_serves);
}

TEST(AlternatingBatches, RefusesSourcesOfDifferentSizes) {
  CountingSource six(6, 1.0f), seven(7, 1.0f);
  EXPECT_THROW(recycle::AlternatingBatches(six, seven), std::invalid_argument);
}
