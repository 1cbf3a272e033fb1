// Batch sources for training and evaluation: random access to the samples of a split, a batch
// at a time, from a cached split (records decoded from RocksDB, nothing recomputed) or from raw
// data (optionally through a frozen prefix). The order of an epoch is not theirs: a Sampler
// (engine/data/sampler.h) owns it, and the trainer asks a source for the samples it names.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cache/activation_store.h"
#include "cache/record.h"
#include "engine/data/augment.h"
#include "engine/data/dataset.h"
#include "engine/models/block_model.h"
#include "engine/train/batch.h"

namespace recycle {

// The LibTorch dtype of a record tensor's dtype.
torch::ScalarType torch_dtype(Dtype dtype);
// Decodes one record tensor into `out`: numel() values of its dtype (float32 from its codec,
// the others exactly).
void decode_into(const RecordTensor& t, void* out);
// [n, ...the largest of each dimension over the samples], zeros, with samples[i] copied to the
// start of row i: a batch of records that vary in shape (as long as the text).
torch::Tensor pad_and_stack(const std::vector<torch::Tensor>& samples, torch::ScalarType dtype);
// Throws what went wrong reading records of cache `dir` with one MultiGet: the record that could
// not be decoded (`error`), else the first of its `statuses` that is not ok (`keys`: the ones
// read; a missing record is a corrupt index).
void throw_if_part_failed(const std::string& dir, const std::string& error,
                          const std::vector<Status>& statuses, const Key* keys);

// Samples 0..size()-1 of a split, loaded a batch at a time. Not thread safe.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual int64_t size() const = 0;
  // Fills `out` with samples indices[0..n) in that order: inputs with the batch as dimension 0,
  // labels int64 [n], on the source's device.
  // A source may reuse the tensors `out` already holds when nothing else refers to them (use
  // count 1), so a caller that keeps a batch's tensors past the next load keeps them whole.
  virtual void load(const int64_t* indices, int64_t n, Batch* out) = 0;
  // The order the next loads follow: order[0..batch), order[batch..2 batch), ... (the last one
  // shorter). A hint: a source may load ahead (see engine/train/prefetch.h); loads that do
  // not follow it are still served, in the order asked.
  virtual void plan(const std::vector<int64_t>& /*order*/, int64_t /*batch*/) {}
  // Sample `index` (an index load takes) and where its values came from, as one clause: what
  // the trainer's message says when a step's loss is not finite because that sample's inputs
  // are not (Trainer::fit, why_not_finite). "sample 12" here; a cached split names the record
  // and says to rebuild the cache. A source over another forwards to it.
  virtual std::string explain_non_finite(int64_t index) const {
    return "sample " + std::to_string(index);
  }
};

// A split of an activation cache. Every tensor of the cache's record layout becomes a batch
// input of the same name and dtype (float32 decoded from its codec; int64, int32, uint8 and
// bool exact), [n, ...per-sample shape]. Variable dimensions are padded at batch time, with
// zeros (false), to the largest size in the batch. Throws std::runtime_error naming the key
// when a record is missing, corrupt (checksum, header) or does not fit the layout.
// `format`: the memory format of 4-D float32 inputs of a fixed layout ([n, C, H, W] records
// [C, H, W]). ChannelsLast decodes each record straight into its sample's place in an NHWC
// batch, so the trainer's channels-last module takes the batch as it is (no conversion on the
// training thread; with PrefetchedBatches the decode runs on the loading thread).
// A split with K views (SplitInfo::views): size() is its samples, and load also takes indices
// p + size() * v (v < K: the sample at p, its view v, as a Sampler with set_draws(K) gives
// them), reading the record under view_key(key, augment, v); a plain index p reads view 0.
class CachedBatches final : public BatchSource {
 public:
  CachedBatches(const ActivationStore& store, const Manifest& manifest, const std::string& split,
                const torch::Device& device,
                c10::MemoryFormat format = c10::MemoryFormat::Contiguous);
  int64_t size() const override { return static_cast<int64_t>(entries_.size()); }
  void load(const int64_t* indices, int64_t n, Batch* out) override;
  // "sample 12 of split 'train' (record KEY) of cache DIR, ...: rebuild it": values that are
  // not finite in a record were stored by a version of recycle that did not refuse them.
  std::string explain_non_finite(int64_t index) const override;
  // Loads split a batch into up to `threads` parts, each read (MultiGet) and decoded into its
  // rows by a thread of ATen's team (at::parallel_for) on the calling thread. Default 1: one
  // part, no team (what a background loader such as PrefetchedBatches wants, so as not to start
  // a second OpenMP team beside the training thread's).
  void set_load_threads(int64_t threads) { load_threads_ = std::max<int64_t>(1, threads); }
  // Decodes into page-locked host memory (LibTorch's caching host allocator), a new block for
  // every batch (the allocator hands a block out again only after the copies that read it have
  // finished), so that a copy to a GPU is asynchronous: what a loader for a GPU wants. On by
  // itself for a CUDA device, whose batches are then copied with non_blocking. Throws
  // std::invalid_argument where no GPU is usable (a LibTorch without CUDA, or no GPU).
  void set_pinned(bool pinned);
  // Keeps the float32 tensors of a compact codec (fp16, bf16, int8) in their records' codes on
  // the host, copied out of the records without decoding, and widens them on the batch's
  // device (engine/train/compact_batch.h): half or a quarter of the bytes cross the bus. On by
  // itself for a CUDA device; on the CPU device it gives the host decode's values (what its
  // tests check). Fixed layouts only: a variable one (text) decodes on the host.
  void set_device_decode(bool on) { device_decode_ = on; }
  bool device_decode() const { return device_decode_; }
  const torch::Device& device() const { return device_; }

 private:
  // Scratch of one part of a batch, reused from batch to batch: no allocation per sample on a
  // fixed layout.
  struct Part {
    std::vector<float> sample;  // one record decoded in [C, H, W] order, before it goes NHWC
    std::vector<RecordTensor> tensors;
    std::vector<Status> statuses;
    std::string error;  // the first record of the part that could not be decoded
  };
  bool channels_last(size_t j) const;  // layout_[j] is decoded into NHWC batches
  bool compact(size_t j) const;        // layout_[j] is widened on the device (set_device_decode)

  const ActivationStore& store_;
  std::vector<IndexEntry> entries_;
  std::string split_name_;
  SplitInfo split_;  // its views and augmentation
  RecordLayout layout_;
  bool variable_ = false;  // some dimension is variable: decode per sample, then pad
  torch::Device device_;
  c10::MemoryFormat format_;
  int64_t load_threads_ = 1;
  bool pinned_ = false;
  bool device_decode_ = false;
  std::vector<Key> keys_;  // of the batch being loaded
  std::vector<Part> parts_;
};

// Images of a dataset, preprocessed, then through `prefix` (no grad, eval mode) when it has
// blocks. The prefix is recomputed for every batch: freezing without recycling. Its input is
// named "input" (float32 [n, ...]).
// With an augmentation (online augmentation: uint8 images only), index p + size() * d is the
// sample at p augmented with the draw seeded by (seed, p, d), as a Sampler with set_draws gives
// them: a new view in every epoch, made on the loading thread.
class RawBatches final : public BatchSource {
 public:
  RawBatches(const Dataset& data, BlockStack prefix, const torch::Device& device);
  RawBatches(const Dataset& data, BlockStack prefix, const torch::Device& device, Augment augment,
             uint64_t seed);
  int64_t size() const override { return static_cast<int64_t>(data_.size()); }
  void load(const int64_t* indices, int64_t n, Batch* out) override;

 private:
  const Dataset& data_;
  BlockStack prefix_;
  torch::Device device_;
  Augment augment_;
  uint64_t seed_ = 0;
  Dataset views_;  // scratch: a batch's augmented images
};

}  // namespace recycle
