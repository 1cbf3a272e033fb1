// How recycle-train divides its memory budget (--memory-budget): the batches the prefetch queue
// holds and, with --preload, the decoded split come first; RocksDB's block cache gets the rest.
// What the budget does not cover: LibTorch and the model (parameters, gradients, optimizer
// state, the step's activations), the split's index (24 bytes a sample) and RocksDB's table
// readers. No LibTorch here; pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cache/record_layout.h"

namespace recycle {

// Smallest block cache a budget may leave: below this RocksDB re-reads every block.
constexpr int64_t kMinBlockCacheBytes = 8 << 20;

// Bytes one decoded sample takes in a batch: every tensor of the layout (float32 decoded at 4
// bytes a value, whatever its codec; a variable dimension counted as 1) and its int64 label.
int64_t decoded_sample_bytes(const RecordLayout& layout);

struct MemoryPlan {
  int64_t queue_bytes = 0;        // batches held by the prefetch queue and the trainer
  int64_t preload_bytes = 0;      // the decoded split (--preload), else 0
  int64_t block_cache_bytes = 0;  // the rest of the budget
};

// Divides `budget_bytes`. The batches held: prefetch_depth + 2 (the queue, the one being
// loaded, the trainer's) or 1 without prefetch (depth 0). preload_samples: samples decoded into
// memory (0: none). Throws std::invalid_argument, one line with the figures, when the batches
// and the preloaded split leave less than kMinBlockCacheBytes.
MemoryPlan plan_memory(int64_t budget_bytes, int64_t sample_bytes, int64_t batch,
                       int64_t prefetch_depth, int64_t preload_samples);

}  // namespace recycle
