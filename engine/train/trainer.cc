#include "engine/train/trainer.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "engine/models/memory_format.h"
#include "engine/models/torch_compat.h"
#include "engine/util/progress.h"

namespace recycle {

namespace {

std::vector<torch::Tensor> trainable_parameters(BlockStack& module) {
  std::vector<torch::Tensor> params;
  for (auto& p : module->parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  return params;
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<torch::Tensor>& params,
                                                        const TrainHyper& h) {
  switch (h.optimizer) {
    case Optimizer::kSgd:
      return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(h.lr)
                                                             .momentum(h.momentum)
                                                             .nesterov(h.momentum > 0)
                                                             .weight_decay(h.weight_decay));
    case Optimizer::kAdamW:
      return std::make_unique<torch::optim::AdamW>(
          params, torch::optim::AdamWOptions(h.lr).weight_decay(h.weight_decay));
  }
  throw std::invalid_argument(optimizer_name(h.optimizer));  // outside the enum: it throws first
}

double scheduled_lr(const TrainHyper& h, int64_t step, int64_t total) {
  const double progress = total > 0 ? static_cast<double>(step) / total : 0.0;
  switch (h.schedule) {
    case Schedule::kCosine:
      return 0.5 * h.lr * (1.0 + std::cos(M_PI * progress));
    case Schedule::kStep:
      return h.lr * (progress < 0.5 ? 1.0 : progress < 0.75 ? 0.1 : 0.01);
    case Schedule::kConstant:
      return h.lr;
  }
  throw std::invalid_argument(schedule_name(h.schedule));  // outside the enum: it throws first
}

std::string why_not_finite(const Batch& batch, const int64_t* indices, const BatchSource& source) {
  for (const auto& [name, t] : batch.inputs) {
    if (!t.defined() || !t.is_floating_point() || t.dim() == 0 || t.numel() == 0) continue;
    const int64_t rows = t.size(0);
    const torch::Tensor bad_rows =
        torch::isfinite(t).logical_not().reshape({rows, -1}).any(1).to(torch::kCPU).nonzero();
    if (bad_rows.size(0) == 0) continue;
    const int64_t row = bad_rows[0][0].item<int64_t>();
    const torch::Tensor values = t[row].reshape({-1}).to(torch::kCPU, torch::kFloat32);
    const int64_t at = torch::isfinite(values).logical_not().nonzero()[0][0].item<int64_t>();
    const float v = values[at].item<float>();
    return "input '" + name + "' holds " + (std::isnan(v) ? "NaN" : v < 0 ? "-inf" : "inf") +
           " (value " + std::to_string(at) + " of row " + std::to_string(row) +
           " of the batch): " + source.explain_non_finite(indices[row]);
  }
  return "training diverged (try a lower --lr)";
}

NonFiniteLoss::NonFiniteLoss(double loss)
    : std::runtime_error("the loss became " + std::to_string(loss)), loss_(loss) {}

Trainer::Trainer(BlockStack module, const TrainHyper& hyper)
    : module_(std::move(module)),
      hyper_(hyper),
      memory_format_(to_c10(hyper.memory_format)),
      precision_(hyper.precision) {
  hyper.validate();
  rebuild_optimizer();
}

Trainer::~Trainer() = default;

void Trainer::add_epoch_start_hook(EpochHook hook) {
  epoch_start_hooks_.push_back(std::move(hook));
}
void Trainer::add_epoch_end_hook(EpochHook hook) { epoch_end_hooks_.push_back(std::move(hook)); }
void Trainer::add_after_backward_hook(StepHook hook) {
  after_backward_hooks_.push_back(std::move(hook));
}

void Trainer::add_after_step_hook(StepHook hook) { after_step_hooks_.push_back(std::move(hook)); }

void Trainer::add_batch_end_hook(BatchEndHook hook) { batch_end_hooks_.push_back(std::move(hook)); }

void Trainer::rebuild_optimizer() {
  trainable_ = trainable_parameters(module_);
  std::unique_ptr<torch::optim::Optimizer> fresh = make_optimizer(trainable_, hyper_);
  if (optimizer_) {
    auto& old_state = optimizer_->state();
    for (const torch::Tensor& p : trainable_) {
      auto it = old_state.find(compat::optimizer_state_key(p));
      if (it != old_state.end()) fresh->state()[it->first] = it->second->clone();
    }
  }
  optimizer_ = std::move(fresh);
}

void Trainer::set_module(BlockStack module) {
  if (fitting_) set_memory_format(*module_, c10::MemoryFormat::Contiguous);
  module_ = std::move(module);
  if (fitting_) set_memory_format(*module_, memory_format_);
  module_->train();
  rebuild_optimizer();
}

Trainer::TrainingLayout::TrainingLayout(Trainer& trainer) : trainer_(trainer) {
  trainer_.module_->train();
  set_memory_format(*trainer_.module_, trainer_.memory_format_);
  trainer_.fitting_ = true;
}

Trainer::TrainingLayout::~TrainingLayout() {
  trainer_.fitting_ = false;
  set_memory_format(*trainer_.module_, c10::MemoryFormat::Contiguous);
}

StepOutcome Trainer::train_step(const Batch& batch, double lr, int64_t step, bool optimizer_step) {
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
  torch::Tensor logits, loss;
  {
    RECORD_USER_SCOPE("step.forward");
    // Gradients to none rather than to zero (what Python's zero_grad(set_to_none=True)
    // does): backward then hands its result over instead of adding it to zeros.
    for (torch::Tensor& p : trainable_) p.mutable_grad().reset();
    {
      AutocastScope autocast(precision_, batch.features().device().type());
      // One input in the module's memory format; several (a record of several tensors) as
      // they are, to a module that takes them all.
      logits = batch.inputs.size() == 1
                   ? module_->forward(in_memory_format(batch.features(), memory_format_))
                   : module_->forward_all(batch.tensors());
    }
    // bf16 logits from an autocast forward: the loss and its gradient in fp32.
    logits = logits.to(torch::kFloat);
    loss = torch::nn::functional::cross_entropy(logits, batch.labels);
  }
  StepOutcome out;
  out.loss = loss.item<double>();
  if (!std::isfinite(out.loss)) throw NonFiniteLoss(out.loss);
  {
    RECORD_USER_SCOPE("step.backward");
    loss.backward();
  }
  if (!after_backward_hooks_.empty()) {
    RECORD_USER_SCOPE("step.after_backward");
    for (const StepHook& hook : after_backward_hooks_) hook(*this, step);
  }
  {
    RECORD_USER_SCOPE("step.optimizer");
    if (optimizer_step) optimizer_->step();
    for (const StepHook& hook : after_step_hooks_) hook(*this, step);
  }
  out.correct = logits.argmax(1).eq(batch.labels).sum().item<int64_t>();
  return out;
}

namespace {

// `at` as epoch `epoch` starts: at its first batch, or (a run resumed inside it) at batch
// `done`, the batches before it gone from `order` and the epoch's figures so far `from`'s.
// Returns the samples skipped.
int64_t start_epoch(int64_t epoch, int64_t done, const EpochPosition& from, int64_t batch,
                    std::vector<int64_t>* order, EpochPosition* at) {
  at->epoch = epoch;
  at->batches = done;
  at->loss_sum = done ? from.loss_sum : 0;
  at->correct = done ? from.correct : 0;
  at->seen = done ? from.seen : 0;
  const size_t skip = std::min(order->size(), static_cast<size_t>(done * batch));
  order->erase(order->begin(), order->begin() + static_cast<std::ptrdiff_t>(skip));
  return static_cast<int64_t>(skip);
}

}  // namespace

std::vector<EpochResult> Trainer::fit(BatchSource& train, const Sampler& sampler, bool progress,
                                      const EpochPosition& from) {
  if (sampler.size() != train.size()) {
    throw std::invalid_argument("the sampler covers " + std::to_string(sampler.size()) +
                                " samples, the source has " + std::to_string(train.size()));
  }
  const int64_t per_epoch = sampler.samples_per_rank();
  const int64_t steps_per_epoch = (per_epoch + hyper_.batch - 1) / hyper_.batch;
  const int64_t total_steps = steps_per_epoch * hyper_.epochs;
  const int64_t first_epoch = std::max<int64_t>(from.epoch, 0);
  const int64_t first_batches = std::clamp<int64_t>(from.batches, 0, steps_per_epoch);
  EpochPosition at;  // where the run stands, after each step
  at.step = first_epoch * steps_per_epoch + first_batches;

  std::vector<EpochResult> results;
  const TrainingLayout layout(*this);
  Batch batch;
  std::vector<int64_t> next_order;  // planned during the last step of the epoch before
  for (int64_t epoch = first_epoch; epoch < hyper_.epochs; ++epoch) {
    for (const EpochHook& hook : epoch_start_hooks_) hook(*this, epoch);
    Progress bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(hyper_.epochs),
                 per_epoch, progress);
    const auto start = std::chrono::steady_clock::now();
    std::vector<int64_t> order =
        next_order.empty() ? sampler.epoch_order(epoch) : std::move(next_order);
    next_order.clear();
    const int64_t skipped = start_epoch(epoch, epoch == first_epoch ? first_batches : 0, from,
                                        hyper_.batch, &order, &at);
    bar.advance(skipped);
    train.plan(order, hyper_.batch);  // a prefetching source loads ahead
    for (size_t pos = 0; pos < order.size(); pos += static_cast<size_t>(hyper_.batch)) {
      const int64_t n = std::min<int64_t>(hyper_.batch, static_cast<int64_t>(order.size() - pos));
      const bool last = pos + static_cast<size_t>(n) >= order.size();
      {
        RECORD_USER_SCOPE("step.load");
        train.load(order.data() + pos, n, &batch);
        if (last && epoch + 1 < hyper_.epochs) {
          // The next epoch's first batches load behind this last step (its plan, made again
          // when that epoch starts, keeps them).
          next_order = sampler.epoch_order(epoch + 1);
          train.plan(next_order, hyper_.batch);
        }
      }
      StepOutcome out;
      try {
        out = train_step(batch, scheduled_lr(hyper_, at.step, total_steps), at.step);
      } catch (const NonFiniteLoss& e) {
        throw std::runtime_error(std::string(e.what()) + " at epoch " + std::to_string(epoch + 1) +
                                 ", step " + std::to_string(at.batches + 1) + " of " +
                                 std::to_string(steps_per_epoch) + ": " +
                                 why_not_finite(batch, order.data() + pos, train));
      }
      ++at.step;
      ++at.batches;
      at.loss_sum += out.loss * n;
      at.correct += out.correct;
      at.seen += n;
      bar.advance(n);
      bar.set_suffix(" loss " + std::to_string(at.loss_sum / at.seen).substr(0, 6));
      for (const BatchEndHook& hook : batch_end_hooks_) hook(*this, at, last);
    }
    bar.finish();
    EpochResult r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.samples = at.seen;
    r.loss = at.seen ? at.loss_sum / at.seen : 0.0;
    r.accuracy = at.seen ? static_cast<double>(at.correct) / at.seen : 0.0;
    for (const EpochHook& hook : epoch_end_hooks_) hook(*this, epoch);
    results.push_back(r);
  }
  return results;
}

std::vector<EpochResult> train_module(BlockStack& module, BatchSource& train,
                                      const TrainHyper& hyper, bool progress) {
  Trainer trainer(module, hyper);
  const Sampler sampler(train.size(), /*shuffle=*/true, hyper.seed);
  return trainer.fit(train, sampler, progress);
}

EvalResult evaluate_module(BlockStack& module, BatchSource& eval, int64_t batch) {
  torch::NoGradGuard no_grad;
  module->eval();
  EvalResult r;
  double loss_sum = 0;
  int64_t correct = 0;
  const Sampler sampler(eval.size(), /*shuffle=*/false, 0);
  const std::vector<int64_t> order = sampler.epoch_order(0);
  eval.plan(order, batch);
  Batch b;
  for (size_t pos = 0; pos < order.size(); pos += static_cast<size_t>(batch)) {
    const int64_t n = std::min<int64_t>(batch, static_cast<int64_t>(order.size() - pos));
    eval.load(order.data() + pos, n, &b);
    torch::Tensor logits = module->forward_all(b.tensors());
    loss_sum += torch::nn::functional::cross_entropy(logits, b.labels).item<double>() * n;
    correct += logits.argmax(1).eq(b.labels).sum().item<int64_t>();
    r.samples += n;
  }
  module->train();
  r.loss = r.samples ? loss_sum / r.samples : 0.0;
  r.accuracy = r.samples ? static_cast<double>(correct) / r.samples : 0.0;
  return r;
}

}  // namespace recycle
