// TrainHyper: the hyper-parameters of a training run. No LibTorch here.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "recycle/options.h"

namespace recycle {

struct TrainHyper {
  int64_t epochs = 4;
  int64_t batch = 128;
  double lr = 0.05;                 // peak learning rate
  Optimizer optimizer = Optimizer::kSgd;
  double momentum = 0.9;            // sgd only
  double weight_decay = 5e-4;
  Schedule schedule = Schedule::kCosine;
  uint64_t seed = 0;                // shuffling and any newly initialised classifier
  // Layout of the trained module's 4-D tensors and of its 4-D inputs while it trains:
  // channels_last | contiguous (engine/models/memory_format.h).
  MemoryFormat memory_format = MemoryFormat::kChannelsLast;
  // Arithmetic of the training forward: fp32 | bf16 (mixed precision under LibTorch's
  // autocast; parameters, gradients and optimizer in fp32; engine/train/precision.h).
  Precision precision = Precision::kFp32;

  // Samples per batch when evaluating (no gradients to hold: at least 256).
  int64_t eval_batch() const { return std::max<int64_t>(batch, 256); }

  // Epochs and batch at least 1, a positive learning rate. Throws std::invalid_argument with
  // one line naming the flag.
  void validate() const;
};

}  // namespace recycle
