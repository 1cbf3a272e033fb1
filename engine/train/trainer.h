// The training loop: epochs over a BatchSource in the order a Sampler gives, cross-entropy, an
// optimizer and a learning rate schedule, hooks for what data-parallel training and freeze
// schedules add, and evaluation. Trains every parameter of the module that requires grad.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/data/sampler.h"
#include "engine/models/block_model.h"
#include "engine/train/batch_sources.h"
#include "engine/models/precision.h"
#include "engine/train/train_hyper.h"

namespace recycle {

struct EpochResult {
  double seconds = 0;  // wall time of the epoch's training steps (no evaluation)
  double loss = 0;     // mean training loss
  double accuracy = 0; // training accuracy (train mode, as the batches went by)
  int64_t samples = 0;
};

// Where a run of Trainer::fit stands after a step: what a checkpoint keeps to resume in the
// middle of an epoch. A fit started at a position trains the rest of that epoch (the same
// order, without its first `batches` batches) and sums its loss and accuracy on from these.
struct EpochPosition {
  int64_t epoch = 0;    // the epoch it is in (0-based): the epochs done before it
  int64_t batches = 0;  // the batches of that epoch done
  int64_t step = 0;     // the steps done since the run's first (epoch * steps an epoch + batches)
  double loss_sum = 0;  // that epoch's training loss so far, summed over its samples
  int64_t correct = 0;  // its samples classified right so far (train mode)
  int64_t seen = 0;     // its samples so far
};

struct EvalResult {
  double accuracy = 0;
  double loss = 0;
  int64_t samples = 0;
};

// The optimizer of `hyper` (SGD with Nesterov momentum when momentum > 0, or AdamW) over
// `params`, at hyper.lr. Throws std::invalid_argument for an optimizer outside the enum.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<torch::Tensor>& params,
                                                        const TrainHyper& hyper);
// The learning rate of hyper.schedule at step `step` of `total` (from hyper.lr).
double scheduled_lr(const TrainHyper& hyper, int64_t step, int64_t total);

// What one training step gave.
struct StepOutcome {
  double loss = 0;       // mean cross-entropy of the batch
  int64_t correct = 0;   // predictions that matched the labels
};

// The loss of a step was not finite (the step stopped before backward).
class NonFiniteLoss : public std::runtime_error {
 public:
  explicit NonFiniteLoss(double loss);
  double loss() const { return loss_; }

 private:
  double loss_;
};

// What to say after "the loss became nan at epoch E, step S: " when a step on `batch` (samples
// indices[0..batch.size()) of `source`) gave a loss that is not finite. When a float input of
// the batch holds a value that is not finite, the loss is no fault of the learning rate: the
// input, the value and the first sample holding one, as the source explains it
// (BatchSource::explain_non_finite: a cached split names the record and says to rebuild).
// Else "training diverged (try a lower --lr)". Looks at the batch only then (no cost to a
// step whose loss is finite).
std::string why_not_finite(const Batch& batch, const int64_t* indices, const BatchSource& source);

// Trains one module (train mode). Not thread safe; hooks run on the calling thread.
//
// A step: set the scheduled learning rate, zero the gradients, forward the batch's features
// (under bf16 autocast with hyper.precision "bf16"), cross-entropy in fp32, backward, the
// after-backward hooks (gradients are ready: where gradient averaging goes), the optimizer
// step, the after-step hooks (where parameter averaging goes).
// An epoch: the epoch-start hooks (where a freeze schedule re-splits the model: it may call
// set_module or rebuild_optimizer), then the steps over the sampler's order for that epoch,
// then the epoch-end hooks. The parts of a step are named for LibTorch's profiler (the
// user scopes "step.load", "step.forward", "step.backward", "step.after_backward" (the
// hooks, when there are any), "step.optimizer" (the step and its hooks); see
// epoch_profiler.h).
class Trainer {
 public:
  using EpochHook = std::function<void(Trainer&, int64_t epoch)>;
  using StepHook = std::function<void(Trainer&, int64_t step)>;
  // After a step's figures are counted: where the run stands, and whether the step was its
  // epoch's last (the epoch-end hooks follow).
  using BatchEndHook = std::function<void(Trainer&, const EpochPosition&, bool last_of_epoch)>;

  // Throws std::invalid_argument for bad hyper-parameters (epochs, batch, lr, optimizer,
  // schedule, memory format or precision names), before any work.
  Trainer(BlockStack module, const TrainHyper& hyper);
  ~Trainer();

  void add_epoch_start_hook(EpochHook hook);
  // Runs after the epoch's last step, before its result is returned.
  void add_epoch_end_hook(EpochHook hook);
  void add_after_backward_hook(StepHook hook);
  // Runs after the optimizer step (where parameter averaging goes).
  void add_after_step_hook(StepHook hook);
  // Runs in fit after each step, once the step is counted (where a mid-epoch checkpoint goes).
  void add_batch_end_hook(BatchEndHook hook);

  BlockStack& module() { return module_; }
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  const TrainHyper& hyper() const { return hyper_; }
  // The module's parameters that require grad: what the optimizer updates.
  const std::vector<torch::Tensor>& trainable() const { return trainable_; }

  // Makes a new optimizer over the module's parameters that require grad now. A parameter
  // that stays keeps its optimizer state (momentum, Adam moments); one that left loses it.
  void rebuild_optimizer();
  // Trains `module` from now on (train mode) and rebuilds the optimizer.
  void set_module(BlockStack module);

  // While a TrainingLayout lives, the module is in train mode and laid out in
  // hyper.memory_format; contiguous NCHW again when it goes (fit keeps one).
  class TrainingLayout {
   public:
    explicit TrainingLayout(Trainer& trainer);
    ~TrainingLayout();
    TrainingLayout(const TrainingLayout&) = delete;
    TrainingLayout& operator=(const TrainingLayout&) = delete;

   private:
    Trainer& trainer_;
  };

  // One step on `batch` at learning rate `lr`, inside a TrainingLayout: zero the gradients,
  // forward, cross-entropy, backward, the after-backward hooks, the optimizer step (unless
  // `optimizer_step` is false: the caller replaces the parameters itself) and the after-step
  // hooks (each given `step`). Throws NonFiniteLoss, before backward, when the loss is not
  // finite.
  StepOutcome train_step(const Batch& batch, double lr, int64_t step, bool optimizer_step = true);

  // Runs epochs start.epoch .. hyper.epochs - 1, the first from its batch start.batches on (a
  // run resumed at `start`: the same orders, batches, steps and learning rates as the rest of a
  // whole run, and that epoch's figures summed on from start's), the module laid out in
  // hyper.memory_format meanwhile and in contiguous NCHW again when it returns or throws.
  // Returns the epochs it ran (or finished). Throws std::runtime_error when the loss stops
  // being finite, naming the epoch and step, and why_not_finite's account of it.
  std::vector<EpochResult> fit(BatchSource& train, const Sampler& sampler, bool progress,
                               const EpochPosition& start = {});

 private:
  BlockStack module_;
  TrainHyper hyper_;
  c10::MemoryFormat memory_format_;
  Precision precision_;
  bool fitting_ = false;  // inside fit: the module is laid out in memory_format_
  std::vector<torch::Tensor> trainable_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<EpochHook> epoch_start_hooks_;
  std::vector<EpochHook> epoch_end_hooks_;
  std::vector<StepHook> after_backward_hooks_;
  std::vector<StepHook> after_step_hooks_;
  std::vector<BatchEndHook> batch_end_hooks_;
};

// Trains `module` alone (rank 0 of 1), shuffling with hyper.seed and the epoch: a Trainer
// without hooks.
std::vector<EpochResult> train_module(BlockStack& module, BatchSource& train,
                                      const TrainHyper& hyper, bool progress);

// Accuracy and mean loss of `module` in eval mode, without grad, over the source in order.
EvalResult evaluate_module(BlockStack& module, BatchSource& eval, int64_t batch);

}  // namespace recycle
