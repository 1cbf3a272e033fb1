// DataParallel: makes a Trainer one rank of a data-parallel job. On construction every rank
// takes rank 0's parameters and buffers (one broadcast), so all start from the same head. Then,
// by DistOptions::sync:
//   allreduce    gradients are averaged every step by a GradReducer (buckets reduced during
//                backward, through the --grad-compression hook) before the optimizer step;
//   average:K    each rank takes K local optimizer steps, then the parameters are averaged
//                (fp32 allreduce); finish() averages once more after the last step.
// Buffers (BatchNorm running statistics) are not averaged: each rank keeps statistics of its
// own batches after the initial broadcast, as DDP does by default when buffers are broadcast
// only at the start; rank 0's are the ones written.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/dist/dist_context.h"
#include "engine/dist/grad_reducer.h"
#include "engine/train/trainer.h"

namespace recycle {

struct DataParallelStats {
  int64_t steps = 0;
  int64_t buckets = 0;          // allreduce only
  int64_t bytes_sent = 0;       // payload this rank handed to collectives (gradients or parameters)
  int64_t fp32_bytes = 0;       // what fp32 allreduce of the same tensors would have handed
  double bytes_per_step() const { return steps ? static_cast<double>(bytes_sent) / steps : 0.0; }
  double fp32_bytes_per_step() const { return steps ? static_cast<double>(fp32_bytes) / steps : 0.0; }
  double compression_ratio() const { return bytes_sent ? static_cast<double>(fp32_bytes) / bytes_sent : 0.0; }
};

class DataParallel {
 public:
  // Installs hooks on `trainer` (which must outlive this). Throws std::invalid_argument for a
  // bad --sync or --grad-compression, or compression with average:K; CommFailure when the
  // initial broadcast fails.
  DataParallel(DistContext& context, Trainer& trainer);
  ~DataParallel();

  // After Trainer::fit: with average:K, averages the parameters once more unless the last step
  // just did. Every rank must call it.
  void finish();
  DataParallelStats stats() const;

 private:
  void average_parameters();  // throws CommFailure

  DistContext& context_;
  Trainer& trainer_;
  int64_t average_every_ = 0;
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<CommHook> param_hook_;  // average:K: fp32 allreduce of the parameters
  int64_t steps_ = 0;
  int64_t last_average_ = 0;
};

}  // namespace recycle
