#include "engine/distributed/work_queue.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace recycle {

WorkQueue::WorkQueue(int64_t samples_per_epoch, int64_t epochs, int64_t chunk_samples,
                     int workers)
    : samples_per_epoch_(samples_per_epoch),
      epochs_(epochs),
      chunk_samples_(chunk_samples),
      chunks_per_epoch_(chunk_samples > 0 ? (samples_per_epoch + chunk_samples - 1) / chunk_samples
                                          : 0),
      workers_(workers),
      start_(std::chrono::steady_clock::now()),
      last_complete_(start_) {
  if (samples_per_epoch < 1 || epochs < 1 || chunk_samples < 1 || workers < 1) {
    throw std::invalid_argument(
        "a work queue needs samples, epochs, a chunk size and workers, 1 or more each");
  }
  epoch_chunks_done_.assign(static_cast<size_t>(epochs), 0);
  epochs_done_.assign(static_cast<size_t>(epochs), EpochTally{});
}

Chunk WorkQueue::chunk(int64_t id) const {
  Chunk c;
  c.id = id;
  c.epoch = id / chunks_per_epoch_;
  c.start = (id % chunks_per_epoch_) * chunk_samples_;
  c.count = std::min(chunk_samples_, samples_per_epoch_ - c.start);
  return c;
}

std::optional<Chunk> WorkQueue::take(int worker) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (lost_.count(worker)) return std::nullopt;
  const int64_t undealt =
      static_cast<int64_t>(returned_.size()) + chunks_per_epoch_ * epochs_ - next_;
  const int64_t active = workers_ - static_cast<int64_t>(lost_.size());
  if (undealt < active) {
    for (const auto& [id, holder] : held_) {
      if (holder == worker) return std::nullopt;  // the last chunks go to idle workers
    }
  }
  int64_t id = -1;
  if (!returned_.empty()) {
    id = *returned_.begin();
    returned_.erase(returned_.begin());
  } else if (next_ < chunks_per_epoch_ * epochs_) {
    id = next_++;
  } else {
    return std::nullopt;
  }
  held_[id] = worker;
  return chunk(id);
}

void WorkQueue::done(int worker, int64_t id, const ChunkTally& tally) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = held_.find(id);
  if (it == held_.end() || it->second != worker) {
    throw std::invalid_argument("worker " + std::to_string(worker) + " reported chunk " +
                                std::to_string(id) + ", which it does not hold");
  }
  held_.erase(it);
  const Chunk c = chunk(id);
  EpochTally& e = epochs_done_[static_cast<size_t>(c.epoch)];
  e.samples += c.count;
  e.loss_sum += tally.loss_sum;
  e.correct += tally.correct;
  ++done_chunks_;
  if (++epoch_chunks_done_[static_cast<size_t>(c.epoch)] == chunks_per_epoch_) {
    // Epochs overlap at their edges (a chunk given back may finish after the next epoch's
    // first ones); an epoch's time runs from the completion of the last epoch before it.
    const auto now = std::chrono::steady_clock::now();
    e.complete = true;
    e.seconds = std::chrono::duration<double>(now - last_complete_).count();
    last_complete_ = now;
  }
  changed_.notify_all();
}

int64_t WorkQueue::lose(int worker) {
  std::lock_guard<std::mutex> lock(mutex_);
  lost_.insert(worker);
  int64_t samples = 0;
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->second != worker) {
      ++it;
      continue;
    }
    returned_.insert(it->first);
    samples += chunk(it->first).count;
    it = held_.erase(it);
  }
  changed_.notify_all();
  return samples;
}

bool WorkQueue::finished() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_chunks_ == chunks_per_epoch_ * epochs_;
}

bool WorkQueue::exhausted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return returned_.empty() && next_ == chunks_per_epoch_ * epochs_;
}

void WorkQueue::wait_for_work(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [&] {
    return !returned_.empty() || next_ < chunks_per_epoch_ * epochs_ ||
           done_chunks_ == chunks_per_epoch_ * epochs_;
  });
}

std::vector<EpochTally> WorkQueue::epochs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return epochs_done_;
}

std::set<int> WorkQueue::lost() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lost_;
}

}  // namespace recycle
