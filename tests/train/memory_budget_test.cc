// How --memory-budget is divided between the batches, a preloaded split, the index and the
// block cache.
#include "engine/train/memory_budget.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

using recycle::MemoryNeeds;
using recycle::MemoryPlan;
using recycle::plan_memory;

namespace {

MemoryNeeds needs(int64_t sample_bytes, int64_t batch, int64_t depth, int64_t preload = 0,
                  int64_t eval_batch = 0, int64_t index_bytes = 0) {
  MemoryNeeds n;
  n.sample_bytes = sample_bytes;
  n.batch = batch;
  n.prefetch_depth = depth;
  n.preload_samples = preload;
  n.eval_batch = eval_batch;
  n.index_bytes = index_bytes;
  return n;
}

}  // namespace

TEST(MemoryBudget, DecodedSampleBytesCountEveryTensorAndTheLabel) {
  recycle::RecordLayout layout = {
      {"activation", recycle::Dtype::kFloat32, {16, 14, 14}, recycle::Codec::kFp16},
      {"mask", recycle::Dtype::kBool, {recycle::kVariableDim}}};
  EXPECT_EQ(recycle::decoded_sample_bytes(layout), 16 * 14 * 14 * 4 + 1 + 8);
}

TEST(MemoryBudget, TheBlockCacheGetsWhatTheBatchesThePreloadAndTheIndexLeave) {
  const int64_t mb = 1 << 20;
  MemoryPlan p = plan_memory(256 * mb, needs(50000, 128, 2));
  EXPECT_EQ(p.queue_bytes, 4 * 128 * 50000);  // depth + 2 batches
  EXPECT_EQ(p.preload_bytes, 0);
  EXPECT_EQ(p.index_bytes, 0);
  EXPECT_EQ(p.block_cache_bytes, 256 * mb - 4 * 128 * 50000);
  p = plan_memory(256 * mb, needs(50000, 128, 0));  // no prefetch: the trainer's batch
  EXPECT_EQ(p.queue_bytes, 128 * 50000);
  p = plan_memory(256 * mb, needs(50000, 128, 0, 0, 256));  // the evaluation's batch is larger
  EXPECT_EQ(p.queue_bytes, 256 * 50000);
  p = plan_memory(256 * mb, needs(50000, 128, 2, 0, 256));  // ... than one, not than four
  EXPECT_EQ(p.queue_bytes, 4 * 128 * 50000);
  p = plan_memory(256 * mb, needs(1000, 100, 2, 10000, 0, 60000 * recycle::kIndexBytesPerSample));
  EXPECT_EQ(p.preload_bytes, 10000 * 1000);
  EXPECT_EQ(p.index_bytes, 60000 * recycle::kIndexBytesPerSample);
  EXPECT_EQ(p.block_cache_bytes,
            256 * mb - 400 * 1000 - 10000 * 1000 - 60000 * recycle::kIndexBytesPerSample);
}

TEST(MemoryBudget, RefusesABudgetTheBatchesThePreloadOrTheIndexDoNotLeaveRoomIn) {
  const int64_t mb = 1 << 20;
  try {
    plan_memory(64 * mb, needs(50000, 1024, 2));  // 4 batches of 1024 are 196 MB
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--memory-budget 64 MB is too small"), std::string::npos)
        << e.what();
  }
  try {
    plan_memory(256 * mb, needs(50000, 128, 2, 60000));  // 3 GB preloaded
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("drop --preload"), std::string::npos) << e.what();
  }
  try {
    plan_memory(64 * mb, needs(1000, 100, 0, 0, 0, 60 * mb));  // an index of 60 MB
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("and 60 MB for the index"), std::string::npos) << e.what();
  }
  try {
    plan_memory(16 * mb, needs(50000, 128, 0, 0, 256));  // 256 samples to evaluate: 12.8 MB
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("13 MB for the evaluation's batch of 256"),
              std::string::npos)
        << e.what();
    // Lowering --batch or --prefetch cannot shrink the evaluation's batch (at least 256).
    EXPECT_NE(std::string(e.what()).find("or pass --eval-split none)"), std::string::npos)
        << e.what();
    EXPECT_EQ(std::string(e.what()).find("lower --batch"), std::string::npos) << e.what();
  }
  EXPECT_THROW(plan_memory(0, needs(1, 1, 2)), std::invalid_argument);
  EXPECT_THROW(plan_memory(64 * mb, needs(1, 1, 0, 0, 0, -1)), std::invalid_argument);
}
