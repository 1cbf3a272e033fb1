// Asynchronous data-parallel training (--sync async:PUSH:FETCH): Downpour SGD (Dean et al.,
// "Large Scale Distributed Deep Networks", 2012) over the job's c10d/Gloo process group.
//
// Who does what:
//   servers  ranks 0..S-1 (--servers S) each run a parameter server shard (param_server.h) on
//            threads beside their worker: one thread per other worker, blocked in a Gloo recv
//            from it, so a slow or lost worker holds up nobody but itself. Their own worker
//            reaches its shard by a function call. Rank 0's shard also deals the work
//            (work_queue.h). Why threads and not ranks of their own: on a 2-core machine a
//            server process would take a worker's core for a step of the optimizer per push;
//            as threads, the servers sleep in recv until a push comes.
//   workers  every rank trains on chunks of the epochs' permutations that rank 0 deals on
//            demand: 8 batches (fewer for short epochs) rounded up to a multiple of PUSH (a
//            chunk never spans epochs).
//            After each local step the worker's own optimizer steps too (its replica keeps
//            learning between fetches; not with FETCH 1, where the fetch would replace what it
//            did). Every PUSH steps it pushes the mean gradient of those steps to every server
//            (by --grad-compression), and with a chunk's last push reports the chunk done;
//            every FETCH steps, and whenever a server's version is more than --max-staleness K
//            ahead of its copy, it fetches the parameters (a fetch replaces the replica's).
//
// The messages, per (worker, server) pair, point-to-point with tags: a request header (int64),
// the push's bytes when it pushes, then a reply header and, when it fetches, the shard's
// parameters: fp32, or under --grad-compression fp16|topk what the worker's copy lacks, encoded
// the push's way (FetchEncoder in param_server.h; a server's own rank's worker reads the shard
// itself). A worker's goodbye carries its totals to rank 0 (steps, samples, bytes over links). A
// worker that dies resets its connections: the server thread serving it ends, and rank 0 deals the
// chunks it held to the others, so each epoch still trains every sample once. A server that dies
// ends every worker's job with one line naming its rank.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/distributed/dist_context.h"
#include "engine/train/trainer.h"

namespace recycle {

// What one worker did over the whole job.
struct WorkerTotals {
  int rank = -1;
  int64_t steps = 0;
  int64_t samples = 0;
  int64_t link_bytes = 0;  // pushed and fetched payload to and from servers of other ranks
};

struct AsyncReport {
  std::vector<EpochResult> epochs;  // rank 0: every worker's chunks, per epoch
  int64_t steps = 0;                // this worker's local steps
  int64_t samples = 0;              // this worker's samples, all epochs
  int64_t pushes = 0;               // this worker's pushes (to every server: one)
  int64_t fetches = 0;              // this worker's fetches (from every server: one)
  int64_t stale_fetches = 0;        // fetches forced by --max-staleness
  int64_t push_bytes = 0;           // pushed payload, all servers
  int64_t fetch_bytes = 0;          // fetched payload, all servers
  int64_t fp32_push_bytes = 0;      // what fp32 pushes of the same gradients would have sent
  int64_t fp32_fetch_bytes = 0;     // what fp32 fetches would have received
  int64_t server_pushes = 0;        // rank 0: pushes its shard applied (from every worker)
  int64_t buckets = 0;
  // This worker's totals first; on rank 0 then every other worker's that said goodbye (a lost
  // worker's are missing).
  std::vector<WorkerTotals> workers;
  std::vector<int> lost_workers;    // rank 0: workers lost during the job, by rank
  std::vector<std::string> lost_reasons;  // the same order: what their server saw
};

// Trains `trainer`'s module as one rank of `context`'s job. `train` and `sampler` are the
// whole split and its one-process order (world 1; set_draws applied). Every rank calls it;
// rank 0's module ends with the servers' parameters. Throws CommFailure when a server is
// lost (or, on rank 0, when it cannot serve), std::runtime_error for a loss that is not finite.
// `epoch_done`, on rank 0 (ignored elsewhere): called with epoch e when rank 0's worker sees
// every chunk of epoch e done, after it fetched the servers' parameters into its module (in
// epoch order, once each; the last epoch's too, after the final fetch).
// `first_epoch` (the same on every rank): the epochs a checkpoint had done; training goes on
// with the next one, at its place in the learning-rate schedule (the servers' optimizer state
// starts over). The report's epochs are those trained.
AsyncReport train_async(DistContext& context, Trainer& trainer, BatchSource& train,
                        const Sampler& sampler, bool progress,
                        const std::function<void(int64_t epoch)>& epoch_done = {},
                        int64_t first_epoch = 0);

}  // namespace recycle
