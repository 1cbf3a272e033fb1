// GradReducer: averages gradients over a process group the way DDP does, in flat buckets that
// are reduced while backward is still running. Parameters are put into buckets of at most
// `bucket_bytes` in reverse order (the order their gradients become ready in backward). A hook
// on each parameter copies its gradient into its bucket; when a bucket is full it goes to a
// communication thread, which hands it to the CommHook (allreduce, fp16, AdaComp top-k) while
// autograd goes on with the layers below. Buckets are reduced in index order, the same on
// every rank. finish_step() (after backward, before the optimizer step) waits for the last
// bucket and writes the averaged gradients into the parameters' .grad.
//
// Not thread safe: one trainer thread calls it; the hooks run on that thread during backward.
// A parameter that got no gradient in a step contributes zeros.
#pragma once

#include <torch/torch.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/distributed/comm_hook.h"

namespace recycle {

class GradReducer {
 public:
  // `params`: the trainable parameters, in the module's order (float32, same on every rank).
  GradReducer(std::vector<torch::Tensor> params, std::unique_ptr<CommHook> hook,
              int64_t bucket_bytes);
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Waits for every bucket of this step and sets each parameter's .grad to the average. Throws
  // CommFailure with the first line of what the communication threw (a lost peer, a timeout);
  // the reducer is unusable after that.
  void finish_step();

  int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }
  // Parameter indices of each bucket (for tests and the docs).
  std::vector<std::vector<int64_t>> bucket_params() const;
  const CommHook& hook() const { return *hook_; }

 private:
  struct Slot {
    int64_t bucket = 0;
    int64_t offset = 0;  // in the bucket's flat buffer
    bool ready = false;
  };
  struct Bucket {
    std::vector<int64_t> params;
    torch::Tensor flat;   // float32 [sum of numel]
    int64_t pending = 0;  // parameters whose gradient has not arrived this step
    bool queued = false;
    bool done = false;
  };

  void on_grad(int64_t param, const torch::Tensor& grad);
  void queue_ready_buckets();  // in index order, from next_to_queue_
  void comm_loop();

  std::vector<torch::Tensor> params_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::unique_ptr<CommHook> hook_;
  std::vector<unsigned> hook_handles_;
  size_t next_to_queue_ = 0;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<int64_t> queue_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread comm_;
};

}  // namespace recycle
