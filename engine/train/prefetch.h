// PrefetchedBatches: a BatchSource that loads the next batches of an epoch on a background
// thread while the training thread computes, so reading and decoding hide behind the step.
//
// Told the epoch's order and batch size (BatchSource::plan, which Trainer::fit calls at the
// start of every epoch), one background thread loads batch i+1, i+2, ... up to `depth` ahead
// into a bounded queue; load() takes the next one, swapping its tensors into the caller's
// Batch. The tensors the caller's Batch held go back to a free list and are decoded into
// again (the inner source reuses a Batch's tensors when nothing else refers to them), so an
// epoch allocates no new batch memory once it runs. Planning the plan under way again before
// any of its batches was taken keeps what was loaded ahead: Trainer::fit plans the next
// epoch during the last step of an epoch, so its first batches load behind that step. A load that
// does not follow the plan (other indices, another size, no plan) cancels it and is served on the
// calling thread.
//
// Errors: an exception the inner source throws on the background thread (a missing or corrupt
// record) is thrown again, the same object, by the load() that asks for that batch; loading
// ahead stops there until the next plan. Destroying the source (after an exception anywhere,
// too) stops the thread and waits for the batch it is loading, never longer.
//
// On a GPU (`device` CUDA) the thread's copies to the device go on a side stream of its own
// (engine/models/device_streams.h), so that they run beside the step's kernels; each batch
// carries an event recorded after its copies, and load() makes the caller's current stream
// wait for it (the caller's thread never waits) and tells the caching allocator the caller's
// stream uses the batch's memory.
//
// The thread never drops a tensor another owner may share: a buffer of the caller's that is
// still referred to when the thread would load into it (a batch the caller handed on and keeps,
// a Python tensor) is set aside and dropped by the caller's thread (its next load or plan, or
// the destructor), and the thread decodes into a new one. Under torch 2.x dropping a reference
// to a tensor that has a Python object decrefs that object and takes the GIL: a loading thread
// that waited for the GIL while the interpreter exits (or while its owner holds the GIL and
// joins it) aborted the process ("terminate called without an active exception").
//
// Planning again at any point (a new epoch while the thread loads ahead for the last one: two
// Python iterators of one loader, say) stops the plan under way: it waits until the thread is
// idle, drops what it loaded ahead and starts the new plan.
//
// Memory: at most depth + 2 batches (the queue, the one being loaded, the caller's) are held,
// and the caller's tensors set aside until its next call.
// Not thread safe (one training thread); the inner source is only ever used by one thread at a
// time.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/models/device_streams.h"
#include "engine/train/batch.h"
#include "engine/train/batch_sources.h"

namespace recycle {

class PrefetchedBatches final : public BatchSource {
 public:
  // depth: batches loaded ahead, >= 1 (throws std::invalid_argument otherwise); `device`: the
  // inner source's.
  PrefetchedBatches(BatchSource& inner, int64_t depth, c10::Device device = c10::Device(c10::kCPU));
  ~PrefetchedBatches() override;
  PrefetchedBatches(const PrefetchedBatches&) = delete;
  PrefetchedBatches& operator=(const PrefetchedBatches&) = delete;

  int64_t size() const override { return inner_.size(); }
  void load(const int64_t* indices, int64_t n, Batch* out) override;
  void plan(const std::vector<int64_t>& order, int64_t batch) override;
  std::string explain_non_finite(int64_t index) const override {
    return inner_.explain_non_finite(index);
  }

  // Batches handed out by load() that had been loaded ahead (for tests and figures).
  int64_t prefetched() const { return prefetched_; }

 private:
  struct Slot {
    Batch batch;
    std::exception_ptr error;
    std::optional<DeviceEvent> copied;  // a GPU's: recorded after the batch's copies
  };
  void run();  // the background thread
  // With mu_ held: drops the plan and what was loaded ahead, and waits until the thread is idle.
  void cancel(std::unique_lock<std::mutex>& lock);
  int64_t batches() const;  // in the plan
  // With mu_ held: the tensors set aside for the caller's thread to drop (after the lock).
  std::vector<torch::Tensor> take_spent();

  BatchSource& inner_;
  const int64_t depth_;
  const c10::Device device_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int64_t> order_;
  int64_t batch_ = 0;
  bool planned_ = false;
  bool failed_ = false;       // the thread met an error in this plan: it loads no further
  bool busy_ = false;         // the thread is inside inner_.load
  bool stop_ = false;
  uint64_t generation_ = 0;   // bumped by every plan and cancel: late batches are dropped
  int64_t next_load_ = 0;     // next batch number the thread loads
  int64_t next_take_ = 0;     // next batch number load() hands out
  std::deque<Slot> ready_;    // loaded ahead, in order, starting at next_take_
  std::vector<Batch> free_;   // buffers to load into again
  std::vector<torch::Tensor> spent_;  // the caller's, still referred to: the caller drops them
  int64_t prefetched_ = 0;
  std::thread thread_;
};

// --prefetch auto: load ahead only when a core is left beside ATen's team.
constexpr int64_t kAutoPrefetch = -1;

// The depth `requested` means: itself when >= 0; for kAutoPrefetch 2 when the machine has more
// cores than ATen's team has threads, else 0. On 2 cores with a team of 2, a loading thread
// takes a core from the step's team, whose other thread then waits at its next barrier: loading
// on the training thread, across the team, was faster (docs/performance.md, "Reads").
int64_t prefetch_depth(int64_t requested);

// How `cached` is read for training: for a depth > 0 (prefetch_depth's; kAutoPrefetch on a
// GPU: 2), a PrefetchedBatches over it, returned; for 0, nullptr, and `cached` loads each batch
// across ATen's team (CachedBatches::set_load_threads).
std::unique_ptr<PrefetchedBatches> load_ahead(CachedBatches& cached, int64_t requested);

}  // namespace recycle
