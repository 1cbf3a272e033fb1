// Batch sources for text (engine/models/transformer.h describes the tensors). Padding happens
// here, when a batch is assembled, never in storage. Not thread safe.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/models/block_model.h"
#include "engine/train/batch_sources.h"

namespace recycle {

// A text cache's batches as a head takes them: `source` gives "hidden" float32 [n, L, D]
// (padded with zeros to the batch's longest) and "length" int64 [n] (CachedBatches over a
// cache of text_record_layout, directly or through PrefetchedBatches); this gives one input,
// "features", the packed text features [n, L, D + 1] whose mask comes from the lengths.
// Throws std::runtime_error when the source's batch lacks those inputs or a length is not in
// 1..L. `source` must outlive this.
class TextFeatureBatches final : public BatchSource {
 public:
  explicit TextFeatureBatches(BatchSource& source) : source_(source) {}
  int64_t size() const override { return source_.size(); }
  void load(const int64_t* indices, int64_t n, Batch* out) override;
  void plan(const std::vector<int64_t>& order, int64_t batch) override {
    source_.plan(order, batch);
  }
  std::string explain_non_finite(int64_t index) const override {
    return source_.explain_non_finite(index);
  }

 private:
  BatchSource& source_;
};

// Texts of a dataset as byte tokens (int64 [n, L], padded with 0 to the batch's longest, each
// text cut to max_tokens), then through `prefix` (no grad, eval mode) when it has blocks: full
// fine-tuning (an empty prefix) or freezing without recycling. The input is named "input".
// The texts are read as they are (no keyer normalisation: there is no keyer here).
class RawTextBatches final : public BatchSource {
 public:
  RawTextBatches(const Dataset& data, BlockStack prefix, int64_t max_tokens,
                 const torch::Device& device);
  int64_t size() const override { return static_cast<int64_t>(data_.size()); }
  void load(const int64_t* indices, int64_t n, Batch* out) override;

 private:
  const Dataset& data_;
  BlockStack prefix_;
  int64_t max_tokens_;
  torch::Device device_;
};

}  // namespace recycle
