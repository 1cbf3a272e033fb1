// TorchScript models (engine/models/torchscript_model.h): a scripted Sequential built and saved
// by tests/models/scripted_net.h, loaded as a block model, split, trained, saved and checked.
#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "engine/models/block_model.h"
#include "engine/models/encoder_registry.h"
#include "engine/models/fingerprint.h"
#include "engine/models/inference_prefix.h"
#include "engine/models/split_model.h"
#include "engine/models/torchscript_model.h"
#include "engine/models/weights_io.h"
#include "recycle/errors.h"
#include "tests/models/scripted_net.h"
#include "tests/test_util.h"

namespace {

using recycle::BlockModel;
using recycle::testing::TempDir;

// Saves a scripted net of `classes` outputs for 1x12x12 inputs to dir/name; returns its path.
std::string save_net(const TempDir& dir, int64_t classes, uint64_t seed = 1,
                     const std::string& name = "net.ts", bool in_order = true) {
  torch::manual_seed(seed);
  const std::string path = dir.file(name);
  recycle::testing::scripted_net(1, classes, in_order).save(path);
  return path;
}

std::string spec_for(const std::string& path) {
  return "torchscript:" + path + ",in_channels=1,in_height=12,in_width=12";
}

torch::Tensor inputs(int64_t n = 6) {
  torch::manual_seed(7);
  return torch::randn({n, 1, 12, 12});
}

TEST(TorchScriptModel, BlocksAreTheChildrenWithTheStemJoinedToTheFirstStage) {
  TempDir dir;
  const BlockModel model = recycle::make_encoder(spec_for(save_net(dir, 3)), 3);
  EXPECT_EQ(model.block_names, (std::vector<std::string>{"stage1", "stage2", "stage3", "stage4"}));
  EXPECT_TRUE(model.classifier->is_own());
  EXPECT_EQ(model.classifier->classes(), 3);
  EXPECT_EQ(model.classifier->in_features(), 8);
  // Every parameter and buffer of the file, under its own name.
  const auto stack = model.as_stack();
  std::vector<std::string> names;
  for (const auto& p : model.blocks[0].ptr()->named_parameters()) names.push_back(p.key());
  EXPECT_EQ(names, (std::vector<std::string>{"conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias",
                                             "stage1.conv.weight", "stage1.conv.bias",
                                             "stage1.bn.weight", "stage1.bn.bias"}));
  const torch::jit::Module file = torch::jit::load(dir.file("net.ts"));
  EXPECT_EQ(stack->parameters().size(), file.parameters().size());
  EXPECT_EQ(stack->buffers().size(), file.buffers().size());
  // 0.25/0.5/0.75 end after stage1/stage2/stage3; --split-at names a stage.
  EXPECT_EQ(recycle::prefix_blocks_for_ratio(model, 0.25), 1);
  EXPECT_EQ(recycle::prefix_blocks_for_ratio(model, 0.75), 3);
  EXPECT_EQ(recycle::prefix_blocks_for_name(model, "stage2"), 2);
  EXPECT_THROW(recycle::prefix_blocks_for_name(model, "conv1"), std::invalid_argument);
}

TEST(TorchScriptModel, PrefixThenHeadEqualsTheScriptedModelInEvalMode) {
  TempDir dir;
  const std::string path = save_net(dir, 3);
  torch::jit::Module file = torch::jit::load(path);
  file.eval();
  const torch::Tensor x = inputs();
  torch::NoGradGuard no_grad;
  const torch::Tensor want = file.forward({x}).toTensor();
  const BlockModel model = recycle::make_encoder(spec_for(path), 3);
  for (int64_t blocks = 0; blocks <= model.num_blocks(); ++blocks) {
    recycle::SplitModel split = recycle::split_block_model(model, blocks);
    split.head->eval();
    EXPECT_TRUE(torch::allclose(split.head->forward(split.prefix->forward(x)), want, 1e-5, 1e-6))
        << blocks << " blocks";
    // The build's inference form of the prefix runs the scripted blocks as they are.
    const recycle::InferencePrefix fast(model, blocks);
    EXPECT_EQ(fast.folded_blocks(), 0);
    EXPECT_TRUE(torch::allclose(split.head->forward(fast.forward(x).clone()), want, 1e-4, 1e-5))
        << blocks << " blocks, inference prefix";
  }
}

TEST(TorchScriptModel, AnotherClassCountGetsANewClassifierSizedByOneBatch) {
  TempDir dir;
  BlockModel model = recycle::make_encoder(spec_for(save_net(dir, 3)), 5);
  EXPECT_FALSE(model.classifier->is_own());
  EXPECT_EQ(model.classifier->in_features(), 8);  // pool's output, found by the probe batch
  EXPECT_EQ(model.classifier->pooling(), recycle::Pooling::kFlatten);
  auto stack = model.as_stack();
  stack->eval();
  torch::NoGradGuard no_grad;
  EXPECT_EQ(stack->forward(inputs()).sizes(), (std::vector<int64_t>{6, 5}));
  model.classifier->reset_parameters();
  model.reset_classifier(2);
  EXPECT_EQ(model.as_stack()->forward(inputs()).sizes(), (std::vector<int64_t>{6, 2}));
  // The file's own classifier cannot be drawn again.
  BlockModel own = recycle::make_encoder(spec_for(dir.file("net.ts")), 3);
  EXPECT_THROW(own.classifier->reset_parameters(), std::logic_error);
}

TEST(TorchScriptModel, SpecHoldsThePathAndDigestAndAChangedFileIsRefused) {
  TempDir dir;
  const std::string path = save_net(dir, 3);
  const recycle::EncoderSpec spec = recycle::resolve_encoder_spec("torchscript:" + path);
  EXPECT_EQ(spec.file, path);
  EXPECT_EQ(spec.digest.size(), 32u);
  EXPECT_EQ(spec.get("in_channels"), 1);
  EXPECT_EQ(spec.get("in_height"), 28);
  EXPECT_EQ(spec.to_string(), "torchscript:" + path + ",xxh3=" + spec.digest +
                                  ",in_channels=1,in_height=28,in_width=28");
  EXPECT_EQ(recycle::resolve_encoder_spec(spec.to_string()), spec);
  EXPECT_EQ(recycle::encoder_names(),
            (std::vector<std::string>{"pt2", "resnet18", "torchscript", "transformer"}));
  // A relative path is made absolute.
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  EXPECT_EQ(recycle::resolve_encoder_spec("torchscript:net.ts").file, path);
  std::filesystem::current_path(cwd);

  for (const std::string& bad : std::vector<std::string>{
           "torchscript", "torchscript:" + dir.file("missing.ts"),
           "torchscript:" + dir.path().string(), "resnet18:" + path,
           "torchscript:" + path + ",xxh3=", "torchscript:" + path + ",depth=2"}) {
    EXPECT_THROW(recycle::resolve_encoder_spec(bad), std::invalid_argument) << bad;
  }
  // The same path with other weights: the old spec (as a manifest or weights file keeps it)
  // is refused, naming the file.
  save_net(dir, 3, /*seed=*/2);
  try {
    recycle::resolve_encoder_spec(spec.to_string());
    ADD_FAILURE() << "a changed file was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("model file " + path + " changed"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(recycle::make_encoder(spec.to_string(), 3), std::runtime_error);
}

TEST(TorchScriptModel, TrainingTheHeadTrainsTheScriptedModulesAndModesReachThem) {
  TempDir dir;
  BlockModel model = recycle::make_encoder(spec_for(save_net(dir, 3)), 3);
  recycle::SplitModel split = recycle::split_block_model(model, 2);
  const std::string prefix_before = recycle::module_fingerprint(*split.prefix);
  const torch::Tensor x = inputs(), y = torch::tensor({0, 1, 2, 0, 1, 2});
  // Train mode: the batch norms update their running statistics (the file's buffers).
  const torch::Tensor mean_before =
      split.head->named_buffers()["stage3.stage3.bn.running_mean"].clone();
  torch::optim::SGD sgd(split.head->parameters(), 0.1);
  const torch::Tensor features = split.prefix->forward(x).detach();
  const torch::Tensor loss0 = torch::cross_entropy_loss(split.head->forward(features), y);
  for (int step = 0; step < 5; ++step) {
    sgd.zero_grad();
    torch::cross_entropy_loss(split.head->forward(features), y).backward();
    sgd.step();
  }
  EXPECT_FALSE(mean_before.equal(split.head->named_buffers()["stage3.stage3.bn.running_mean"]));
  split.head->eval();
  torch::NoGradGuard no_grad;
  EXPECT_LT(torch::cross_entropy_loss(split.head->forward(features), y).item<double>(),
            loss0.item<double>());
  // The frozen prefix did not move, and the whole model (its scripted modules) saw the steps.
  EXPECT_EQ(recycle::module_fingerprint(*split.prefix), prefix_before);
  auto stack = model.as_stack();
  stack->eval();
  EXPECT_TRUE(stack->forward(x).equal(split.head->forward(split.prefix->forward(x))));
  BlockModel fresh = recycle::make_encoder(spec_for(dir.file("net.ts")), 3);
  auto fresh_stack = fresh.as_stack();
  fresh_stack->eval();
  EXPECT_FALSE(fresh_stack->forward(x).equal(stack->forward(x)));
}

TEST(TorchScriptModel, WeightsFilesAndFingerprintsCoverTheScriptedParameters) {
  TempDir dir;
  BlockModel model = recycle::make_encoder(spec_for(save_net(dir, 3)), 4);  // a new classifier
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model.as_stack()->parameters()) p.add_(0.01);
  }
  recycle::save_block_model(model, dir.file("trained.pt"));
  // The weights name their program; it is loaded only from the file the user gives.
  EXPECT_THROW(recycle::load_block_model(dir.file("trained.pt")), recycle::InvalidArgument);
  BlockModel again = recycle::load_block_model(dir.file("trained.pt"),
                                               "torchscript:" + dir.file("net.ts"));
  EXPECT_EQ(again.spec, model.spec);
  auto a = model.as_stack(), b = again.as_stack();
  a->eval();
  b->eval();
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(a->forward(inputs()).equal(b->forward(inputs())));
  // The prefix's fingerprint moves with a prefix buffer, not with a head parameter.
  recycle::SplitModel split = recycle::split_block_model(again, 2);
  const std::string before = recycle::module_fingerprint(*split.prefix);
  split.head->parameters().front().add_(1.0);
  EXPECT_EQ(recycle::module_fingerprint(*split.prefix), before);
  split.prefix->buffers().front().add_(1.0);
  EXPECT_NE(recycle::module_fingerprint(*split.prefix), before);
}

TEST(TorchScriptModel, FilesThatAreNotAScriptedSequentialAreRefused) {
  TempDir dir;
  save_net(dir, 3);
  recycle::testing::write_file(dir.file("junk.ts"), "not a model");
  const std::string skip = save_net(dir, 3, 1, "skip.ts", /*in_order=*/false);
  torch::jit::Module lonely = recycle::testing::scripted_module("Lonely");
  lonely.register_module("fc", recycle::testing::scripted_conv(1, 3, 1));
  lonely.define("def forward(self, x):\n    return self.fc.forward(x)\n");
  lonely.save(dir.file("lonely.ts"));
  for (const std::string& file : {dir.file("junk.ts"), skip, dir.file("lonely.ts")}) {
    try {
      recycle::make_encoder(spec_for(file), 3);
      ADD_FAILURE() << file << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("model file " + file), std::string::npos) << e.what();
    }
  }
  // A batch of another shape than the model takes is named.
  EXPECT_THROW(recycle::make_encoder("torchscript:" + dir.file("net.ts") + ",in_channels=3",
                                     3), std::invalid_argument);
}

TEST(TorchScriptModel, AScriptHeadTakesARecordsTensorsAsItsArgumentsInOrder) {
  TempDir dir;
  torch::manual_seed(3);
  torch::jit::Module m = recycle::testing::scripted_module("MaskedHead");
  m.register_parameter("weight", torch::randn({2, 4}), false);
  m.define("def forward(self, x, mask):\n"
           "    return torch.matmul(x * mask.unsqueeze(1).to(x.dtype), self.weight.t())\n");
  m.save(dir.file("head.pt"));
  std::string digest;
  recycle::BlockStack head = recycle::load_script_head(dir.file("head.pt"), &digest);
  const torch::Tensor x = torch::randn({5, 4});
  const torch::Tensor mask = torch::tensor({1, 0, 1, 1, 0}, torch::kInt64);
  const torch::Tensor want =
      torch::matmul(x * mask.unsqueeze(1).to(torch::kFloat), m.attr("weight").toTensor().t());
  EXPECT_TRUE(torch::equal(head->forward_all({x, mask}), want));
  // Its gradients reach the module's own parameter.
  head->forward_all({x, mask}).sum().backward();
  ASSERT_EQ(head->parameters().size(), 1u);
  EXPECT_TRUE(head->parameters()[0].grad().defined());
  // A stack of blocks takes one input: more is refused, naming the count.
  recycle::BlockStack blocks;
  blocks->append("fc", torch::nn::AnyModule(torch::nn::Linear(4, 2)));
  EXPECT_EQ(blocks->forward_all({x}).sizes(), (std::vector<int64_t>{5, 2}));
  try {
    blocks->forward_all({x, mask});
    ADD_FAILURE() << "two inputs were taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "a stack of blocks takes one input tensor, not 2");
  }
}

}  // namespace
