// Communication hooks: how one gradient bucket travels between the ranks of a process group
// and comes back as the ranks' average. The GradReducer (grad_reducer.h) calls them on its
// communication thread, a bucket at a time, in bucket order, which is the same on every rank.
#pragma once

#include <torch/torch.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <vector>

#include "recycle/options.h"

namespace recycle {

// A collective or store operation failed: a peer was lost, or timed out. Data-parallel code
// throws this (not a plain runtime_error) so that the job can tell a failure of the group,
// which it explains by naming the lost rank, from a failure of its own (a corrupt record, a
// loss that is not finite).
class CommFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CommHook {
 public:
  virtual ~CommHook() = default;
  // `grad` is a bucket's local gradients, flat, float32, contiguous. On return it holds the
  // average over the group's ranks (or this hook's estimate of it). `bucket` is the bucket's
  // index, stable from step to step (hooks keep per-bucket state, such as residues, by it).
  // Throws what the collectives throw (a lost peer, a timeout).
  virtual void reduce(int64_t bucket, torch::Tensor& grad) = 0;
  virtual std::string name() const = 0;

  // Bytes this rank handed to collectives so far, and what fp32 allreduce of the same buckets
  // would have handed (the compression ratio is their quotient). Thread safe.
  int64_t bytes_sent() const { return bytes_sent_.load(); }
  int64_t fp32_bytes() const { return fp32_bytes_.load(); }

 protected:
  void count(int64_t sent, int64_t fp32) {
    bytes_sent_ += sent;
    fp32_bytes_ += fp32;
  }

 private:
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> fp32_bytes_{0};
};

// The hook of `compression` (include/recycle/options.h); its name() is grad_compression_name's.
//   none  fp32 allreduce, divided by the world size (comm_hook.cc)
//   fp16  divided by the world size, cast to half, allreduce, back to float (fp16_hook.cc)
//   topk  AdaComp: binned adaptive selection, 8-bit log-quantised values, error feedback,
//         allgather (adacomp_hook.h)
// A hook's reduce() is called by one thread at a time (the communication thread); "topk" keeps
// per-bucket residues and is not safe to call concurrently. bytes_sent()/fp32_bytes() may be
// read from any thread.
std::unique_ptr<CommHook> make_comm_hook(GradCompression compression,
                                         c10::intrusive_ptr<c10d::ProcessGroup> group);

// The fp16 hook (fp16_hook.cc); the topk hook is make_adacomp_hook in adacomp_hook.h.
std::unique_ptr<CommHook> make_fp16_hook(c10::intrusive_ptr<c10d::ProcessGroup> group);

}  // namespace recycle
