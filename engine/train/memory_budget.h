// How recycle-train divides its memory budget (--memory-budget): the batches the prefetch queue
// holds, with --preload the decoded split, and the index of the samples (entries, epoch orders,
// RocksDB's table readers) come first; RocksDB's block cache gets the rest.
// What the budget does not cover: LibTorch and the model (parameters, gradients, optimizer
// state, the step's activations). No LibTorch here; pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cache/record_layout.h"
#include "recycle/train.h"  // MemoryPlan

namespace recycle {

// Smallest block cache a budget may leave: below this RocksDB re-reads every block.
constexpr int64_t kMinBlockCacheBytes = 8 << 20;

// Bytes the trainer holds for each sample of a split it reads from a cache, whatever the
// record: its index entry (key and label, 24 bytes) and its place in the epoch's order and in
// the next one's (8 bytes each).
constexpr int64_t kIndexBytesPerSample = 40;

// Bytes one decoded sample takes in a batch: every tensor of the layout (float32 decoded at 4
// bytes a value, whatever its codec; a variable dimension counted as 1) and its int64 label.
int64_t decoded_sample_bytes(const RecordLayout& layout);

// What a run from a cache needs beside the block cache.
struct MemoryNeeds {
  int64_t sample_bytes = 0;     // decoded_sample_bytes of the cache's layout
  int64_t batch = 0;            // --batch
  int64_t prefetch_depth = 0;   // batches loaded ahead (0: loaded when the trainer asks)
  int64_t preload_samples = 0;  // samples decoded into memory (--preload), else 0
  int64_t eval_batch = 0;       // the evaluation's batch, loaded after training's are gone
                                // (at most the evaluated split's samples)
  // The samples the run indexes (the training split and the evaluated one) times
  // kIndexBytesPerSample, plus RocksDB's table readers (ActivationStore::table_readers_bytes).
  int64_t index_bytes = 0;
};

// Divides `budget_bytes`. The batches held: prefetch_depth + 2 (the queue, the one being
// loaded, the trainer's) or 1 without prefetch (depth 0), or the one of eval_batch samples
// when that is more. Throws std::invalid_argument, one line with the figures and the flags
// that would help, when the rest leaves less than kMinBlockCacheBytes.
MemoryPlan plan_memory(int64_t budget_bytes, const MemoryNeeds& needs);

}  // namespace recycle
