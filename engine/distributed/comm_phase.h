// CommPhase: the gradient traffic of one stretch of a data-parallel run over which the trainable
// parameters stay the same (the whole run, unless a freeze schedule shrinks them). No LibTorch.
#pragma once

#include <cstdint>

namespace recycle {

struct CommPhase {
  int64_t first_step = 0;  // optimizer steps before this phase (0-based index of its first)
  int64_t steps = 0;
  int64_t trainable = 0;   // parameter elements whose gradients (or values) travel
  int64_t buckets = 0;     // gradient buckets (allreduce; 0 with average:K)
  int64_t bytes_sent = 0;  // payload this rank handed to collectives in the phase
  int64_t fp32_bytes = 0;  // what fp32 allreduce of the same tensors would have handed
  double bytes_per_step() const { return steps ? static_cast<double>(bytes_sent) / steps : 0.0; }
  double fp32_bytes_per_step() const {
    return steps ? static_cast<double>(fp32_bytes) / steps : 0.0;
  }
};

}  // namespace recycle
