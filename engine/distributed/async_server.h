// Server: one parameter server shard of asynchronous training (async_sgd.h), and the threads
// that serve the workers of the other ranks.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <utility>
#include <vector>

#include "engine/distributed/async_sgd.h"
#include "engine/distributed/param_server.h"
#include "recycle/options.h"

namespace recycle {
class DistContext;
class WorkQueue;
}  // namespace recycle

namespace recycle::async_sgd {

struct Reply;
struct Request;

// One parameter server shard and the threads that serve the other workers.
class Server {
 public:
  Server(DistContext& context, const ParamLayout& layout, int server, const at::Tensor& flat,
         const TrainHyper& hyper, int64_t sync_steps, int64_t done_sync_steps, WorkQueue* queue);

  // After a failure of this rank: every thread stops waiting and ends.
  ~Server();

  void start();
  // Returns once every other worker said goodbye or was lost.
  void join();

  // A request of `worker` (its own rank's worker calls this directly). When the parameters go
  // back, `params` is the shard (fp32), or under fp16 and topk for another rank's worker,
  // FetchEncoder's bytes (kByte).
  Reply handle(int worker, const Request& req, const uint8_t* payload, at::Tensor* params);

  const ParamShard& shard() const { return shard_; }
  std::vector<std::pair<int, std::string>> lost() const;
  // What the other workers said they did, in their goodbyes (rank -1: no goodbye came).
  std::vector<WorkerTotals> totals() const;

 private:
  // Serves `worker` until it says goodbye, dies (its connection resets), or is dropped.
  void serve(int worker);

  // Waits for `worker`'s thread's `work`; false when it was aborted (the worker was dropped, or
  // the server stops).
  bool await(int worker, c10::intrusive_ptr<c10d::Work> work);

  // Drops a worker whose heartbeat stood still for --timeout seconds (stopped, hung, or its
  // host lost without a reset): its chunks go to the others and its thread stops waiting.
  void watch();

  void drop(int worker, const std::string& why);
  void lose(int worker, const std::string& why);

  DistContext& context_;
  const ParamLayout& layout_;
  const int server_;
  const GradCompression compression_;
  ParamShard shard_;
  WorkQueue* queue_;  // rank 0's server deals the work
  // Per worker of another rank, under fp16 and topk: its fetches' encoder (used by its thread
  // alone).
  std::vector<std::unique_ptr<FetchEncoder>> fetches_;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> threads_;
  std::thread watchdog_;
  mutable std::mutex mutex_;  // guards what follows
  std::condition_variable watch_changed_;
  bool watch_stop_ = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> pending_;  // per worker: what its thread waits for
  std::vector<bool> ended_;    // per worker: its thread is done
  std::vector<bool> dropped_;  // per worker: dropped for silence
  std::vector<std::pair<int, std::string>> lost_;
  std::vector<WorkerTotals> totals_;  // per worker, from its goodbye
};

}  // namespace recycle::async_sgd
