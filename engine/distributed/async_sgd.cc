#include "engine/distributed/async_sgd.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/distributed/async_server.h"
#include "engine/distributed/async_wire.h"
#include "engine/distributed/async_worker.h"
#include "engine/distributed/data_parallel.h"
#include "engine/distributed/param_server.h"
#include "engine/distributed/work_queue.h"

namespace recycle {

namespace {

// Batches a dealt chunk holds at most (fewer for short epochs; rounded up to a multiple of
// PUSH): small enough that a slow worker takes fewer of them, large enough that the source can
// load ahead within one.
constexpr int64_t kChunkBatches = 8;

}  // namespace

using async_sgd::flat_values;
using async_sgd::Server;
using async_sgd::Worker;

AsyncReport train_async(DistContext& context, Trainer& trainer, BatchSource& train,
                        const Sampler& sampler, bool progress,
                        const std::function<void(int64_t)>& epoch_done, int64_t first_epoch) {
  const DistOptions& o = context.options();
  const TrainHyper& h = trainer.hyper();
  // The same start everywhere: rank 0's parameters and buffers.
  std::vector<torch::Tensor> state = trainer.module()->parameters();
  for (const torch::Tensor& b : trainer.module()->buffers()) {
    if (b.is_floating_point()) state.push_back(b);
  }
  broadcast_from_rank0(context, state);

  const torch::Tensor flat = flat_values(trainer.trainable());
  const int64_t bucket_elements =
      std::max<int64_t>(1, static_cast<int64_t>(o.bucket_mb * 1024 * 1024) / 4);
  const ParamLayout layout(flat.numel(), bucket_elements, std::min(o.servers, context.world()));
  const int64_t sync_steps_per_epoch =
      (sampler.size() + h.batch * context.world() - 1) / (h.batch * context.world());
  const int64_t sync_steps = sync_steps_per_epoch * h.epochs;
  if (first_epoch >= h.epochs) {  // a finished run's checkpoint: nothing is left to train
    AsyncReport done;
    done.buckets = layout.buckets();
    return done;
  }
  // Chunks of at most kChunkBatches, and at least 4 per worker and epoch, so that a slow
  // worker's last chunks are a small part of an epoch; a multiple of PUSH.
  const int64_t batches_per_epoch = (sampler.size() + h.batch - 1) / h.batch;
  const int64_t wanted =
      std::clamp<int64_t>(batches_per_epoch / (4 * context.world()), 1, kChunkBatches);
  const int64_t push = o.sync.push_every;
  const int64_t chunk_batches = (wanted + push - 1) / push * push;

  std::unique_ptr<WorkQueue> queue;
  if (context.rank() == 0) {
    queue = std::make_unique<WorkQueue>(sampler.size(), h.epochs - first_epoch,
                                        chunk_batches * h.batch, context.world());
  }
  std::unique_ptr<Server> server;
  if (context.rank() < layout.servers()) {
    server = std::make_unique<Server>(context, layout, context.rank(), flat, h, sync_steps,
                                      first_epoch * sync_steps_per_epoch, queue.get());
    server->start();
  }
  Worker worker(context, trainer, train, sampler, layout, flat, server.get(), queue.get(),
                sync_steps, first_epoch, epoch_done);
  worker.run(progress);
  if (server) server->join();

  AsyncReport r = worker.report();
  if (queue) {
    for (const EpochTally& e : queue->epochs()) {
      EpochResult er;
      er.seconds = e.seconds;
      er.samples = e.samples;
      er.loss = e.samples ? e.loss_sum / e.samples : 0.0;
      er.accuracy = e.samples ? static_cast<double>(e.correct) / e.samples : 0.0;
      r.epochs.push_back(er);
    }
  }
  if (server && context.rank() == 0) {
    r.server_pushes = server->shard().pushes();
    for (const WorkerTotals& t : server->totals()) {
      if (t.rank >= 0) r.workers.push_back(t);
    }
    for (const auto& [rank, why] : server->lost()) {
      r.lost_workers.push_back(rank);
      r.lost_reasons.push_back(why);
    }
  }
  return r;
}

}  // namespace recycle
