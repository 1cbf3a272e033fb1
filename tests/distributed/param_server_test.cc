// The parameter server's pieces: the layout of buckets over servers, a shard's optimizer step
// and versions, and pushes and fetches on the wire (fp32, fp16, AdaComp top-k).
#include "engine/distributed/param_server.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

namespace recycle {
namespace {

TEST(ParamLayout, DealsBucketsRoundTheServersAndGatherScatterRoundTrip) {
  const ParamLayout layout(/*total=*/10, /*bucket_elements=*/3, /*servers=*/2);
  EXPECT_EQ(layout.buckets(), 4);  // [0,3) [3,6) [6,9) [9,10)
  EXPECT_EQ(layout.buckets_of(0), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(layout.buckets_of(1), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(layout.shard_size(0), 6);
  EXPECT_EQ(layout.shard_size(1), 4);
  const torch::Tensor flat = torch::arange(10, torch::kFloat);
  EXPECT_TRUE(
      torch::equal(layout.gather(flat, 0), torch::tensor({0, 1, 2, 6, 7, 8}, torch::kFloat)));
  EXPECT_TRUE(torch::equal(layout.gather(flat, 1), torch::tensor({3, 4, 5, 9}, torch::kFloat)));
  torch::Tensor back = torch::zeros({10});
  layout.scatter(layout.gather(flat, 0), 0, back);
  layout.scatter(layout.gather(flat, 1), 1, back);
  EXPECT_TRUE(torch::equal(back, flat));
  // Writing one shard leaves the other's elements alone.
  torch::Tensor partly = torch::full({10}, -1.0);
  layout.scatter(layout.gather(flat, 1), 1, partly);
  EXPECT_EQ(partly[0].item<float>(), -1.0f);
  EXPECT_EQ(partly[3].item<float>(), 3.0f);
  EXPECT_THROW(ParamLayout(0, 1, 1), std::invalid_argument);
}

TrainHyper plain_sgd(double lr) {
  TrainHyper h;
  h.lr = lr;
  h.momentum = 0;
  h.weight_decay = 0;
  h.optimizer = Optimizer::kSgd;
  h.schedule = Schedule::kConstant;
  return h;
}

TEST(ParamShard, AppliesEachPushAtTheLearningRateScaledByStepsOverWorkers) {
  // Two workers: a push of the mean gradient of 3 local steps moves the parameters by
  // lr * 3 / 2 times it.
  ParamShard shard(torch::ones({4}), plain_sgd(0.1), /*world=*/2, /*sync_steps=*/100,
                   /*buckets=*/2);
  EXPECT_EQ(shard.version(), 0);
  const torch::Tensor g = torch::tensor({1.0f, 2.0f, -1.0f, 0.0f});
  EXPECT_EQ(shard.apply(g, 3), 1);
  int64_t version = -1;
  const torch::Tensor p = shard.snapshot(&version);
  EXPECT_EQ(version, 1);
  EXPECT_TRUE(torch::allclose(p, torch::ones({4}) - 0.15 * g));
  EXPECT_EQ(shard.bucket_versions(), (std::vector<int64_t>{1, 1}));
  shard.apply(g, 1);
  EXPECT_EQ(shard.version(), 2);
  EXPECT_EQ(shard.pushes(), 2);
}

TEST(ParamShard, TwoWorkersPushesMatchOneSynchronousStepOfTheirAverage) {
  // Plain SGD: pushes of g1 and g2 by two workers (1 step each) equal one step of their mean
  // at the full learning rate, which is what allreduce does.
  ParamShard shard(torch::zeros({3}), plain_sgd(0.5), 2, 10, 1);
  const torch::Tensor g1 = torch::tensor({1.0f, 0.0f, 2.0f}),
                      g2 = torch::tensor({3.0f, 1.0f, 0.0f});
  shard.apply(g1, 1);
  shard.apply(g2, 1);
  EXPECT_TRUE(torch::allclose(shard.snapshot(nullptr), -0.5 * (g1 + g2) / 2));
}

TEST(PushEncoder, Fp32AndFp16PushesDecodeToTheGradient) {
  const ParamLayout layout(1000, 300, 2);
  const torch::Tensor grad = torch::randn({layout.shard_size(1)});
  PushEncoder fp32(GradCompression::kNone, layout, 1);
  std::vector<uint8_t> bytes = fp32.encode(grad);
  EXPECT_EQ(bytes.size(), static_cast<size_t>(grad.numel()) * 4);
  EXPECT_TRUE(torch::equal(decode_shard(GradCompression::kNone, layout, 1, bytes.data(),
                                        static_cast<int64_t>(bytes.size())),
                           grad));
  PushEncoder fp16(GradCompression::kFp16, layout, 1);
  bytes = fp16.encode(grad);
  EXPECT_EQ(bytes.size(), static_cast<size_t>(grad.numel()) * 2);
  EXPECT_TRUE(torch::allclose(decode_shard(GradCompression::kFp16, layout, 1, bytes.data(),
                                           static_cast<int64_t>(bytes.size())),
                              grad, 1e-3, 1e-3));
  // A push of another size is refused, not read past its end.
  EXPECT_THROW(decode_shard(GradCompression::kFp16, layout, 0, bytes.data(),
                           static_cast<int64_t>(bytes.size())),
               std::runtime_error);
}

TEST(PushEncoder, TopkPushesAreSmallAndTheirErrorFeedbackDeliversTheGradientOverTime) {
  const ParamLayout layout(4000, 1000, 1);
  PushEncoder topk(GradCompression::kTopk, layout, 0);
  torch::manual_seed(1);
  const torch::Tensor grad = torch::randn({4000});
  torch::Tensor delivered = torch::zeros({4000});
  int64_t bytes_total = 0;
  constexpr int kSteps = 40;
  for (int i = 0; i < kSteps; ++i) {
    const std::vector<uint8_t> bytes = topk.encode(grad);
    bytes_total += static_cast<int64_t>(bytes.size());
    delivered += decode_shard(GradCompression::kTopk, layout, 0, bytes.data(),
                             static_cast<int64_t>(bytes.size()));
  }
  // The same gradient every step fills the residues fast; still 4x fewer bytes than fp32.
  EXPECT_LT(bytes_total / kSteps, 4000 * 4 / 4);
  // What was not sent waits in the residue: the delivered sum approaches kSteps * grad.
  const double err = ((delivered - kSteps * grad).norm() / (kSteps * grad).norm()).item<double>();
  EXPECT_LT(err, 0.2);
  std::vector<uint8_t> bytes = topk.encode(grad);
  bytes.resize(bytes.size() - 1);
  EXPECT_THROW(decode_shard(GradCompression::kTopk, layout, 0, bytes.data(),
                           static_cast<int64_t>(bytes.size())),
               std::runtime_error);
}

// A server's parameters drifting as pushes arrive, and a worker fetching every step: its copy
// against the parameters after each fetch.
struct FetchTrace {
  double worst_error = 0;   // the largest |copy - shard| / |shard - start| after a fetch
  double final_error = 0;   // the same after 250 fetches of a shard that stopped moving
  int64_t bytes_per_fetch = 0;
};

FetchTrace trace_fetches(GradCompression compression) {
  const ParamLayout layout(6000, 1000, 2);
  const int server = 1;  // buckets 1, 3, 5
  torch::manual_seed(3);
  const torch::Tensor start = torch::randn({layout.shard_size(server)});
  torch::Tensor shard = start.clone();
  torch::Tensor copy = start.clone();
  FetchEncoder fetches(compression, layout, server, start);
  FetchTrace t;
  int64_t bytes_total = 0;
  constexpr int kMoves = 30, kStill = 250;
  for (int i = 0; i < kMoves + kStill; ++i) {
    if (i < kMoves) shard -= 0.01 * torch::randn_like(shard);  // a push
    const std::vector<uint8_t> bytes = fetches.encode(shard);
    if (i < kMoves) bytes_total += static_cast<int64_t>(bytes.size());
    apply_fetch(compression, layout, server, bytes.data(), static_cast<int64_t>(bytes.size()),
                copy);
    const double error = ((copy - shard).norm() / (shard - start).norm()).item<double>();
    if (i < kMoves) t.worst_error = std::max(t.worst_error, error);
    t.final_error = error;
  }
  t.bytes_per_fetch = bytes_total / kMoves;
  return t;
}

TEST(FetchEncoder, Fp32FetchesSendTheShardItself) {
  const FetchTrace t = trace_fetches(GradCompression::kNone);
  EXPECT_EQ(t.worst_error, 0.0);
  EXPECT_EQ(t.bytes_per_fetch, 3000 * 4);
}

TEST(FetchEncoder, Fp16FetchesSendHalfTheBytesAndTheirRoundingLater) {
  const FetchTrace t = trace_fetches(GradCompression::kFp16);
  EXPECT_EQ(t.bytes_per_fetch, 3000 * 2);
  // Each fetch rounds only the change since the copy, to 11 bits.
  EXPECT_LT(t.worst_error, 1e-3);
  EXPECT_LT(t.final_error, 1e-6);
}

TEST(FetchEncoder, TopkFetchesAreSmallAndTheCopyCatchesUpWhenTheShardStops) {
  const FetchTrace t = trace_fetches(GradCompression::kTopk);
  EXPECT_LT(t.bytes_per_fetch * 20, 3000 * 4);
  // A random walk is top-k's worst case: the copy lags, within bounds, while the shard moves
  // (AdaComp's rule sends the largest of each bin of 200 and what grew as much)...
  EXPECT_LT(t.worst_error, 0.8);
  // ... and gets what it lacked from the residue once it stops (at least a bin's largest a
  // fetch, within its 8-bit code's 4.4%).
  EXPECT_LT(t.final_error, 0.05);
}

}  // namespace
}  // namespace recycle
