// Worker (async_worker.h): the loop over dealt chunks, the exchanges with every server, the
// goodbye; and the helpers that flatten the trainable parameters and their gradients.
#include "engine/distributed/async_worker.h"

#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <stdexcept>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <utility>

#include "base/strings.h"
#include "engine/distributed/async_server.h"
#include "engine/distributed/async_wire.h"
#include "engine/distributed/comm_hook.h"
#include "engine/distributed/dist_context.h"
#include "engine/util/progress.h"

namespace recycle::async_sgd {

namespace {

std::vector<torch::Tensor> gradients_of(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& p : params) {
    grads.push_back(p.grad().defined() ? p.grad().detach().to(torch::kFloat)
                                       : torch::zeros_like(p, torch::kFloat));
  }
  return grads;
}

void set_values(const std::vector<torch::Tensor>& params, const torch::Tensor& flat) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> shapes;
  for (const torch::Tensor& p : params) shapes.push_back(p.detach());
  const std::vector<torch::Tensor> parts = at::unflatten_dense_tensors(flat, shapes);
  for (size_t i = 0; i < params.size(); ++i) params[i].detach().copy_(parts[i]);
}

}  // namespace

torch::Tensor flat_values(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> values;
  for (const torch::Tensor& p : params) values.push_back(p.detach().to(torch::kFloat));
  return at::flatten_dense_tensors(values);
}

Worker::Worker(DistContext& context, Trainer& trainer, BatchSource& train,
               const Sampler& sampler, const ParamLayout& layout, const torch::Tensor& flat,
               Server* own_server, WorkQueue* queue, int64_t sync_steps, int64_t first_epoch,
               std::function<void(int64_t)> epoch_done)
    : context_(context),
      trainer_(trainer),
      train_(train),
      sampler_(sampler),
      layout_(layout),
      own_(own_server),
      queue_(queue),
      sync_steps_(sync_steps),
      first_epoch_(first_epoch),
      push_every_(context.options().sync.push_every),
      fetch_every_(context.options().sync.fetch_every),
      fetched_(static_cast<size_t>(layout.servers()), 0),
      epoch_done_(queue ? std::move(epoch_done) : nullptr) {
  for (int s = 0; s < layout.servers(); ++s) {
    encoders_.emplace_back(context.options().grad_compression, layout, s);
    copies_.push_back(layout.gather(flat, s));
  }
  accum_ = torch::zeros({layout.total()}, torch::kFloat);
}

void Worker::run(bool progress) {
  const TrainHyper& h = trainer_.hyper();
  Progress bar("training (async, " + std::to_string(context_.world()) + " workers)",
               sampler_.size() * (h.epochs - first_epoch_), progress);
  Trainer::TrainingLayout layout(trainer_);
  round(/*push=*/false, /*fetch=*/false, nullptr);  // the first chunks
  Batch batch;
  while (true) {
    if (held_.empty()) {
      if (queue_) {  // rank 0 stays until every chunk is done: it takes what the lost left
        if (queue_->finished()) break;
        queue_->wait_for_work(std::chrono::milliseconds(200));
        report_complete_epochs();  // the others may have completed one meanwhile
      } else if (exhausted_) {
        break;
      }
      round(false, false, nullptr);
      continue;
    }
    const Chunk c = held_.front();
    const std::vector<int64_t>& order = epoch_order(c.epoch);
    std::vector<int64_t> planned(order.begin() + c.start, order.begin() + c.start + c.count);
    if (held_.size() > 1) {
      const Chunk& next = held_[1];
      const std::vector<int64_t>& o2 = epoch_order(next.epoch);
      planned.insert(planned.end(), o2.begin() + next.start, o2.begin() + next.start + next.count);
    }
    train_.plan(planned, h.batch);
    ChunkTally tally;
    for (int64_t pos = 0; pos < c.count; pos += h.batch) {
      const int64_t n = std::min<int64_t>(h.batch, c.count - pos);
      {
        RECORD_USER_SCOPE("step.load");
        train_.load(planned.data() + pos, n, &batch);
      }
      const int64_t sync_step =
          (first_epoch_ + c.epoch) * (sync_steps_ / h.epochs) +
          (c.start + pos) / (h.batch * context_.world());
      StepOutcome out;
      try {
        // Fetching after every step replaces the replica's parameters: its own step would
        // be thrown away.
        out = trainer_.train_step(batch, scheduled_lr(h, sync_step, sync_steps_), steps_,
                                  /*optimizer_step=*/fetch_every_ > 1);
      } catch (const NonFiniteLoss& e) {
        throw std::runtime_error(std::string(e.what()) + " at epoch " +
                                 std::to_string(first_epoch_ + c.epoch + 1) + ": " +
                                 why_not_finite(batch, planned.data() + pos, train_));
      }
      ++steps_;
      context_.set_step(steps_);
      samples_ += n;
      tally.loss_sum += out.loss * n;
      tally.correct += out.correct;
      accum_ += at::flatten_dense_tensors(gradients_of(trainer_.trainable()));
      ++in_push_;
      ++since_fetch_;
      const bool last = pos + n >= c.count;
      if (last || in_push_ >= push_every_) {
        if (last) held_.pop_front();
        round(/*push=*/true, since_fetch_ >= fetch_every_, last ? &c : nullptr, tally);
      } else if (since_fetch_ >= fetch_every_) {
        round(false, true, nullptr);
      }
    }
    if (queue_) {
      int64_t done = 0;
      for (const EpochTally& e : queue_->epochs()) done += e.samples;
      bar.advance(done - shown_);
      shown_ = done;
      report_complete_epochs();
    }
  }
  bar.finish();
  if (queue_) {
    round(false, true, nullptr);  // rank 0 ends with the servers' parameters
    report_complete_epochs(/*fetched=*/true);
  }
  bye();
}

AsyncReport Worker::report() const {
  AsyncReport r;
  r.steps = steps_;
  r.samples = samples_;
  r.pushes = pushes_;
  r.fetches = fetches_;
  r.stale_fetches = stale_fetches_;
  r.push_bytes = push_bytes_;
  r.fetch_bytes = fetch_bytes_;
  r.fp32_push_bytes = fp32_push_bytes_;
  r.fp32_fetch_bytes = fp32_fetch_bytes_;
  r.buckets = layout_.buckets();
  r.workers.push_back(totals());
  return r;
}

WorkerTotals Worker::totals() const {
  return WorkerTotals{context_.rank(), steps_, samples_, link_bytes_};
}

void Worker::report_complete_epochs(bool fetched) {
  if (!epoch_done_) return;
  const std::vector<EpochTally> epochs = queue_->epochs();
  bool fresh = fetched;
  const int64_t last = static_cast<int64_t>(epochs.size()) - 1;  // waits for the final fetch
  while (reported_ < (fetched ? last + 1 : last) && epochs[reported_].complete) {
    if (!fresh) round(false, true, nullptr);
    fresh = true;
    epoch_done_(first_epoch_ + reported_++);
  }
}

const std::vector<int64_t>& Worker::epoch_order(int64_t epoch) {
  auto it = orders_.find(epoch);
  if (it == orders_.end()) {
    if (orders_.size() >= 3) orders_.erase(orders_.begin());
    it = orders_.emplace(epoch, sampler_.epoch_order(first_epoch_ + epoch)).first;
  }
  return it->second;
}

void Worker::round(bool push, bool fetch, const Chunk* done, const ChunkTally& tally) {
  const int64_t K = context_.options().max_staleness;
  torch::Tensor mean;
  if (push) mean = accum_ / static_cast<double>(in_push_);
  torch::Tensor values;  // the replica's parameters, once a server sends its shard
  bool fetched_all = true;  // every server sent its shard: the replica is fresh
  for (int s = layout_.servers() - 1; s >= 0; --s) {
    if (!push && !fetch && s != 0) {  // asking rank 0 for chunks only
      fetched_all = false;
      continue;
    }
    Request req;
    std::vector<uint8_t> payload;
    if (push) {
      payload = encoders_[s].encode(layout_.gather(mean, s));
      req.push_steps = in_push_;
      req.payload = static_cast<int64_t>(payload.size());
      push_bytes_ += req.payload;
      fp32_push_bytes_ += layout_.shard_size(s) * static_cast<int64_t>(sizeof(float));
      if (s != context_.rank()) link_bytes_ += req.payload;
    }
    req.fetch = fetch ? 1 : 0;
    req.stale_after = K >= 0 ? fetched_[s] + K : -1;
    if (s == 0) {
      if (done) {
        req.done_chunk = done->id;
        req.loss_sum = tally.loss_sum;
        req.correct = tally.correct;
      }
      req.want = std::max<int64_t>(0, 2 - static_cast<int64_t>(held_.size()));
      if (exhausted_ && !queue_) req.want = 0;
    }
    torch::Tensor shard;  // fp32, or FetchEncoder's bytes (reply.params 2)
    const Reply reply = exchange(s, req, payload, &shard);
    if (reply.status == kStopped) {
      throw CommFailure("the parameter server on rank " + std::to_string(s) +
                        " stopped (its rank failed)");
    }
    if (reply.params) {
      const int64_t bytes = shard.numel() * static_cast<int64_t>(shard.element_size());
      if (reply.params == 2) {
        apply_fetch(context_.options().grad_compression, layout_, s, shard.data_ptr<uint8_t>(),
                    bytes, copies_[s]);
        shard = copies_[s];
      }
      if (!values.defined()) values = flat_values(trainer_.trainable());
      layout_.scatter(shard, s, values);
      fetched_[s] = reply.version;
      fetch_bytes_ += bytes;
      fp32_fetch_bytes_ += layout_.shard_size(s) * static_cast<int64_t>(sizeof(float));
      if (s != context_.rank()) link_bytes_ += bytes;
      if (!fetch) ++stale_fetches_;
    } else {
      fetched_all = false;
    }
    if (s == 0) {
      for (const Chunk& c : reply.chunks) held_.push_back(c);
      exhausted_ = reply.status == kExhausted;
    }
  }
  if (values.defined()) set_values(trainer_.trainable(), values);
  if (push) {
    ++pushes_;
    accum_.zero_();
    in_push_ = 0;
  }
  if (fetch) ++fetches_;
  if (fetched_all) since_fetch_ = 0;
}

Reply Worker::exchange(int s, const Request& req, const std::vector<uint8_t>& payload,
                       torch::Tensor* params) {
  if (s == context_.rank()) return own_->handle(s, req, payload.data(), params);
  auto group = context_.group();
  try {
    std::vector<torch::Tensor> head{req.pack()};
    wait(group->send(head, s, kRequestTag));
    if (!payload.empty()) {
      std::vector<torch::Tensor> bytes{torch::from_blob(const_cast<uint8_t*>(payload.data()),
                                                        {static_cast<int64_t>(payload.size())},
                                                        torch::kByte)};
      wait(group->send(bytes, s, kPayloadTag));
    }
    std::vector<torch::Tensor> answer{torch::empty({kHeader}, torch::kLong)};
    wait(group->recv(answer, s, kReplyTag));
    const Reply reply = Reply::unpack(answer[0]);
    if (reply.params == 2 && reply.param_bytes < 0) throw std::runtime_error("a malformed reply");
    if (reply.params) {
      std::vector<torch::Tensor> p{reply.params == 2
                                       ? torch::empty({reply.param_bytes}, torch::kByte)
                                       : torch::empty({layout_.shard_size(s)}, torch::kFloat)};
      wait(group->recv(p, s, kParamsTag));
      *params = p[0];
    }
    return reply;
  } catch (const std::exception& e) {
    bool dropped = false;
    try {
      dropped = context_.store().check({dropped_key(context_.rank())});
    } catch (const std::exception&) {
    }
    if (dropped) {
      throw std::runtime_error(
          "this worker (rank " + std::to_string(context_.rank()) +
          ") was dropped from the job: it was silent for more than --timeout " +
          std::to_string(context_.options().timeout_seconds) +
          " s, and the others trained its share");
    }
    throw CommFailure("the parameter server on rank " + std::to_string(s) + ": " +
                      first_line(e.what()));
  }
}

void Worker::bye() {
  auto group = context_.group();
  for (int s = 0; s < layout_.servers(); ++s) {
    if (s == context_.rank()) continue;
    Request req;
    req.kind = kBye;
    req.totals = totals();
    std::vector<torch::Tensor> head{req.pack()};
    try {
      wait(group->send(head, s, kRequestTag));
    } catch (const std::exception&) {
    }
  }
}

}  // namespace recycle::async_sgd
