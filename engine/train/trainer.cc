#include "engine/train/trainer.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "engine/util/progress.h"

namespace recycle {

namespace {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<torch::Tensor>& params,
                                                        const TrainHyper& h) {
  if (h.optimizer == "sgd") {
    return std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(h.lr).momentum(h.momentum).nesterov(h.momentum > 0)
                    .weight_decay(h.weight_decay));
  }
  if (h.optimizer == "adamw") {
    return std::make_unique<torch::optim::AdamW>(
        params, torch::optim::AdamWOptions(h.lr).weight_decay(h.weight_decay));
  }
  throw std::invalid_argument("unknown optimizer '" + h.optimizer + "' (sgd, adamw)");
}

// Learning rate at step `step` of `total`.
double scheduled_lr(const TrainHyper& h, int64_t step, int64_t total) {
  const double progress = total > 0 ? static_cast<double>(step) / total : 0.0;
  if (h.schedule == "cosine") return 0.5 * h.lr * (1.0 + std::cos(M_PI * progress));
  if (h.schedule == "step") return h.lr * (progress < 0.5 ? 1.0 : progress < 0.75 ? 0.1 : 0.01);
  if (h.schedule == "constant") return h.lr;
  throw std::invalid_argument("unknown schedule '" + h.schedule + "' (cosine, step, constant)");
}

}  // namespace

std::vector<EpochResult> train_module(BlockStack& module, BatchSource& train,
                                      const TrainHyper& hyper, bool progress) {
  if (hyper.epochs < 1) throw std::invalid_argument("--epochs must be at least 1");
  if (hyper.batch < 1) throw std::invalid_argument("--batch must be at least 1");
  if (!(hyper.lr > 0)) throw std::invalid_argument("--lr must be positive");
  scheduled_lr(hyper, 0, 1);  // reject an unknown schedule before any work
  std::vector<torch::Tensor> params;
  for (auto& p : module->parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  auto optimizer = make_optimizer(params, hyper);
  const int64_t steps_per_epoch = (train.size() + hyper.batch - 1) / hyper.batch;
  const int64_t total_steps = steps_per_epoch * hyper.epochs;
  int64_t step = 0;

  std::vector<EpochResult> results;
  module->train();
  for (int64_t epoch = 0; epoch < hyper.epochs; ++epoch) {
    Progress bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(hyper.epochs),
                 train.size(), progress);
    const auto start = std::chrono::steady_clock::now();
    train.start_epoch(/*shuffle=*/true, hyper.seed * 1000003 + static_cast<uint64_t>(epoch));
    double loss_sum = 0;
    int64_t correct = 0, seen = 0;
    torch::Tensor x, y;
    while (train.next(hyper.batch, &x, &y)) {
      const double lr = scheduled_lr(hyper, step++, total_steps);
      for (auto& group : optimizer->param_groups()) group.options().set_lr(lr);
      optimizer->zero_grad();
      torch::Tensor logits = module->forward(x);
      torch::Tensor loss = torch::nn::functional::cross_entropy(logits, y);
      const double loss_value = loss.item<double>();
      if (!std::isfinite(loss_value)) {
        throw std::runtime_error("the loss became " + std::to_string(loss_value) + " at epoch " +
                                 std::to_string(epoch + 1) + ", step " +
                                 std::to_string(step - epoch * steps_per_epoch) + " of " +
                                 std::to_string(steps_per_epoch) +
                                 ": training diverged (try a lower --lr)");
      }
      loss.backward();
      optimizer->step();
      const int64_t n = y.size(0);
      loss_sum += loss_value * n;
      correct += logits.argmax(1).eq(y).sum().item<int64_t>();
      seen += n;
      bar.advance(n);
      bar.set_suffix(" loss " + std::to_string(loss_sum / seen).substr(0, 6));
    }
    bar.finish();
    EpochResult r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.samples = seen;
    r.loss = seen ? loss_sum / seen : 0.0;
    r.accuracy = seen ? static_cast<double>(correct) / seen : 0.0;
    results.push_back(r);
  }
  return results;
}

EvalResult evaluate_module(BlockStack& module, BatchSource& eval, int64_t batch) {
  torch::NoGradGuard no_grad;
  module->eval();
  eval.start_epoch(/*shuffle=*/false, 0);
  EvalResult r;
  double loss_sum = 0;
  int64_t correct = 0;
  torch::Tensor x, y;
  while (eval.next(batch, &x, &y)) {
    torch::Tensor logits = module->forward(x);
    loss_sum += torch::nn::functional::cross_entropy(logits, y).item<double>() * y.size(0);
    correct += logits.argmax(1).eq(y).sum().item<int64_t>();
    r.samples += y.size(0);
  }
  module->train();
  r.loss = r.samples ? loss_sum / r.samples : 0.0;
  r.accuracy = r.samples ? static_cast<double>(correct) / r.samples : 0.0;
  return r;
}

}  // namespace recycle
