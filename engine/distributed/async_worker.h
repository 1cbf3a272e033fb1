// Worker: the worker of one rank in asynchronous training (async_sgd.h): it trains on the chunks
// rank 0 deals, pushes its gradients to the parameter servers and fetches their parameters.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <vector>

#include "engine/distributed/async_sgd.h"
#include "engine/distributed/param_server.h"
#include "engine/distributed/work_queue.h"

namespace recycle::async_sgd {

class Server;
struct Reply;
struct Request;

// The values of `params`, as fp32, flattened in order into one vector.
at::Tensor flat_values(const std::vector<at::Tensor>& params);

// The worker of one rank: trains on dealt chunks, pushes and fetches.
class Worker {
 public:
  // `flat`: the trainable parameters every rank starts from. The queue's epoch e is the job's
  // epoch first_epoch + e.
  Worker(DistContext& context, Trainer& trainer, BatchSource& train, const Sampler& sampler,
         const ParamLayout& layout, const at::Tensor& flat, Server* own_server,
         WorkQueue* queue, int64_t sync_steps, int64_t first_epoch,
         std::function<void(int64_t)> epoch_done);

  void run(bool progress);

  AsyncReport report() const;

 private:
  WorkerTotals totals() const;

  // Rank 0: epoch_done_ for each epoch that completed since the last call, the servers'
  // parameters fetched first (unless `fetched`: the final fetch was just made).
  void report_complete_epochs(bool fetched = false);

  const std::vector<int64_t>& epoch_order(int64_t epoch);

  // One exchange with every server, the coordinator (server 0) last, so that a chunk is
  // reported done only once every shard has its gradients. `push`: the mean of the gradients
  // since the last push; `fetch`: the parameters come back (a server more than --max-staleness
  // versions ahead of this worker's copy sends them anyway).
  void round(bool push, bool fetch, const Chunk* done, const ChunkTally& tally = {});

  Reply exchange(int s, const Request& req, const std::vector<uint8_t>& payload,
                 at::Tensor* params);

  // Tells every other server that this worker is done (best effort: a server that is gone
  // has nothing to wait for).
  void bye();

  DistContext& context_;
  Trainer& trainer_;
  BatchSource& train_;
  const Sampler& sampler_;
  const ParamLayout& layout_;
  Server* own_;
  WorkQueue* queue_;
  const int64_t sync_steps_;
  const int64_t first_epoch_;
  const int64_t push_every_;
  const int64_t fetch_every_;
  std::vector<PushEncoder> encoders_;
  std::vector<at::Tensor> copies_;  // per server: its shard as this worker last fetched it
  std::vector<int64_t> fetched_;  // per server: the version of this worker's copy
  std::map<int64_t, std::vector<int64_t>> orders_;
  std::deque<Chunk> held_;
  bool exhausted_ = false;
  at::Tensor accum_;  // gradients since the last push, summed
  int64_t in_push_ = 0, since_fetch_ = 0;
  int64_t steps_ = 0, samples_ = 0, pushes_ = 0, fetches_ = 0, stale_fetches_ = 0;
  int64_t push_bytes_ = 0, fetch_bytes_ = 0, fp32_push_bytes_ = 0, fp32_fetch_bytes_ = 0;
  int64_t link_bytes_ = 0;  // pushed and fetched bytes to and from servers of other ranks
  int64_t shown_ = 0;
  std::function<void(int64_t)> epoch_done_;  // rank 0's, or none
  int64_t reported_ = 0;                     // epochs given to epoch_done_
};

}  // namespace recycle::async_sgd
