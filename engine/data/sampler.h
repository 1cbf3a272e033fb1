// Sampler: owns the order in which an epoch visits the samples of a split, for one rank of a
// data-parallel job (rank 0 of 1 when training alone). No LibTorch here.
//
// Every rank draws the same global permutation for an epoch (seeded by seed and epoch; no
// communication needed), then rank r takes every world-th position starting at r, as
// PyTorch's DistributedSampler does. The remainder: when the split's size is not a multiple of
// the world size, the permutation is padded with its own first samples until it is, so every
// rank gets ceil(size / world) samples and takes the same number of steps (a few samples are
// seen twice in such an epoch). Alone (world 1) nothing is padded. Thread safe (const).
#pragma once

#include <cstdint>
#include <vector>

namespace recycle {

class Sampler {
 public:
  // Throws std::invalid_argument unless 0 <= rank < world and size >= world.
  Sampler(int64_t size, bool shuffle, uint64_t seed, int rank = 0, int world = 1);

  // The sample indices (into the split, 0..size-1) this rank visits in `epoch`, in order.
  // With draws D > 0 (set_draws), index i of a sample at position p is p + size * d, where
  // d = epoch_view(seed, p, epoch, D) (engine/data/augment.h): which of its D views (or online
  // augmentation's draws) the sample takes this epoch. D consecutive epochs give a sample each
  // d once; the draw depends on the sample and the epoch only, not on the rank.
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  // Views to draw from (0: plain indices, the default). Not thread safe with epoch_order.
  void set_draws(int64_t draws);
  int64_t draws() const { return draws_; }
  // A rank that trains on its own shard of the split (a sharded job: a sampler of world 1 over
  // the shard) takes `samples` indices an epoch, as many on every rank, so that every rank takes
  // the same number of steps: the first `samples` of its shuffled shard when that is fewer than
  // the shard (the rest wait for a later epoch, whose order is another), else the whole order
  // and then the first of it again until there are `samples` (as DistributedSampler pads).
  // Throws std::invalid_argument for samples below 1 or a sampler of world above 1. Not thread
  // safe with epoch_order.
  void set_epoch_samples(int64_t samples);
  // Samples per epoch on this rank: ceil(size / world), or set_epoch_samples'.
  int64_t samples_per_rank() const;
  int64_t size() const { return size_; }
  int rank() const { return rank_; }
  int world() const { return world_; }

 private:
  int64_t size_;
  bool shuffle_;
  uint64_t seed_;
  int rank_;
  int world_;
  int64_t draws_ = 0;
  int64_t epoch_samples_ = 0;  // set_epoch_samples'; 0: none
};

// An epoch's order (a rank's, as epoch_order gives it) grouped by length, as transformers'
// group_by_length (LengthGroupedSampler) groups it: cut into megabatches of 50 batches (fewer
// when the order holds under 4 x 50 batches: order.size() / (4 * batch_size), at least 1), each
// sorted by length, longest first (a stable sort: the order decides among equals), and the
// megabatch with the longest sample moved to the front, its longest sample first, so that a
// batch holds samples of similar length and the largest batch comes first. lengths[i % size]
// is the length of index i (a view's is its sample's). Throws std::invalid_argument for a
// batch_size below 1, or an index outside lengths' multiples.
std::vector<int64_t> grouped_by_length(const std::vector<int64_t>& order,
                                       const std::vector<int64_t>& lengths, int64_t batch_size);

}  // namespace recycle
