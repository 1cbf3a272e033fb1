#include "engine/data/sampler.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

#include "engine/data/augment.h"

namespace recycle {

Sampler::Sampler(int64_t size, bool shuffle, uint64_t seed, int rank, int world)
    : size_(size), shuffle_(shuffle), seed_(seed), rank_(rank), world_(world) {
  if (world < 1 || rank < 0 || rank >= world) {
    throw std::invalid_argument("rank " + std::to_string(rank) + " is outside a world of " +
                                std::to_string(world));
  }
  if (size < world) {
    throw std::invalid_argument("a split of " + std::to_string(size) +
                                " samples cannot be shared by " + std::to_string(world) + " ranks");
  }
}

int64_t Sampler::samples_per_rank() const {
  return epoch_samples_ > 0 ? epoch_samples_ : (size_ + world_ - 1) / world_;
}

void Sampler::set_epoch_samples(int64_t samples) {
  if (world_ != 1) {
    throw std::invalid_argument("a share of " + std::to_string(world_) +
                                " ranks has its samples an epoch: epoch_samples is a rank's own "
                                "shard's");
  }
  if (samples < 1) {
    throw std::invalid_argument("epoch_samples must be at least 1, not " + std::to_string(samples));
  }
  epoch_samples_ = samples;
}

std::vector<int64_t> Sampler::epoch_order(int64_t epoch) const {
  std::vector<int64_t> global(static_cast<size_t>(size_));
  std::iota(global.begin(), global.end(), 0);
  if (shuffle_) {
    std::mt19937_64 rng(seed_ * 1000003 + static_cast<uint64_t>(epoch));
    std::shuffle(global.begin(), global.end(), rng);
  }
  std::vector<int64_t> mine;
  if (world_ == 1) {
    mine = std::move(global);
    if (epoch_samples_ > 0 && epoch_samples_ < size_)
      mine.resize(static_cast<size_t>(epoch_samples_));
    for (int64_t i = size_; i < epoch_samples_; ++i) {
      mine.push_back(mine[static_cast<size_t>(i % size_)]);
    }
  } else {
    const int64_t per_rank = samples_per_rank();
    mine.reserve(static_cast<size_t>(per_rank));
    for (int64_t i = rank_; i < per_rank * world_; i += world_) mine.push_back(global[i % size_]);
  }
  if (draws_ > 0) {
    for (int64_t& i : mine) i += size_ * epoch_view(seed_, i, epoch, draws_);
  }
  return mine;
}

void Sampler::set_draws(int64_t draws) {
  if (draws < 0 || (draws > 0 && size_ > INT64_MAX / draws)) {
    throw std::invalid_argument("a sampler cannot draw " + std::to_string(draws) + " views of " +
                                std::to_string(size_) + " samples");
  }
  draws_ = draws;
}

std::vector<int64_t> grouped_by_length(const std::vector<int64_t>& order,
                                       const std::vector<int64_t>& lengths, int64_t batch_size) {
  if (batch_size < 1) throw std::invalid_argument("batch_size must be at least 1");
  const int64_t size = static_cast<int64_t>(lengths.size());
  for (int64_t i : order) {
    if (i < 0 || size == 0) {
      throw std::invalid_argument("sample index " + std::to_string(i) + " has no length");
    }
  }
  auto length = [&](int64_t i) { return lengths[static_cast<size_t>(i % size)]; };
  const int64_t n = static_cast<int64_t>(order.size());
  const int64_t mult = std::max<int64_t>(1, std::min<int64_t>(50, n / (4 * batch_size)));
  const int64_t mega = mult * batch_size;
  std::vector<int64_t> out(order);
  for (int64_t begin = 0; begin < n; begin += mega) {
    std::stable_sort(out.begin() + begin, out.begin() + std::min(n, begin + mega),
                     [&](int64_t a, int64_t b) { return length(a) > length(b); });
  }
  if (n > 0) {
    // The longest sample heads its megabatch: that megabatch goes first, the rest keep their order.
    int64_t longest = 0;
    for (int64_t m = 0; m < n; m += mega)
      longest = length(out[m]) > length(out[longest]) ? m : longest;
    std::rotate(out.begin(), out.begin() + longest, out.begin() + std::min(n, longest + mega));
  }
  return out;
}

}  // namespace recycle
