// TrainHyper: the hyper-parameters of a training run. No LibTorch here.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace recycle {

struct TrainHyper {
  int64_t epochs = 4;
  int64_t batch = 128;
  double lr = 0.05;                 // peak learning rate
  std::string optimizer = "sgd";    // sgd (momentum, Nesterov) | adamw
  double momentum = 0.9;            // sgd only
  double weight_decay = 5e-4;
  std::string schedule = "cosine";  // cosine (per step, to 0) | step (x0.1 at 50% and 75%) | constant
  uint64_t seed = 0;                // shuffling and any newly initialised classifier
  // Layout of the trained module's 4-D tensors and of its 4-D inputs while it trains:
  // channels_last | contiguous (engine/models/memory_format.h).
  std::string memory_format = "channels_last";
  // Arithmetic of the training forward: fp32 | bf16 (mixed precision under LibTorch's
  // autocast; parameters, gradients and optimizer in fp32; engine/train/precision.h).
  std::string precision = "fp32";

  // Samples per batch when evaluating (no gradients to hold: at least 256).
  int64_t eval_batch() const { return std::max<int64_t>(batch, 256); }
};

}  // namespace recycle
