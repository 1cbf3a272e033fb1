// Training from shards (recycle-train --sharded): see train_job_parts.h.
#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "cache/shard_rule.h"  // shard_words
#include "engine/distributed/dist_context.h"
#include "engine/jobs/train_job_parts.h"

namespace recycle {

void check_split_shard(const TrainOptions& o, const DistContext* dist, const Manifest& m,
                       const std::string& split) {
  const SplitShard& have = m.splits.at(split).shard;
  const bool sharded = o.dist.sharded && dist != nullptr;
  const int rank = dist ? dist->rank() : 0, world = dist ? dist->world() : 1;
  const std::string where = "cache " + o.cache_dir + " holds " + shard_words(have) + " of split " +
                            split;
  if (!sharded && have.sharded()) {
    throw std::invalid_argument(where + " (built with recycle-build --sharded): train it with " +
                                "--sharded as rank " + std::to_string(have.index) + " of " +
                                std::to_string(have.count) + ", each rank on its own shard");
  }
  if (!sharded) return;
  if (!have.sharded()) {
    throw std::invalid_argument(where + ", not a shard: --sharded trains each rank on its own "
                                "shard (build them with recycle-build --sharded)");
  }
  if (have.count == world && have.index != rank) {
    throw std::invalid_argument(where + ", and this is rank " + std::to_string(rank) + " of " +
                                std::to_string(world) + ": give each rank the cache of its own "
                                "shard (a --cache with {rank} in it names each rank's)");
  }
  if (have.count != world) {
    throw std::invalid_argument(
        where + ", and this is rank " + std::to_string(rank) + " of " + std::to_string(world) +
        ": train with as many ranks as shards (" + std::to_string(have.count) +
        "), or build the shards again with recycle-build --sharded and " + std::to_string(world) +
        " ranks");
  }
}

int64_t even_share(DistContext& dist, int64_t samples) {
  std::vector<torch::Tensor> t{torch::tensor({samples}, torch::kInt64)};
  dist.group()->allreduce(t)->wait();  // a sum
  const int64_t world = dist.world();
  return (t[0].item<int64_t>() + world - 1) / world;
}

EvalResult evaluation_of_every_shard(DistContext& dist, const EvalResult& own) {
  const double n = static_cast<double>(own.samples);
  std::vector<torch::Tensor> t{torch::tensor({own.accuracy * n, own.loss * n, n}, torch::kFloat64)};
  dist.group()->allreduce(t)->wait();
  const double correct = t[0][0].item<double>(), loss = t[0][1].item<double>();
  const double samples = t[0][2].item<double>();
  EvalResult all;
  all.samples = static_cast<int64_t>(samples + 0.5);
  all.accuracy = samples > 0 ? correct / samples : 0;
  all.loss = samples > 0 ? loss / samples : 0;
  return all;
}

}  // namespace recycle
