// The parameter server of asynchronous training (--sync async; Downpour SGD, Dean et al. 2012):
// how a head's trainable parameters are cut into buckets and dealt to S server shards, a
// shard's state (its parameters, the job's optimizer, a version per bucket), and how a
// worker's pushed gradients and fetched parameters travel (fp32, fp16, or AdaComp top-k with
// error feedback).
// The transport and the worker's loop are async_sgd.h's.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/distributed/adacomp_hook.h"
#include "engine/train/train_hyper.h"
#include "recycle/options.h"

namespace recycle {

// The trainable parameters, flattened in order into one vector of `total` floats, cut into
// buckets of at most `bucket_elements` consecutive elements; bucket b belongs to server
// b % servers. A shard is its server's buckets, concatenated in bucket order.
class ParamLayout {
 public:
  // Throws std::invalid_argument unless total >= 1, bucket_elements >= 1 and servers >= 1.
  ParamLayout(int64_t total, int64_t bucket_elements, int servers);

  int servers() const { return servers_; }
  int64_t total() const { return total_; }
  int64_t buckets() const { return static_cast<int64_t>(ranges_.size()); }
  // Bucket b's [begin, end) in the flat vector.
  std::pair<int64_t, int64_t> range(int64_t bucket) const { return ranges_[bucket]; }
  // The buckets of `server`, in order, and how many elements they hold together.
  std::vector<int64_t> buckets_of(int server) const;
  int64_t shard_size(int server) const;

  // `server`'s shard of a flat vector, and the other way round (writes only its ranges).
  torch::Tensor gather(const torch::Tensor& flat, int server) const;
  void scatter(const torch::Tensor& shard, int server, torch::Tensor& flat) const;

 private:
  int64_t total_;
  int servers_;
  std::vector<std::pair<int64_t, int64_t>> ranges_;
};

// One server's state. The optimizer is the job's (make_optimizer over the shard as one flat
// parameter: SGD with momentum and AdamW are elementwise, so this is the same update as
// per-parameter state). Thread safe.
class ParamShard {
 public:
  // `initial`: the shard's starting values (copied). `world`: the workers at the start;
  // `sync_steps`: the steps of the whole run as synchronous training would count them (the
  // learning-rate schedule's length); `buckets`: how many buckets the shard holds;
  // `done_sync_steps`: where in the schedule it starts (a run resumed from a checkpoint).
  ParamShard(const torch::Tensor& initial, const TrainHyper& hyper, int world, int64_t sync_steps,
             int64_t buckets, int64_t done_sync_steps = 0);

  // Applies one push: `grad` is the mean gradient of a worker's `steps` local steps. The step
  // is taken at the schedule's learning rate for the steps applied so far (counted as
  // synchronous steps: local steps over the world), times steps / world, so that W workers'
  // pushes move the parameters as much as one synchronous step of W ranks. Returns the
  // version after it (every bucket of the shard advances by one).
  int64_t apply(const torch::Tensor& grad, int64_t steps);
  // A copy of the parameters and their version.
  torch::Tensor snapshot(int64_t* version) const;
  int64_t version() const;
  std::vector<int64_t> bucket_versions() const;
  int64_t pushes() const;

 private:
  int64_t current_version() const;  // the lowest bucket's; mutex_ held

  TrainHyper hyper_;
  int world_;
  int64_t sync_steps_;
  mutable std::mutex mutex_;
  torch::Tensor param_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<int64_t> versions_;
  int64_t local_steps_ = 0;  // applied so far, over all pushes
  int64_t pushes_ = 0;
};

// A worker's side of pushes to one server: encodes the shard's mean gradient for the wire by
// `compression` (fp32 bytes; fp16 bytes; topk: per bucket a float scale, an int32 byte count
// and AdaComp's pairs, the bucket's residue kept for error feedback). Not thread safe.
class PushEncoder {
 public:
  PushEncoder(GradCompression compression, const ParamLayout& layout, int server);
  std::vector<uint8_t> encode(const torch::Tensor& shard_grad);

 private:
  GradCompression compression_;
  std::vector<int64_t> buckets_;
  std::vector<int64_t> sizes_;
  AdaCompCompressor adacomp_;
};

// A server's side of one remote worker's fetches: the bytes that bring the worker's copy of the
// shard up to date, by `compression`. none: the shard itself, fp32. fp16: the difference
// between the shard and the worker's copy, in halves; the server's record of the copy advances
// by exactly what they carry, so their rounding is sent with a later fetch. topk: AdaComp over
// the change since the last fetch; its residue is what the worker's copy still lacks, so what
// is not sent now goes with a later fetch. The worker applies them with apply_fetch, and both
// sides' copies stay bit-identical. Not thread safe.
class FetchEncoder {
 public:
  // `initial`: the shard as the worker holds it at the start (every rank starts from rank 0's).
  FetchEncoder(GradCompression compression, const ParamLayout& layout, int server,
               const torch::Tensor& initial);
  std::vector<uint8_t> encode(const torch::Tensor& shard);

 private:
  GradCompression compression_;
  const ParamLayout& layout_;
  int server_;
  PushEncoder changes_;  // the encoding (topk: the AdaComp state over the changes)
  torch::Tensor base_;   // fp16: the worker's copy; topk: the shard at the last fetch
};

// A shard's floats from a push's or a fetch's bytes (a gradient, the shard, or a change).
// Throws std::runtime_error for bytes that do not fit the shard (a size that does not match, a
// bad packet).
torch::Tensor decode_shard(GradCompression compression, const ParamLayout& layout, int server,
                           const uint8_t* bytes, int64_t size);

// A worker's side of a fetch: `copy` (its copy of the shard) becomes what the server's
// FetchEncoder encoded in `bytes`.
void apply_fetch(GradCompression compression, const ParamLayout& layout, int server,
                 const uint8_t* bytes, int64_t size, torch::Tensor& copy);

}  // namespace recycle
