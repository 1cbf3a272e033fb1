// PreloadedBatches: a whole split decoded once into memory, then served from there: for caches
// small enough to hold (recycle-train --preload), and as the yardstick that loading from the
// cache is measured against (the goal: a head epoch from the cache >= 0.97x one from memory).
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
  // explain_non_finite asks `source`, which must outlive this for it.
  explicit PreloadedBatches(BatchSource& source, int64_t chunk = 1024);
  int64_t size() const override { return labels_.size(0); }
  // Gathers the rows into the tensors `out` holds when nothing else refers to them.
  void load(const int64_t* indices, int64_t n, Batch* out) override;
  // Bytes held: every input and the labels.
  int64_t bytes() const;
  std::string explain_non_finite(int64_t index) const override {
    return source_.explain_non_finite(index);
  }

 private:
  const BatchSource& source_;
  std::vector<std::pair<std::string, torch::Tensor>> inputs_;  // [size, ...]
  torch::Tensor labels_;                                       // int64 [size]
};

// Epochs (from 0) in the order first, second, second, first, then again: epochs 0, 3, 4, 7,
// 8, ... are served by `first`, 1, 2, 5, 6, ... by `second`. Each group of four is symmetric in
// time, so a machine that speeds up or slows down steadily moves both sides alike (with plain
// turns, `first` would always run before `second`). The trainer's epoch-start hook calls
// select(e). Plans and loads go to the selected source only, so one that loads ahead
// (PrefetchedBatches) does no work in the other's epochs. The plan of the next epoch, which
// the trainer makes during an epoch's last step, goes to that epoch's source: a first source
// that loads ahead then loads a few batches behind its own last step that the second's epoch
// does not use, and its epoch after one of the second's starts with nothing loaded ahead
// (both cost `first`, not `second`). Both must hold the same samples in the same order
// (std::invalid_argument when their sizes differ).
class AlternatingBatches final : public BatchSource {
 public:
  AlternatingBatches(BatchSource& first, BatchSource& second);
  int64_t size() const override { return first_.size(); }
  void select(int64_t epoch) {
    const int64_t phase = epoch % 4;
    current_ = phase == 1 || phase == 2 ? &second_ : &first_;
    selected_.push_back(current_ == &second_);
  }
  void load(const int64_t* indices, int64_t n, Batch* out) override {
    current_->load(indices, n, out);
  }
  void plan(const std::vector<int64_t>& order, int64_t batch) override {
    current_->plan(order, batch);
  }
  std::string explain_non_finite(int64_t index) const override {
    return current_->explain_non_finite(index);
  }
  // Per select(), in order: whether it chose `second`.
  const std::vector<bool>& selected() const { return selected_; }

 private:
  BatchSource& first_;
  BatchSource& second_;
  BatchSource* current_;
  std::vector<bool> selected_;
};

}  // namespace recycle
