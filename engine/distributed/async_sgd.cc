#include "engine/distributed/async_sgd.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "base/strings.h"
#include "engine/distributed/comm_hook.h"
#include "engine/distributed/data_parallel.h"
#include "engine/distributed/param_server.h"
#include "engine/distributed/work_queue.h"
#include "engine/util/progress.h"

namespace recycle {

namespace {

// Point-to-point tags of the parameter server's messages (Gloo keeps them apart from the
// collectives' slots).
constexpr int kRequestTag = 0x5a01;
constexpr int kPayloadTag = 0x5a02;
constexpr int kReplyTag = 0x5a03;
constexpr int kParamsTag = 0x5a04;
constexpr int64_t kHeader = 16;  // int64 words of a request or reply header

// Batches a dealt chunk holds at most (fewer for short epochs; rounded up to a multiple of
// PUSH): small enough that a slow worker takes fewer of them, large enough that the source can
// load ahead within one.
constexpr int64_t kChunkBatches = 8;

enum : int64_t { kExchange = 1, kBye = 2 };
enum : int64_t { kMore = 0, kExhausted = 1, kStopped = 2 };

int64_t double_bits(double d) {
  int64_t i = 0;
  std::memcpy(&i, &d, sizeof(d));
  return i;
}

double bits_double(int64_t i) {
  double d = 0;
  std::memcpy(&d, &i, sizeof(d));
  return d;
}

// A worker's message to a server.
struct Request {
  int64_t kind = kExchange;
  int64_t push_steps = 0;    // local steps the pushed gradient averages (0: no push)
  int64_t payload = 0;       // bytes of the push
  int64_t fetch = 0;         // 1: send the parameters back
  int64_t stale_after = -1;  // send them anyway when the version is above this
  int64_t done_chunk = -1;   // rank 0's server: the chunk this push finishes
  int64_t want = 0;          // rank 0's server: chunks to deal
  double loss_sum = 0;       // of the finished chunk
  int64_t correct = 0;
  WorkerTotals totals;       // with kBye: what the worker did

  torch::Tensor pack() const {
    torch::Tensor t = torch::zeros({kHeader}, torch::kLong);
    int64_t* w = t.data_ptr<int64_t>();
    const int64_t words[] = {kind,          push_steps,      payload,          fetch,
                             stale_after,   done_chunk,      want,             double_bits(loss_sum),
                             correct,       totals.steps,    totals.samples,   totals.link_bytes};
    std::copy(std::begin(words), std::end(words), w);
    return t;
  }
  static Request unpack(const torch::Tensor& t) {
    const int64_t* w = t.data_ptr<int64_t>();
    Request r;
    r.kind = w[0];
    r.push_steps = w[1];
    r.payload = w[2];
    r.fetch = w[3];
    r.stale_after = w[4];
    r.done_chunk = w[5];
    r.want = w[6];
    r.loss_sum = bits_double(w[7]);
    r.correct = w[8];
    r.totals = WorkerTotals{-1, w[9], w[10], w[11]};
    return r;
  }
};

// A server's answer.
struct Reply {
  int64_t version = 0;  // the shard's version after the push
  int64_t status = kMore;
  int64_t params = 0;   // 1: the parameters follow, fp32 (2 from a server of another rank:
                        // param_bytes bytes of FetchEncoder's)
  int64_t param_bytes = 0;
  std::vector<Chunk> chunks;  // at most 2

  torch::Tensor pack() const {
    torch::Tensor t = torch::zeros({kHeader}, torch::kLong);
    int64_t* w = t.data_ptr<int64_t>();
    w[0] = version;
    w[1] = status;
    w[2] = params;
    w[3] = static_cast<int64_t>(chunks.size());
    for (size_t i = 0; i < chunks.size() && i < 2; ++i) {
      w[4 + 4 * i] = chunks[i].id;
      w[5 + 4 * i] = chunks[i].epoch;
      w[6 + 4 * i] = chunks[i].start;
      w[7 + 4 * i] = chunks[i].count;
    }
    w[12] = param_bytes;
    return t;
  }
  static Reply unpack(const torch::Tensor& t) {
    const int64_t* w = t.data_ptr<int64_t>();
    Reply r;
    r.version = w[0];
    r.status = w[1];
    r.params = w[2];
    r.param_bytes = w[12];
    for (int64_t i = 0; i < std::min<int64_t>(w[3], 2); ++i) {
      r.chunks.push_back(Chunk{w[4 + 4 * i], w[5 + 4 * i], w[6 + 4 * i], w[7 + 4 * i]});
    }
    return r;
  }
};

void wait(const c10::intrusive_ptr<c10d::Work>& work) { work->wait(); }

// How long a server thread waits for its worker: for ever, in effect. A Gloo wait that times
// out closes every pair of the group, not only the silent worker's; a silent worker is found by
// its heartbeat instead (Server::watch), and its thread's wait aborted.
constexpr std::chrono::milliseconds kForever(int64_t{30} * 24 * 3600 * 1000);

// The store key a server sets for a worker it dropped for silence (the worker reads it when its
// exchanges fail, to say so).
std::string dropped_key(int rank) { return "recycle/async/dropped/" + std::to_string(rank); }

// One parameter server shard and the threads that serve the other workers.
class Server {
 public:
  Server(DistContext& context, const ParamLayout& layout, int server, const torch::Tensor& flat,
         const TrainHyper& hyper, int64_t sync_steps, int64_t done_sync_steps, WorkQueue* queue)
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

  // After a failure of this rank: every thread stops waiting and ends.
  ~Server() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      for (auto& work : pending_) {
        if (work) work->abort();
      }
    }
    join();
  }

  void start() {
    const int world = context_.world();
    pending_.resize(static_cast<size_t>(world));
    ended_.assign(static_cast<size_t>(world), false);
    dropped_.assign(static_cast<size_t>(world), false);
    for (int w = 0; w < world; ++w) {
      if (w != context_.rank()) threads_.emplace_back([this, w] { serve(w); });
    }
    watchdog_ = std::thread([this] { watch(); });
  }
  // Returns once every other worker said goodbye or was lost.
  void join() {
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

  // A request of `worker` (its own rank's worker calls this directly). When the parameters go
  // back, `params` is the shard (fp32), or under fp16 and topk for another rank's worker,
  // FetchEncoder's bytes (kByte).
  Reply handle(int worker, const Request& req, const uint8_t* payload, torch::Tensor* params) {
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

  const ParamShard& shard() const { return shard_; }
  std::vector<std::pair<int, std::string>> lost() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lost_;
  }
  // What the other workers said they did, in their goodbyes (rank -1: no goodbye came).
  std::vector<WorkerTotals> totals() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return totals_;
  }

 private:
  // Serves `worker` until it says goodbye, dies (its connection resets), or is dropped.
  void serve(int worker) {
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

  // Waits for `worker`'s thread's `work`; false when it was aborted (the worker was dropped, or
  // the server stops).
  bool await(int worker, c10::intrusive_ptr<c10d::Work> work) {
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

  // Drops a worker whose heartbeat stood still for --timeout seconds (stopped, hung, or its
  // host lost without a reset): its chunks go to the others and its thread stops waiting.
  void watch() {
    const auto limit = std::chrono::seconds(context_.options().timeout_seconds);
    const size_t world = static_cast<size_t>(context_.world());
    std::vector<int64_t> last(world, -2);
    std::vector<std::chrono::steady_clock::time_point> seen(world, std::chrono::steady_clock::now());
    std::unique_lock<std::mutex> lock(mutex_);
    while (!watch_changed_.wait_for(lock, std::chrono::milliseconds(500), [&] { return watch_stop_; })) {
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

  void drop(int worker, const std::string& why) {
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

  void lose(int worker, const std::string& why) {
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

std::vector<torch::Tensor> gradients_of(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& p : params) {
    grads.push_back(p.grad().defined() ? p.grad().detach().to(torch::kFloat)
                                       : torch::zeros_like(p, torch::kFloat));
  }
  return grads;
}

torch::Tensor flat_values(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> values;
  for (const torch::Tensor& p : params) values.push_back(p.detach().to(torch::kFloat));
  return at::flatten_dense_tensors(values);
}

void set_values(const std::vector<torch::Tensor>& params, const torch::Tensor& flat) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> shapes;
  for (const torch::Tensor& p : params) shapes.push_back(p.detach());
  const std::vector<torch::Tensor> parts = at::unflatten_dense_tensors(flat, shapes);
  for (size_t i = 0; i < params.size(); ++i) params[i].detach().copy_(parts[i]);
}

// The worker of one rank: trains on dealt chunks, pushes and fetches.
class Worker {
 public:
  // `flat`: the trainable parameters every rank starts from. The queue's epoch e is the job's
  // epoch first_epoch + e.
  Worker(DistContext& context, Trainer& trainer, BatchSource& train, const Sampler& sampler,
         const ParamLayout& layout, const torch::Tensor& flat, Server* own_server,
         WorkQueue* queue, int64_t sync_steps, int64_t first_epoch,
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
        push_every_(context.options().sync.every),
        fetch_every_(context.options().sync.fetch),
        fetched_(static_cast<size_t>(layout.servers()), 0),
        epoch_done_(queue ? std::move(epoch_done) : nullptr) {
    for (int s = 0; s < layout.servers(); ++s) {
      encoders_.emplace_back(context.options().grad_compression, layout, s);
      copies_.push_back(layout.gather(flat, s));
    }
    accum_ = torch::zeros({layout.total()}, torch::kFloat);
  }

  void run(bool progress) {
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
                                   std::to_string(first_epoch_ + c.epoch + 1) +
                                   ": training diverged (try a lower --lr)");
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

  AsyncReport report() const {
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

 private:
  WorkerTotals totals() const {
    return WorkerTotals{context_.rank(), steps_, samples_, link_bytes_};
  }

  // Rank 0: epoch_done_ for each epoch that completed since the last call, the servers'
  // parameters fetched first (unless `fetched`: the final fetch was just made).
  void report_complete_epochs(bool fetched = false) {
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

  const std::vector<int64_t>& epoch_order(int64_t epoch) {
    auto it = orders_.find(epoch);
    if (it == orders_.end()) {
      if (orders_.size() >= 3) orders_.erase(orders_.begin());
      it = orders_.emplace(epoch, sampler_.epoch_order(first_epoch_ + epoch)).first;
    }
    return it->second;
  }

  // One exchange with every server, the coordinator (server 0) last, so that a chunk is
  // reported done only once every shard has its gradients. `push`: the mean of the gradients
  // since the last push; `fetch`: the parameters come back (a server more than --max-staleness
  // versions ahead of this worker's copy sends them anyway).
  void round(bool push, bool fetch, const Chunk* done, const ChunkTally& tally = {}) {
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

  Reply exchange(int s, const Request& req, const std::vector<uint8_t>& payload,
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

  // Tells every other server that this worker is done (best effort: a server that is gone
  // has nothing to wait for).
  void bye() {
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
  std::vector<torch::Tensor> copies_;  // per server: its shard as this worker last fetched it
  std::vector<int64_t> fetched_;  // per server: the version of this worker's copy
  std::map<int64_t, std::vector<int64_t>> orders_;
  std::deque<Chunk> held_;
  bool exhausted_ = false;
  torch::Tensor accum_;  // gradients since the last push, summed
  int64_t in_push_ = 0, since_fetch_ = 0;
  int64_t steps_ = 0, samples_ = 0, pushes_ = 0, fetches_ = 0, stale_fetches_ = 0;
  int64_t push_bytes_ = 0, fetch_bytes_ = 0, fp32_push_bytes_ = 0, fp32_fetch_bytes_ = 0;
  int64_t link_bytes_ = 0;  // pushed and fetched bytes to and from servers of other ranks
  int64_t shown_ = 0;
  std::function<void(int64_t)> epoch_done_;  // rank 0's, or none
  int64_t reported_ = 0;                     // epochs given to epoch_done_
};

}  // namespace

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
  const int64_t wanted = std::clamp<int64_t>(batches_per_epoch / (4 * context.world()), 1, kChunkBatches);
  const int64_t chunk_batches = (wanted + o.sync.every - 1) / o.sync.every * o.sync.every;

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
