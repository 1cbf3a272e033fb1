// The training loop: epochs over a BatchSource, cross-entropy, an optimizer and a learning
// rate schedule, and evaluation. Trains every parameter of `module` that requires grad.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "engine/train/batch_sources.h"
#include "engine/models/block_model.h"
#include "engine/train/train_hyper.h"

namespace recycle {

struct EpochResult {
  double seconds = 0;  // wall time of the epoch's training steps (no evaluation)
  double loss = 0;     // mean training loss
  double accuracy = 0; // training accuracy (train mode, as the batches went by)
  int64_t samples = 0;
};

struct EvalResult {
  double accuracy = 0;
  double loss = 0;
  int64_t samples = 0;
};

// Trains `module` (train mode) for hyper.epochs epochs, shuffling with hyper.seed + epoch.
// Throws std::invalid_argument for unknown optimizer or schedule names.
std::vector<EpochResult> train_module(BlockStack& module, BatchSource& train,
                                      const TrainHyper& hyper, bool progress);

// Accuracy and mean loss of `module` in eval mode, without grad.
EvalResult evaluate_module(BlockStack& module, BatchSource& eval, int64_t batch);

}  // namespace recycle
