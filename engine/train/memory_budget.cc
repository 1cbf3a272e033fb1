#include "engine/train/memory_budget.h"

#include <stdexcept>
#include <string>

#include "cache/record.h"

namespace recycle {

namespace {

std::string mb(int64_t bytes) {
  return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MB";
}

}  // namespace

int64_t decoded_sample_bytes(const RecordLayout& layout) {
  int64_t bytes = 8;  // the label
  for (const TensorLayout& t : layout) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d == kVariableDim ? 1 : d;
    bytes += n * static_cast<int64_t>(dtype_value_bytes(t.dtype));
  }
  return bytes;
}

MemoryPlan plan_memory(int64_t budget_bytes, const MemoryNeeds& needs) {
  if (budget_bytes <= 0 || needs.sample_bytes <= 0 || needs.batch <= 0 ||
      needs.prefetch_depth < 0 || needs.preload_samples < 0 || needs.eval_batch < 0 ||
      needs.index_bytes < 0) {
    throw std::invalid_argument("plan_memory: budget, sample bytes and batch must be positive, "
                                "the other needs not negative");
  }
  MemoryPlan p;
  const int64_t held = needs.prefetch_depth > 0 ? needs.prefetch_depth + 2 : 1;
  const bool eval_larger = needs.eval_batch > held * needs.batch;
  p.queue_bytes = (eval_larger ? needs.eval_batch : held * needs.batch) * needs.sample_bytes;
  p.preload_bytes = needs.preload_samples * needs.sample_bytes;
  p.index_bytes = needs.index_bytes;
  p.block_cache_bytes = budget_bytes - p.queue_bytes - p.preload_bytes - p.index_bytes;
  if (p.block_cache_bytes < kMinBlockCacheBytes) {
    std::string what =
        mb(p.queue_bytes) + " for " +
        (eval_larger ? "the evaluation's batch of " + std::to_string(needs.eval_batch)
                     : std::to_string(held) + " batches of " + std::to_string(needs.batch));
    if (needs.preload_samples > 0) {
      what += ", " + mb(p.preload_bytes) + " for the " + std::to_string(needs.preload_samples) +
              " preloaded samples";
    }
    what += " and " + mb(p.index_bytes) + " for the index";
    throw std::invalid_argument("--memory-budget " + mb(budget_bytes) + " is too small: " + what +
                                " leave less than the " + mb(kMinBlockCacheBytes) +
                                " block cache it needs (raise --memory-budget" +
                                (needs.preload_samples > 0 ? ", or drop --preload)"
                                 : eval_larger ? ", or pass --eval-split none)"
                                               : ", or lower --batch or --prefetch)"));
  }
  return p;
}

}  // namespace recycle
