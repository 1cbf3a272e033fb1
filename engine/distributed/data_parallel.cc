#include "engine/distributed/data_parallel.h"

#include <stdexcept>
#include <vector>

#include "base/strings.h"

namespace recycle {

namespace {

// Runs `collective` on one flat float32 copy of `tensors` (one call, not one per tensor), then
// copies the result back into them. Turns what c10d throws into CommFailure.
template <typename Collective>
void through_one_flat_tensor(const std::vector<torch::Tensor>& tensors, Collective&& collective) {
  if (tensors.empty()) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> floats;
  for (const torch::Tensor& t : tensors) floats.push_back(t.detach().to(torch::kFloat));
  torch::Tensor flat = at::flatten_dense_tensors(floats);
  try {
    collective(flat);
  } catch (const c10::Error& e) {
    throw CommFailure(first_line(e.what_without_backtrace()));
  }
  const std::vector<torch::Tensor> results = at::unflatten_dense_tensors(flat, floats);
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].detach().copy_(results[i]);
}

}  // namespace

void broadcast_from_rank0(DistContext& context, const std::vector<torch::Tensor>& tensors) {
  c10d::BroadcastOptions from_rank0;
  from_rank0.rootRank = 0;
  through_one_flat_tensor(tensors, [&](torch::Tensor& flat) {
    std::vector<torch::Tensor> one{flat};
    context.group()->broadcast(one, from_rank0)->wait();
  });
}

void allreduce_sum(DistContext& context, const std::vector<torch::Tensor>& tensors) {
  through_one_flat_tensor(tensors, [&](torch::Tensor& flat) {
    std::vector<torch::Tensor> one{flat};
    context.group()->allreduce(one)->wait();
  });
}

DataParallel::DataParallel(DistContext& context, Trainer& trainer)
    : context_(context), trainer_(trainer) {
  // The options were checked by DistContext: kAllreduce has average_every 0, kAverage >= 1.
  average_every_ = context.options().sync.average_every;

  // The same start everywhere: rank 0's parameters and buffers.
  std::vector<torch::Tensor> state = trainer.module()->parameters();
  for (const torch::Tensor& b : trainer.module()->buffers()) {
    if (b.is_floating_point()) state.push_back(b);
  }
  broadcast_from_rank0(context, state);

  start_phase();
  trainer.add_epoch_start_hook([this](Trainer& t, int64_t) {
    const std::vector<torch::Tensor>& now = t.trainable();
    bool same = now.size() == reduced_.size();
    for (size_t i = 0; same && i < now.size(); ++i) same = now[i].is_same(reduced_[i]);
    if (!same) start_phase();
  });
  if (average_every_ == 0) {
    trainer.add_after_backward_hook([this](Trainer&, int64_t step) {
      context_.set_step(step);
      reducer_->finish_step();
      ++steps_;
    });
  } else {
    trainer.add_after_step_hook([this](Trainer&, int64_t step) {
      context_.set_step(step);
      ++steps_;
      if (steps_ % average_every_ == 0) average_parameters();
    });
  }
}

void DataParallel::start_phase() {
  const DistOptions& o = context_.options();
  if (reducer_ || param_hook_) phases_.push_back(stats().phases.back());
  reducer_.reset();  // its hooks leave the old parameters before the new reducer adds its own
  param_hook_.reset();
  reduced_ = trainer_.trainable();
  phase_start_ = steps_;
  std::unique_ptr<CommHook> hook = make_comm_hook(o.grad_compression, context_.group());
  if (average_every_ == 0) {
    reducer_ = std::make_unique<GradReducer>(reduced_, std::move(hook),
                                             static_cast<int64_t>(o.bucket_mb * 1024 * 1024));
  } else {
    param_hook_ = std::move(hook);
  }
}

DataParallel::~DataParallel() = default;

void DataParallel::average_parameters() {
  through_one_flat_tensor(trainer_.trainable(),
                          [&](torch::Tensor& flat) { param_hook_->reduce(0, flat); });
  last_average_ = steps_;
}

void DataParallel::finish() {
  if (average_every_ > 0 && last_average_ != steps_) average_parameters();
}

DataParallelStats DataParallel::stats() const {
  DataParallelStats s;
  s.phases = phases_;
  CommPhase now;
  const CommHook& hook = reducer_ ? reducer_->hook() : *param_hook_;
  now.first_step = phase_start_;
  now.steps = steps_ - phase_start_;
  now.trainable = 0;
  for (const torch::Tensor& p : reduced_) now.trainable += p.numel();
  now.buckets = reducer_ ? reducer_->buckets() : 0;
  now.bytes_sent = hook.bytes_sent();
  now.fp32_bytes = hook.fp32_bytes();
  s.phases.push_back(now);
  s.steps = steps_;
  s.buckets = now.buckets;
  for (const CommPhase& p : s.phases) {
    s.bytes_sent += p.bytes_sent;
    s.fp32_bytes += p.fp32_bytes;
  }
  return s;
}

}  // namespace recycle
