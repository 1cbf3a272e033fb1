// PrefetchedBatches: the same batches as its source, loaded ahead into reused buffers; errors
// of the background thread thrown on the caller's; no hang when anything throws.
#include "engine/train/prefetch.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/data/sampler.h"
#include "engine/train/batch_sources.h"
#include "engine/train/trainer.h"
#include "tests/cache/store_test_access.h"
#include "tests/test_util.h"
#include "tests/train/small_cache.h"

using recycle::Batch;
using recycle::CachedBatches;
using recycle::PrefetchedBatches;
using recycle::testing::TempDir;
using recycle::testing::write_small_cache;

namespace {

struct Cache {
  TempDir tmp;
  std::unique_ptr<recycle::ActivationStore> store;
  recycle::Manifest manifest;
  explicit Cache(int n) : store(write_small_cache(tmp.file("cache"), n)) {
    EXPECT_OK(store->read_manifest(&manifest));
  }
};

std::vector<int64_t> shuffled(int64_t n, int64_t epoch) {
  return recycle::Sampler(n, /*shuffle=*/true, 7).epoch_order(epoch);
}

// Loads every batch of `order` from `source` and checks it against `reference`.
void expect_same_batches(recycle::BatchSource& source, recycle::BatchSource& reference,
                         const std::vector<int64_t>& order, int64_t batch) {
  Batch got, want;
  for (size_t pos = 0; pos < order.size(); pos += static_cast<size_t>(batch)) {
    const int64_t n = std::min<int64_t>(batch, static_cast<int64_t>(order.size() - pos));
    source.load(order.data() + pos, n, &got);
    reference.load(order.data() + pos, n, &want);
    ASSERT_TRUE(torch::equal(got.features(), want.features())) << "batch at " << pos;
    ASSERT_TRUE(torch::equal(got.labels, want.labels)) << "batch at " << pos;
  }
}

}  // namespace

TEST(PrefetchedBatches, GivesTheBatchesOfItsSourceLoadedAhead) {
  Cache c(37);
  CachedBatches inner(*c.store, c.manifest, "train", torch::kCPU);
  CachedBatches reference(*c.store, c.manifest, "train", torch::kCPU);
  PrefetchedBatches source(inner, 2);
  EXPECT_EQ(source.size(), 37);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const std::vector<int64_t> order = shuffled(37, epoch);
    source.plan(order, 5);
    expect_same_batches(source, reference, order, 5);
  }
  EXPECT_EQ(source.prefetched(), 3 * 8);  // ceil(37 / 5) batches an epoch, all loaded ahead
}

TEST(PrefetchedBatches, ReusesItsBuffersWhenTheCallerLetsGoOfThem) {
  Cache c(64);
  CachedBatches inner(*c.store, c.manifest, "train", torch::kCPU);
  PrefetchedBatches source(inner, 1);
  const std::vector<int64_t> order = shuffled(64, 0);
  source.plan(order, 4);
  std::set<const void*> buffers;
  Batch b;
  for (size_t pos = 0; pos < order.size(); pos += 4) {
    source.load(order.data() + pos, 4, &b);
    buffers.insert(b.features().data_ptr());
    EXPECT_EQ(b.features()[0][0][0].item<float>(), static_cast<float>(order[pos] * 10));
  }
  // 16 batches through at most depth + 2 buffers: the queue, the one loading, the caller's.
  EXPECT_LE(buffers.size(), 3u);
  // A tensor the caller keeps is never written into again.
  source.plan(order, 4);
  source.load(order.data(), 4, &b);
  const torch::Tensor kept = b.features();
  const torch::Tensor copy = kept.clone();
  for (size_t pos = 4; pos < order.size(); pos += 4) source.load(order.data() + pos, 4, &b);
  EXPECT_TRUE(torch::equal(kept, copy));
}

TEST(PrefetchedBatches, ServesLoadsOffThePlanInTheOrderAsked) {
  Cache c(20);
  CachedBatches inner(*c.store, c.manifest, "train", torch::kCPU);
  CachedBatches reference(*c.store, c.manifest, "train", torch::kCPU);
  PrefetchedBatches source(inner, 3);
  Batch b;
  const std::vector<int64_t> pick = {4, 1};
  source.load(pick.data(), 2, &b);  // no plan at all
  EXPECT_EQ(b.features()[0][0][0].item<float>(), 40.0f);
  const std::vector<int64_t> order = shuffled(20, 0);
  source.plan(order, 6);
  source.load(order.data(), 6, &b);
  source.load(pick.data(), 2, &b);  // off the plan: cancels it
  EXPECT_EQ(b.features()[1][0][0].item<float>(), 10.0f);
  source.load(order.data() + 6, 6, &b);  // the plan is gone: served as asked
  Batch want;
  reference.load(order.data() + 6, 6, &want);
  EXPECT_TRUE(torch::equal(b.features(), want.features()));
  source.plan(order, 6);  // a new plan loads ahead again
  expect_same_batches(source, reference, order, 6);
  EXPECT_EQ(source.prefetched(), 1 + 4);
}

TEST(PrefetchedBatches, ThrowsTheSourcesErrorOnTheCallersThreadAndDoesNotHang) {
  Cache c(30);
  {
    recycle::ActivationStore::Batch batch(*c.store);
    recycle::StoreTestAccess::delete_record(batch, {1, 17});
    ASSERT_OK(recycle::StoreTestAccess::write(*c.store, &batch));
  }
  CachedBatches inner(*c.store, c.manifest, "train", torch::kCPU);
  CachedBatches reference(*c.store, c.manifest, "train", torch::kCPU);
  std::vector<int64_t> order(30);
  std::iota(order.begin(), order.end(), 0);
  // The message the source gives when loading on the caller's thread.
  std::string want;
  try {
    Batch b;
    reference.load(order.data() + 15, 5, &b);
    FAIL();
  } catch (const std::runtime_error& e) {
    want = e.what();
  }
  EXPECT_NE(want.find("which has no record"), std::string::npos) << want;
  for (int64_t depth : {1, 4}) {
    PrefetchedBatches source(inner, depth);
    for (int round = 0; round < 2; ++round) {  // after the error, a new plan works as well
      source.plan(order, 5);
      Batch b;
      for (int64_t pos = 0; pos < 15; pos += 5) source.load(order.data() + pos, 5, &b);
      try {
        source.load(order.data() + 15, 5, &b);
        FAIL() << "the missing record went unnoticed";
      } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()), want);
      }
      // The batch after the bad one is still served (on this thread: the plan is gone).
      source.load(order.data() + 20, 5, &b);
      EXPECT_EQ(b.features()[0][0][0].item<float>(), 200.0f);
    }
    // Destroyed with a plan half loaded: stops without hanging.
    source.plan(order, 5);
  }
}

TEST(PrefetchedBatches, TrainsTheSameModelAsItsSourceAndStopsWhenTheStepThrows) {
  Cache c(48);
  auto head = [](uint64_t seed) {
    torch::manual_seed(seed);
    recycle::BlockStack h;
    h->append("flat", torch::nn::AnyModule(torch::nn::Flatten()));
    h->append("fc", torch::nn::AnyModule(torch::nn::Linear(6, 2)));
    return h;
  };
  recycle::TrainHyper hyper;
  hyper.epochs = 2;
  hyper.batch = 8;
  hyper.lr = 0.001;
  hyper.schedule = recycle::Schedule::kConstant;
  CachedBatches plain(*c.store, c.manifest, "train", torch::kCPU);
  recycle::BlockStack a = head(3);
  recycle::train_module(a, plain, hyper, false);
  CachedBatches inner(*c.store, c.manifest, "train", torch::kCPU);
  recycle::BlockStack b = head(3);
  {
    PrefetchedBatches source(inner, 2);
    recycle::train_module(b, source, hyper, false);
    EXPECT_EQ(source.prefetched(), 2 * 6);
  }
  const auto pa = a->parameters(), pb = b->parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i]));

  // A hook that throws mid-epoch: the exception reaches the caller, the thread stops.
  PrefetchedBatches source(inner, 3);
  recycle::Trainer trainer(head(3), hyper);
  trainer.add_after_step_hook([](recycle::Trainer&, int64_t step) {
    if (step == 2) throw std::runtime_error("stop here");
  });
  EXPECT_THROW(trainer.fit(source, recycle::Sampler(48, true, 1), false), std::runtime_error);
}

namespace {

// A source that counts the loads asked of it (from any thread).
class CountingBatches final : public recycle::BatchSource {
 public:
  explicit CountingBatches(recycle::BatchSource& inner) : inner_(inner) {}
  int64_t size() const override { return inner_.size(); }
  void load(const int64_t* indices, int64_t n, Batch* out) override {
    ++loads;
    inner_.load(indices, n, out);
  }
  std::atomic<int64_t> loads{0};

 private:
  recycle::BatchSource& inner_;
};

}  // namespace

// The plan under way, made again before any batch of it was taken, keeps what was loaded
// ahead; Trainer::fit plans the next epoch during the last step of one (each batch of every
// epoch then comes from the queue and is loaded once).
TEST(PrefetchedBatches, KeepsWhatItLoadedWhenThePlanUnderWayIsMadeAgain) {
  Cache c(37);
  CachedBatches inner(*c.store, c.manifest, "train", torch::kCPU);
  CachedBatches reference(*c.store, c.manifest, "train", torch::kCPU);
  CountingBatches counted(inner);
  {
    PrefetchedBatches source(counted, 2);
    const std::vector<int64_t> order = shuffled(37, 0);
    source.plan(order, 5);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (counted.loads < 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_EQ(counted.loads, 2);  // depth 2: two batches ahead, then it waits
    source.plan(order, 5);
    expect_same_batches(source, reference, order, 5);
    EXPECT_EQ(counted.loads, 8);  // ceil(37 / 5): none loaded twice
    EXPECT_EQ(source.prefetched(), 8);
  }
  counted.loads = 0;
  recycle::TrainHyper hyper;
  hyper.epochs = 3;
  hyper.batch = 5;
  hyper.schedule = recycle::Schedule::kConstant;
  recycle::BlockStack h;
  h->append("flat", torch::nn::AnyModule(torch::nn::Flatten()));
  h->append("fc", torch::nn::AnyModule(torch::nn::Linear(6, 2)));
  PrefetchedBatches source(counted, 2);
  recycle::Trainer trainer(h, hyper);
  std::vector<int64_t> at_epoch_end;
  trainer.add_epoch_end_hook([&](recycle::Trainer&, int64_t epoch) {
    // The next epoch's first two batches were planned during this epoch's last step.
    const int64_t want = 8 * (epoch + 1) + (epoch + 1 < hyper.epochs ? 2 : 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (counted.loads < want && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    at_epoch_end.push_back(counted.loads);
  });
  trainer.fit(source, recycle::Sampler(37, true, 1), false);
  EXPECT_EQ(at_epoch_end, (std::vector<int64_t>{10, 18, 24}));
  EXPECT_EQ(counted.loads, 3 * 8);
  EXPECT_EQ(source.prefetched(), 3 * 8);
}

TEST(PrefetchedBatches, RefusesADepthBelowOne) {
  Cache c(4);
  CachedBatches inner(*c.store, c.manifest, "train", torch::kCPU);
  EXPECT_THROW(PrefetchedBatches(inner, 0), std::invalid_argument);
}
