// How --memory-budget is divided between the batches, a preloaded split and the block cache.
#include "engine/train/memory_budget.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

using recycle::MemoryPlan;
using recycle::plan_memory;

TEST(MemoryBudget, DecodedSampleBytesCountEveryTensorAndTheLabel) {
  recycle::RecordLayout layout = {{"activation", recycle::Dtype::kFloat32, {16, 14, 14}, "fp16"},
                                  {"mask", recycle::Dtype::kBool, {recycle::kVariableDim}, "raw"}};
  EXPECT_EQ(recycle::decoded_sample_bytes(layout), 16 * 14 * 14 * 4 + 1 + 8);
}

TEST(MemoryBudget, TheBlockCacheGetsWhatTheBatchesLeave) {
  const int64_t mb = 1 << 20;
  MemoryPlan p = plan_memory(256 * mb, 50000, 128, 2, 0);
  EXPECT_EQ(p.queue_bytes, 4 * 128 * 50000);  // depth + 2 batches
  EXPECT_EQ(p.preload_bytes, 0);
  EXPECT_EQ(p.block_cache_bytes, 256 * mb - 4 * 128 * 50000);
  p = plan_memory(256 * mb, 50000, 128, 0, 0);  // no prefetch: the trainer's batch
  EXPECT_EQ(p.queue_bytes, 128 * 50000);
  p = plan_memory(256 * mb, 1000, 100, 2, 10000);
  EXPECT_EQ(p.preload_bytes, 10000 * 1000);
  EXPECT_EQ(p.block_cache_bytes, 256 * mb - 400 * 1000 - 10000 * 1000);
}

TEST(MemoryBudget, RefusesABudgetTheBatchesOrThePreloadDoNotLeaveRoomIn) {
  const int64_t mb = 1 << 20;
  try {
    plan_memory(64 * mb, 50000, 1024, 2, 0);  // 4 batches of 1024 are 196 MB
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--memory-budget 64 MB is too small"), std::string::npos)
        << e.what();
  }
  try {
    plan_memory(256 * mb, 50000, 128, 2, 60000);  // 3 GB preloaded
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("drop --preload"), std::string::npos) << e.what();
  }
  EXPECT_THROW(plan_memory(0, 1, 1, 2, 0), std::invalid_argument);
}
