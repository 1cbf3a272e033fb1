// PreloadedBatches: a whole split decoded once into memory, then served from there: for caches
// small enough to hold (recycle-train --preload), and as the yardstick that loading from the
// cache is measured against (issue 10: a head epoch from the cache >= 0.97x one from memory).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/train/batch.h"
#include "engine/train/batch_sources.h"

namespace recycle {

// Bytes a batch of `n` samples of `source` takes (its inputs and labels), from one sample.
int64_t batch_bytes(BatchSource& source, int64_t n);

class PreloadedBatches final : public BatchSource {
 public:
  // Loads samples 0..size()-1 of `source`, `chunk` at a time. Throws std::runtime_error when
  // the samples do not all have one shape (a variable layout), and what `source` throws.
  explicit PreloadedBatches(BatchSource& source, int64_t chunk = 1024);
  int64_t size() const override { return labels_.size(0); }
  // Gathers the rows into the tensors `out` holds when nothing else refers to them.
  void load(const int64_t* indices, int64_t n, Batch* out) override;
  // Bytes held: every input and the labels.
  int64_t bytes() const;

 private:
  std::vector<std::pair<std::string, torch::Tensor>> inputs_;  // [size, ...]
  torch::Tensor labels_;                                       // int64 [size]
};

}  // namespace recycle
