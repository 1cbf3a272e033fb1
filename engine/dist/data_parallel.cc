#include "engine/dist/data_parallel.h"

#include <stdexcept>
#include <vector>

#include "base/strings.h"

namespace recycle {

namespace {

// Rank 0's values of `tensors`, in place on every rank: one broadcast of their concatenation.
void broadcast_from_rank0(c10d::ProcessGroup& group, const std::vector<torch::Tensor>& tensors) {
  if (tensors.empty()) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> flat_parts;
  for (const torch::Tensor& t : tensors) flat_parts.push_back(t.detach().reshape({-1}).to(torch::kFloat));
  std::vector<torch::Tensor> flat{torch::cat(flat_parts)};
  c10d::BroadcastOptions options;
  options.rootRank = 0;
  group.broadcast(flat, options)->wait();
  int64_t offset = 0;
  for (const torch::Tensor& t : tensors) {
    torch::Tensor target = t;
    target.copy_(flat[0].narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

}  // namespace


DataParallel::DataParallel(DistContext& context, Trainer& trainer)
    : context_(context), trainer_(trainer) {
  const DistOptions& o = context.options();
  check_dist_options(o);
  average_every_ = parse_sync(o.sync);
  std::unique_ptr<CommHook> hook = make_comm_hook(o.grad_compression, context.group());

  // The same start everywhere: rank 0's parameters and buffers.
  std::vector<torch::Tensor> state = trainer.module()->parameters();
  for (const torch::Tensor& b : trainer.module()->buffers()) {
    if (b.is_floating_point()) state.push_back(b);
  }
  try {
    broadcast_from_rank0(*context.group(), state);
  } catch (const c10::Error& e) {
    throw CommFailure(first_line(e.what_without_backtrace()));
  }

  if (average_every_ == 0) {
    reducer_ = std::make_unique<GradReducer>(trainer.trainable(), std::move(hook),
                                             static_cast<int64_t>(o.bucket_mb * 1024 * 1024));
    trainer.add_after_backward_hook([this](Trainer&, int64_t step) {
      context_.set_step(step);
      reducer_->finish_step();
      ++steps_;
    });
  } else {
    param_hook_ = std::move(hook);
    trainer.add_after_step_hook([this](Trainer&, int64_t step) {
      context_.set_step(step);
      ++steps_;
      if (steps_ % average_every_ == 0) average_parameters();
    });
  }
}

DataParallel::~DataParallel() = default;

void DataParallel::average_parameters() {
  try {
    average_parameters_now();
  } catch (const c10::Error& e) {
    throw CommFailure(first_line(e.what_without_backtrace()));
  }
}

void DataParallel::average_parameters_now() {
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor>& params = trainer_.trainable();
  std::vector<torch::Tensor> parts;
  for (const torch::Tensor& p : params) parts.push_back(p.detach().reshape({-1}));
  torch::Tensor flat = torch::cat(parts);
  param_hook_->reduce(0, flat);
  int64_t offset = 0;
  for (const torch::Tensor& p : params) {
    torch::Tensor target = p.detach();
    target.copy_(flat.narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
  }
  last_average_ = steps_;
}

void DataParallel::finish() {
  if (average_every_ > 0 && last_average_ != steps_) average_parameters();
}

DataParallelStats DataParallel::stats() const {
  DataParallelStats s;
  s.steps = steps_;
  const CommHook& hook = reducer_ ? reducer_->hook() : *param_hook_;
  s.bytes_sent = hook.bytes_sent();
  s.fp32_bytes = hook.fp32_bytes();
  s.buckets = reducer_ ? reducer_->buckets() : 0;
  return s;
}

}  // namespace recycle
