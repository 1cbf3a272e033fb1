// WorkQueue: how an asynchronous job's samples are dealt to its workers. No LibTorch here.
//
// The job's work is a stream of epochs; each epoch is one permutation of the split (the
// one-process order of engine/data/sampler.h), cut into chunks of at most `chunk_samples`
// consecutive positions (a chunk never spans two epochs). A worker takes a chunk, trains on it,
// and reports it done when its gradients reach the coordinator's server. Chunks are dealt on
// demand, so a fast worker trains on more of an epoch than a slow one: nobody waits for a
// straggler. A worker may hold a second chunk (to load it ahead) only while at least one
// undealt chunk is left per worker: at the end of the job a chunk waits for nobody's current
// one, and a slow worker ends with at most its current chunk. When a worker is lost, the chunks it
// took and did not finish go back to the head of the queue, so every sample of every epoch is
// trained by somebody (none is skipped, none is counted twice). Thread safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

namespace recycle {

// A piece of an epoch's permutation: positions [start, start + count) of epoch `epoch`.
struct Chunk {
  int64_t id = -1;  // epoch * chunks_per_epoch + index within the epoch
  int64_t epoch = 0;
  int64_t start = 0;
  int64_t count = 0;
};

// What a worker reports with a finished chunk.
struct ChunkTally {
  double loss_sum = 0;  // mean batch loss times batch size, summed
  int64_t correct = 0;
};

// An epoch as the coordinator saw it: trained by whom, how fast, how well.
struct EpochTally {
  int64_t samples = 0;  // done so far (the epoch's size once complete)
  double loss_sum = 0;
  int64_t correct = 0;
  double seconds = 0;   // from the previous epoch's completion (the job's start for the first)
  bool complete = false;
};

class WorkQueue {
 public:
  // Throws std::invalid_argument unless samples_per_epoch, epochs, chunk_samples and workers
  // are >= 1.
  WorkQueue(int64_t samples_per_epoch, int64_t epochs, int64_t chunk_samples, int workers = 1);

  // The next chunk for `worker`: a chunk given back by a lost worker first, else the next one
  // of the stream; nullopt when none is left to deal now (others may still be unfinished), or
  // when `worker` holds a chunk already and fewer undealt chunks are left than workers not
  // lost.
  std::optional<Chunk> take(int worker);
  // `worker` finished chunk `id`. Throws std::invalid_argument when it does not hold it (a
  // chunk given back after its worker was lost is no longer that worker's).
  void done(int worker, int64_t id, const ChunkTally& tally);
  // `worker` is lost: the chunks it holds go back to the head of the queue (and it can take
  // no more). Returns how many samples went back.
  int64_t lose(int worker);

  bool finished() const;   // every chunk of every epoch is done
  bool exhausted() const;  // nothing to deal now: every chunk is done or held
  // Blocks until a chunk can be dealt or everything is finished, at most `timeout`.
  void wait_for_work(std::chrono::milliseconds timeout) const;

  std::vector<EpochTally> epochs() const;
  std::set<int> lost() const;
  int64_t samples_per_epoch() const { return samples_per_epoch_; }
  int64_t chunks_per_epoch() const { return chunks_per_epoch_; }

 private:
  Chunk chunk(int64_t id) const;

  const int64_t samples_per_epoch_;
  const int64_t epochs_;
  const int64_t chunk_samples_;
  const int64_t chunks_per_epoch_;
  const int workers_;
  const std::chrono::steady_clock::time_point start_;

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  int64_t next_ = 0;                      // the stream's next fresh chunk id
  std::set<int64_t> returned_;            // given back by lost workers, dealt first (lowest id)
  std::map<int64_t, int> held_;           // chunk id -> the worker training on it
  std::set<int> lost_;
  int64_t done_chunks_ = 0;
  std::vector<int64_t> epoch_chunks_done_;
  std::vector<EpochTally> epochs_done_;
  std::chrono::steady_clock::time_point last_complete_;
};

}  // namespace recycle
