// The inference prefix (batch norms folded, InferenceMode; oneDNN's layout, channels last or
// contiguous) against the plain prefix, on the real ResNet-18 blocks with non-trivial batch norms.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "engine/models/block_model.h"
#include "engine/models/encoder_registry.h"
#include "engine/models/inference_prefix.h"
#include "engine/models/split_model.h"

namespace {

using recycle::BlockModel;
using recycle::InferencePrefix;

// Randomises every batch norm's running statistics and affine parameters, so folding them
// is far from the identity (var in [0.05, 3.05], mean and bias ~N(0, 0.5), weight in
// [0.25, 2.25]).
void randomise_batch_norms(BlockModel& model) {
  torch::NoGradGuard no_grad;
  for (auto& block : model.blocks) {
    for (auto& m : block.ptr()->modules(/*include_self=*/true)) {
      if (auto* bn = m->as<torch::nn::BatchNorm2d>()) {
        bn->running_mean.copy_(torch::randn_like(bn->running_mean) * 0.5);
        bn->running_var.copy_(torch::rand_like(bn->running_var) * 3 + 0.05);
        bn->weight.copy_(torch::rand_like(bn->weight) * 2 + 0.25);
        bn->bias.copy_(torch::randn_like(bn->bias) * 0.5);
      }
    }
  }
}

double max_abs(const torch::Tensor& t) { return t.abs().max().item<double>(); }

void expect_matches_plain(double ratio, recycle::PrefixLayout layout) {
  torch::manual_seed(7);
  BlockModel model = recycle::make_encoder("resnet18:width=16,in_channels=1", 10);
  randomise_batch_norms(model);
  const int64_t blocks = recycle::prefix_blocks_for_ratio(model, ratio);
  recycle::SplitModel split = recycle::split_block_model(model, blocks);
  const InferencePrefix fast(model, blocks, layout);
  EXPECT_EQ(fast.layout(), layout);
  EXPECT_EQ(fast.blocks(), blocks);
  EXPECT_EQ(fast.folded_blocks(), blocks);  // every ResNet-18 block folds

  const torch::Tensor x = torch::randn({37, 1, 28, 28}) * 1.5 + 0.2;
  torch::Tensor want;
  {
    torch::NoGradGuard no_grad;
    want = split.prefix->forward(x);
  }
  const torch::Tensor got = fast.forward(x);
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(got.is_contiguous());
  EXPECT_EQ(got.scalar_type(), torch::kFloat32);
  const double scale = std::max(1.0, max_abs(want));
  const double err = max_abs(got - want);
  EXPECT_LE(err, recycle::kInferencePrefixTolerance * scale)
      << "ratio " << ratio << ": max error " << err << " for outputs up to " << scale;
  EXPECT_GT(max_abs(want), 0.1);  // the comparison is not of zeros

  // The plain prefix is not changed by folding: same outputs as before, batch norms intact.
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(split.prefix->forward(x), want));
}

TEST(InferencePrefix, MatchesThePlainPrefixInOneDnnLayout) {
  ASSERT_TRUE(at::hasMKLDNN()) << "this LibTorch has no oneDNN: the build would run channels last";
  EXPECT_EQ(InferencePrefix::kDefaultLayout, recycle::PrefixLayout::kMkldnn);
  for (double ratio : {0.25, 0.5, 0.75}) {
    expect_matches_plain(ratio, recycle::PrefixLayout::kMkldnn);
  }
}

TEST(InferencePrefix, MatchesThePlainPrefixChannelsLast) {
  for (double ratio : {0.25, 0.5, 0.75}) {
    expect_matches_plain(ratio, recycle::PrefixLayout::kChannelsLast);
  }
}

TEST(InferencePrefix, MatchesThePlainPrefixContiguous) {
  for (double ratio : {0.25, 0.5, 0.75}) {
    expect_matches_plain(ratio, recycle::PrefixLayout::kContiguous);
  }
}

// The check above can fail: a prefix folded from other batch-norm statistics is far off.
TEST(InferencePrefix, OtherStatisticsDoNotMatch) {
  torch::manual_seed(7);
  BlockModel model = recycle::make_encoder("resnet18:width=16,in_channels=1", 10);
  randomise_batch_norms(model);
  const int64_t blocks = recycle::prefix_blocks_for_ratio(model, 0.5);
  recycle::SplitModel split = recycle::split_block_model(model, blocks);
  const InferencePrefix before(model, blocks);
  randomise_batch_norms(model);  // the same modules: the plain prefix changes, `before` not
  const torch::Tensor x = torch::randn({8, 1, 28, 28});
  torch::NoGradGuard no_grad;
  const torch::Tensor want = split.prefix->forward(x);
  EXPECT_GT(max_abs(before.forward(x) - want),
            recycle::kInferencePrefixTolerance * std::max(1.0, max_abs(want)));
}

// A block it does not know runs as it is.
TEST(InferencePrefix, RunsUnknownBlocksAsTheyAre) {
  torch::manual_seed(3);
  BlockModel model;
  model.block_names = {"scale"};
  model.blocks = {torch::nn::AnyModule(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 2, 3)))};
  const InferencePrefix fast(model, 1);
  EXPECT_EQ(fast.folded_blocks(), 0);
  EXPECT_EQ(fast.layout(), recycle::PrefixLayout::kChannelsLast);  // oneDNN's needs all folded
  const torch::Tensor x = torch::randn({2, 1, 8, 8});
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(fast.forward(x), model.blocks[0].forward(x), 1e-5, 1e-6));
  EXPECT_THROW(InferencePrefix(model, 2), std::invalid_argument);
}

}  // namespace
