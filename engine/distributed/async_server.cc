// Server (async_server.h): a shard's answer to a request, the threads that serve the other
// workers, and the watchdog that drops a silent one.
#include "engine/distributed/async_server.h"

#include <torch/torch.h>

#include <chrono>
#include <exception>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "base/strings.h"
#include "engine/distributed/async_wire.h"
#include "engine/distributed/dist_context.h"
#include "engine/distributed/work_queue.h"

namespace recycle::async_sgd {

Server::Server(DistContext& context, const ParamLayout& layout, int server,
               const torch::Tensor& flat, const TrainHyper& hyper, int64_t sync_steps,
               int64_t done_sync_steps, WorkQueue* queue)
    : context_(context),
      layout_(layout),
      server_(server),
      compression_(context.options().grad_compression),
      shard_(layout.gather(flat, server), hyper, context.world(), sync_steps,
             static_cast<int64_t>(layout.buckets_of(server).size()), done_sync_steps),
      queue_(queue) {
  fetches_.resize(static_cast<size_t>(context.world()));
  totals_.resize(static_cast<size_t>(context.world()));
  for (int w = 0; w < context.world(); ++w) {
    // fp32 fetches send the shard itself, with no copy to encode.
    if (w == context.rank() || compression_ == GradCompression::kNone) continue;
    fetches_[static_cast<size_t>(w)] =
        std::make_unique<FetchEncoder>(compression_, layout, server, layout.gather(flat, server));
  }
}

Server::~Server() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (auto& work : pending_) {
      if (work) work->abort();
    }
  }
  join();
}

void Server::start() {
  const int world = context_.world();
  pending_.resize(static_cast<size_t>(world));
  ended_.assign(static_cast<size_t>(world), false);
  dropped_.assign(static_cast<size_t>(world), false);
  for (int w = 0; w < world; ++w) {
    if (w != context_.rank()) threads_.emplace_back([this, w] { serve(w); });
  }
  watchdog_ = std::thread([this] { watch(); });
}

void Server::join() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    watch_stop_ = true;
  }
  watch_changed_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

Reply Server::handle(int worker, const Request& req, const uint8_t* payload,
                     torch::Tensor* params) {
  Reply r;
  if (stopping_) {
    r.status = kStopped;
    return r;
  }
  if (req.push_steps > 0) {
    const torch::Tensor grad = decode_shard(compression_, layout_, server_, payload, req.payload);
    r.version = shard_.apply(grad, req.push_steps);
  } else {
    r.version = shard_.version();
  }
  if (queue_) {
    if (req.done_chunk >= 0) queue_->done(worker, req.done_chunk, {req.loss_sum, req.correct});
    for (int64_t i = 0; i < req.want; ++i) {
      const std::optional<Chunk> c = queue_->take(worker);
      if (!c) break;
      r.chunks.push_back(*c);
    }
    r.status = queue_->exhausted() ? kExhausted : kMore;
  }
  if (req.fetch || (req.stale_after >= 0 && r.version > req.stale_after)) {
    *params = shard_.snapshot(&r.version);
    r.params = 1;
    if (FetchEncoder* fetches = fetches_[static_cast<size_t>(worker)].get()) {
      std::vector<uint8_t> bytes = fetches->encode(*params);
      *params = torch::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size())}, torch::kByte)
                    .clone();
      r.params = 2;
      r.param_bytes = params->numel();
    }
  }
  return r;
}

std::vector<std::pair<int, std::string>> Server::lost() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lost_;
}

std::vector<WorkerTotals> Server::totals() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return totals_;
}

void Server::serve(int worker) {
  auto group = context_.group();
  try {
    for (;;) {
      std::vector<torch::Tensor> head{torch::empty({kHeader}, torch::kLong)};
      if (!await(worker, group->recv(head, worker, kRequestTag))) return;
      const Request req = Request::unpack(head[0]);
      if (req.kind == kBye) {
        std::lock_guard<std::mutex> lock(mutex_);
        totals_[static_cast<size_t>(worker)] = req.totals;
        totals_[static_cast<size_t>(worker)].rank = worker;
        break;
      }
      if (req.kind != kExchange || req.payload < 0 || req.want < 0 || req.want > 2) {
        throw std::runtime_error("a malformed request");
      }
      std::vector<torch::Tensor> payload{torch::empty({req.payload}, torch::kByte)};
      if (req.payload > 0 && !await(worker, group->recv(payload, worker, kPayloadTag))) return;
      torch::Tensor params;
      const Reply reply = handle(worker, req, payload[0].data_ptr<uint8_t>(), &params);
      std::vector<torch::Tensor> out{reply.pack()};
      if (!await(worker, group->send(out, worker, kReplyTag))) return;
      std::vector<torch::Tensor> p{params};
      if (reply.params && !await(worker, group->send(p, worker, kParamsTag))) return;
      if (stopping_) return;
    }
  } catch (const std::exception& e) {
    lose(worker, first_line(e.what()));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ended_[static_cast<size_t>(worker)] = true;
}

bool Server::await(int worker, c10::intrusive_ptr<c10d::Work> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (dropped_[static_cast<size_t>(worker)] || stopping_) return false;
    pending_[static_cast<size_t>(worker)] = work;
  }
  const bool completed = work->wait(kForever);
  std::lock_guard<std::mutex> lock(mutex_);
  pending_[static_cast<size_t>(worker)].reset();
  return completed && !dropped_[static_cast<size_t>(worker)] && !stopping_;
}

void Server::watch() {
  const auto limit = std::chrono::seconds(context_.options().timeout_seconds);
  const size_t world = static_cast<size_t>(context_.world());
  std::vector<int64_t> last(world, -2);
  std::vector<std::chrono::steady_clock::time_point> seen(world, std::chrono::steady_clock::now());
  std::unique_lock<std::mutex> lock(mutex_);
  while (
      !watch_changed_.wait_for(lock, std::chrono::milliseconds(500), [&] { return watch_stop_; })) {
    lock.unlock();
    std::vector<int64_t> beats;
    try {
      beats = context_.heartbeat_counts();
    } catch (const std::exception&) {
    }
    const auto now = std::chrono::steady_clock::now();
    for (size_t w = 0; w < beats.size() && w < world; ++w) {
      if (static_cast<int>(w) == context_.rank()) continue;
      if (beats[w] != last[w]) {
        last[w] = beats[w];
        seen[w] = now;
      } else if (now - seen[w] > limit) {
        drop(static_cast<int>(w), "no heartbeat for " +
                                      std::to_string(context_.options().timeout_seconds) + " s");
        seen[w] = now + std::chrono::hours(24 * 365);
      }
    }
    lock.lock();
  }
}

void Server::drop(int worker, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_[static_cast<size_t>(worker)] || dropped_[static_cast<size_t>(worker)]) return;
    dropped_[static_cast<size_t>(worker)] = true;
    if (pending_[static_cast<size_t>(worker)]) pending_[static_cast<size_t>(worker)]->abort();
  }
  lose(worker, why);
  try {
    context_.store().set(dropped_key(worker), std::vector<uint8_t>{'1'});
  } catch (const std::exception&) {
  }
}

void Server::lose(int worker, const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [w, reason] : lost_) {
    if (w == worker) return;
  }
  lost_.emplace_back(worker, why);
  if (!queue_) return;
  const int64_t samples = queue_->lose(worker);
  std::cerr << "recycle-train: lost worker rank " << worker << " of " << context_.world() << " ("
            << why << "): the job goes on without it; its " << samples
            << " unfinished sample(s) go to the others" << std::endl;
}

}  // namespace recycle::async_sgd
