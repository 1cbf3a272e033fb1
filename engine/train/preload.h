// PreloadedBatches: a whole split decoded once into memory, then served from there: for caches
// small enough to hold (recycle-train --preload), and as the yardstick that loading from the
// cache is measured against (issue 10: a head epoch from the cache >= 0.97x one from memory).
// AlternatingBatches: two sources of the same samples taking turns epoch by epoch, so that
// the two are timed within one run (recycle-train --alternate-preload).
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

// Epoch e (from 0) is served by `even` when e is even, by `odd` when it is odd: the trainer's
// epoch-start hook calls select(e). Plans and loads go to the selected source only, so one
// that loads ahead (PrefetchedBatches) does no work in the other's epochs. Both must hold
// the same samples in the same order (std::invalid_argument when their sizes differ).
class AlternatingBatches final : public BatchSource {
 public:
  AlternatingBatches(BatchSource& even, BatchSource& odd);
  int64_t size() const override { return even_.size(); }
  void select(int64_t epoch) {
    current_ = epoch % 2 == 0 ? &even_ : &odd_;
    selected_.push_back(current_ == &odd_);
  }
  void load(const int64_t* indices, int64_t n, Batch* out) override { current_->load(indices, n, out); }
  void plan(const std::vector<int64_t>& order, int64_t batch) override { current_->plan(order, batch); }
  // Per select(), in order: whether it chose `odd`.
  const std::vector<bool>& selected() const { return selected_; }

 private:
  BatchSource& even_;
  BatchSource& odd_;
  BatchSource* current_;
  std::vector<bool> selected_;
};

}  // namespace recycle
