// Batch sources for training and evaluation: from a cached split (records decoded from
// RocksDB, nothing recomputed) or from raw data (optionally through a frozen prefix).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cache/activation_store.h"
#include "engine/models/block_model.h"
#include "engine/data/dataset.h"

namespace recycle {

// An epoch-wise stream of (inputs, labels) batches. Not thread safe.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual int64_t size() const = 0;
  // Starts an epoch over every sample, shuffled with `seed` when `shuffle`.
  virtual void start_epoch(bool shuffle, uint64_t seed) = 0;
  // The next batch of at most `max` samples: inputs float32 [n, ...], labels int64 [n], both on
  // the source's device. False at the end of the epoch.
  virtual bool next(int64_t max, torch::Tensor* inputs, torch::Tensor* labels) = 0;
};

// Common ordering logic: a permutation of 0..size-1 and a cursor.
class OrderedSource : public BatchSource {
 public:
  void start_epoch(bool shuffle, uint64_t seed) override;
  bool next(int64_t max, torch::Tensor* inputs, torch::Tensor* labels) override;

 protected:
  // Fills the batch for samples `indices[0..n)`.
  virtual void load(const int64_t* indices, int64_t n, torch::Tensor* inputs,
                    torch::Tensor* labels) = 0;
  std::vector<int64_t> order_;
  size_t cursor_ = 0;
};

// A split of an activation cache. Throws std::runtime_error naming the key when a record is
// missing, corrupt (checksum, header) or of another shape than the manifest says.
class CachedBatches final : public OrderedSource {
 public:
  CachedBatches(const ActivationStore& store, const Manifest& manifest, const std::string& split,
                const torch::Device& device);
  int64_t size() const override { return static_cast<int64_t>(entries_.size()); }

 private:
  void load(const int64_t* indices, int64_t n, torch::Tensor* inputs,
            torch::Tensor* labels) override;
  const ActivationStore& store_;
  std::vector<IndexEntry> entries_;
  std::vector<int64_t> record_shape_;
  int64_t record_numel_ = 1;
  torch::Device device_;
};

// Images of a dataset, preprocessed, then through `prefix` (no grad, eval mode) when it has
// blocks. The prefix is recomputed for every batch: freezing without recycling.
class RawBatches final : public OrderedSource {
 public:
  RawBatches(const Dataset& data, BlockStack prefix, const torch::Device& device);
  int64_t size() const override { return static_cast<int64_t>(data_.size()); }

 private:
  void load(const int64_t* indices, int64_t n, torch::Tensor* inputs,
            torch::Tensor* labels) override;
  const Dataset& data_;
  BlockStack prefix_;
  torch::Device device_;
};

}  // namespace recycle
