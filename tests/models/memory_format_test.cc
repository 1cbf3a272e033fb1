// memory_format.h: the layouts a module and its batches are given.
#include "engine/models/memory_format.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace {

const auto kCL = c10::MemoryFormat::ChannelsLast;

// A 1-channel stem's weight [O, 1, kH, kW] counts as channels-last contiguous with NCHW strides
// (Tensor::contiguous(ChannelsLast) leaves it so), and oneDNN then runs the convolution in NCHW.
// set_memory_format gives it exactly channels-last strides, so the stem's output is channels last.
TEST(MemoryFormat, OneChannelAndOneByOneWeightsGetChannelsLastStrides) {
  torch::nn::Sequential net(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 8, 3).padding(1)),
                            torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 4, 1)));
  const torch::Tensor stem = net->parameters()[0];
  ASSERT_EQ(stem.sizes(), (std::vector<int64_t>{8, 1, 3, 3}));
  ASSERT_TRUE(stem.is_contiguous(kCL));  // the ambiguity this guards against
  const torch::Tensor x = torch::randn({2, 1, 6, 6});
  const torch::Tensor plain = net->forward(x);

  recycle::set_memory_format(*net, kCL);
  for (const torch::Tensor& p : net->parameters()) {
    if (p.dim() != 4) continue;
    EXPECT_EQ(p.strides().vec(), c10::get_channels_last_strides_2d(p.sizes())) << p.sizes();
  }
  EXPECT_TRUE(net->parameters()[0].is_same(stem));  // relaid in place, same tensor
  const torch::Tensor in = recycle::in_memory_format(x, kCL);
  EXPECT_EQ(in.strides().vec(), c10::get_channels_last_strides_2d(x.sizes()));
  const torch::Tensor out = net->forward(in);
  EXPECT_EQ(out.suggest_memory_format(), kCL);
  EXPECT_TRUE(torch::allclose(out, plain, 1e-5, 1e-6));

  recycle::set_memory_format(*net, c10::MemoryFormat::Contiguous);
  for (const torch::Tensor& p : net->parameters()) {
    EXPECT_EQ(p.strides().vec(), torch::empty(p.sizes()).strides().vec()) << p.sizes();
  }
  const torch::Tensor flat = torch::randn({3, 5});
  EXPECT_TRUE(recycle::in_memory_format(flat, kCL).is_same(flat));  // not 4-D: as it is
}

}  // namespace
