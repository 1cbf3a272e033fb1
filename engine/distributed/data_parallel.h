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
//
// The trainable set may shrink between epochs (a freeze schedule calls Trainer::set_module): at
// the start of every epoch the trainer's trainable parameters are compared with those being
// reduced, and when they differ a new phase begins: a new GradReducer (buckets of the new set
// only; frozen parameters send nothing) with a new communication hook (per-bucket state such
// as AdaComp's residues starts again). Each phase's traffic is reported on its own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/distributed/dist_context.h"
#include "engine/distributed/grad_reducer.h"
#include "engine/train/trainer.h"
#include "recycle/train.h"

namespace recycle {

struct DataParallelStats {
  int64_t steps = 0;
  int64_t buckets = 0;     // allreduce only (the last phase's)
  int64_t bytes_sent = 0;  // payload this rank handed to collectives (gradients or parameters)
  int64_t fp32_bytes = 0;  // what fp32 allreduce of the same tensors would have handed
  double bytes_per_step() const { return steps ? static_cast<double>(bytes_sent) / steps : 0.0; }
  double fp32_bytes_per_step() const {
    return steps ? static_cast<double>(fp32_bytes) / steps : 0.0;
  }
  double compression_ratio() const {
    return bytes_sent ? static_cast<double>(fp32_bytes) / bytes_sent : 0.0;
  }
  std::vector<CommPhase> phases;  // one per trainable set, in order; their sums are the above
};

// Every rank's `tensors` become rank 0's (one broadcast of one flat float32 copy; every rank
// calls it with tensors of the same shapes). Throws CommFailure when the broadcast fails.
void broadcast_from_rank0(DistContext& context, const std::vector<torch::Tensor>& tensors);
// Every rank's `tensors` become the sum over the ranks (one allreduce of one flat float32 copy:
// counts are exact below 2^24). Throws CommFailure when the allreduce fails.
void allreduce_sum(DistContext& context, const std::vector<torch::Tensor>& tensors);

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
  // Ends the current phase (if any) and starts one over trainer_.trainable().
  void start_phase();

  DistContext& context_;
  Trainer& trainer_;
  int64_t average_every_ = 0;
  std::vector<torch::Tensor> reduced_;  // the current phase's parameters
  std::vector<CommPhase> phases_;       // ended phases
  int64_t phase_start_ = 0;             // steps_ when the current phase began
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<CommHook> param_hook_;  // average:K: fp32 allreduce of the parameters
  int64_t steps_ = 0;
  int64_t last_average_ = 0;
};

}  // namespace recycle
