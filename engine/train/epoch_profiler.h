// Profiles one training epoch with LibTorch's autograd profiler (the legacy one: every ATen op
// and the trainer's step scopes, on every thread that runs them) and writes it as a Chrome
// trace (JSON; open it in chrome://tracing or summarise it with bench/profile_table.py).
#pragma once

#include <cstdint>
#include <string>

namespace recycle {

class Trainer;

// Profiles epoch `epoch` (0-based) of the trainer's next fit and writes the trace to `path`
// when that epoch ends (or when the trainer is destroyed before). Throws
// std::invalid_argument when `path` cannot be written, before any training.
void profile_epoch(Trainer& trainer, const std::string& path, int64_t epoch);

// The epoch to profile for a run of `epochs` epochs: the second (the first warms the
// allocator and oneDNN's kernels up), or the only one.
inline int64_t epoch_to_profile(int64_t epochs) { return epochs > 1 ? 1 : 0; }

}  // namespace recycle
