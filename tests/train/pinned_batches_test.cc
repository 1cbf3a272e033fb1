// Cached batches for a GPU (engine/train/batch_sources.h, CachedBatches::set_pinned and a CUDA
// device): decoded into page-locked host memory and copied with non_blocking, through a
// background loader too. The refusal runs everywhere; the rest needs a GPU (GpuBatches.*, run
// by scripts/device_check.sh) and is skipped on these CI machines.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "engine/train/batch_sources.h"
#include "engine/train/prefetch.h"
#include "tests/test_util.h"
#include "tests/train/small_cache.h"

namespace {

using recycle::Batch;
using recycle::CachedBatches;
using recycle::testing::TempDir;

struct Cache {
  TempDir tmp;
  std::unique_ptr<recycle::ActivationStore> store;
  recycle::Manifest manifest;
  explicit Cache(int n) : store(recycle::testing::write_small_cache(tmp.file("cache"), n)) {
    EXPECT_OK(store->read_manifest(&manifest));
  }
};

TEST(PinnedBatches, AreRefusedInOneLineWhereNoGpuIs) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a GPU is usable here";
  Cache c(8);
  CachedBatches batches(*c.store, c.manifest, "train", torch::kCPU);
  EXPECT_EQ(recycle::testing::error_of([&] { batches.set_pinned(true); }),
            "pinned host memory needs a GPU, and this process has none (a LibTorch without CUDA, "
            "or no GPU visible)");
  batches.set_pinned(false);  // what every CPU loader has
}

TEST(GpuBatches, PinnedOnTheHostAndOnTheGpuTheyHoldTheCpusBatches) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU is usable here";
  Cache c(37);
  CachedBatches cpu(*c.store, c.manifest, "train", torch::kCPU);
  CachedBatches pinned(*c.store, c.manifest, "train", torch::kCPU);
  pinned.set_pinned(true);
  CachedBatches gpu(*c.store, c.manifest, "train", torch::Device(torch::kCUDA, 0));
  CachedBatches gpu_inner(*c.store, c.manifest, "train", torch::Device(torch::kCUDA, 0));
  recycle::PrefetchedBatches ahead(gpu_inner, 2);
  std::vector<int64_t> order(37);
  std::iota(order.begin(), order.end(), 0);
  std::reverse(order.begin(), order.end());
  ahead.plan(order, 5);
  Batch want, host, direct, loaded;
  for (size_t pos = 0; pos < order.size(); pos += 5) {
    const int64_t n = std::min<int64_t>(5, static_cast<int64_t>(order.size() - pos));
    cpu.load(order.data() + pos, n, &want);
    pinned.load(order.data() + pos, n, &host);
    gpu.load(order.data() + pos, n, &direct);
    ahead.load(order.data() + pos, n, &loaded);
    ASSERT_TRUE(host.features().is_pinned() && host.labels.is_pinned());
    ASSERT_TRUE(torch::equal(host.features(), want.features()));
    for (const Batch* b : {&direct, &loaded}) {
      ASSERT_TRUE(b->features().is_cuda() && b->labels.is_cuda());
      ASSERT_TRUE(torch::equal(b->features().cpu(), want.features())) << "batch at " << pos;
      ASSERT_TRUE(torch::equal(b->labels.cpu(), want.labels)) << "batch at " << pos;
    }
  }
}

}  // namespace
