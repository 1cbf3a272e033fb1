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
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  // Samples per epoch on this rank: ceil(size / world).
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
};

}  // namespace recycle
