#include "engine/dist/data_parallel.h"

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

DataParallel::DataParallel(DistContext& context, Trainer& trainer)
    : context_(context), trainer_(trainer) {
  const DistOptions& o = context.options();  // checked by DistContext
  average_every_ = parse_sync(o.sync);
  std::unique_ptr<CommHook> hook = make_comm_hook(o.grad_compression, context.group());

  // The same start everywhere: rank 0's parameters and buffers.
  std::vector<torch::Tensor> state = trainer.module()->parameters();
  for (const torch::Tensor& b : trainer.module()->buffers()) {
    if (b.is_floating_point()) state.push_back(b);
  }
  c10d::BroadcastOptions from_rank0;
  from_rank0.rootRank = 0;
  through_one_flat_tensor(state, [&](torch::Tensor& flat) {
    std::vector<torch::Tensor> one{flat};
    context.group()->broadcast(one, from_rank0)->wait();
  });

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
  through_one_flat_tensor(trainer_.trainable(),
                          [&](torch::Tensor& flat) { param_hook_->reduce(0, flat); });
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
