// Block models, splitting, fingerprints, weights files, datasets and preprocessing.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "engine/models/block_model.h"
#include "engine/models/encoder_registry.h"
#include "engine/models/fingerprint.h"
#include "engine/models/split_model.h"
#include "engine/jobs/head_file.h"
#include "engine/models/tensor_file.h"
#include "engine/models/weights_io.h"
#include "recycle/cache.h"
#include "recycle/errors.h"
#include <nlohmann/json.hpp>
#include "engine/data/dataset.h"
#include "engine/models/preprocess.h"
#include "tests/test_util.h"

namespace {

using recycle::BlockModel;
using recycle::EncoderSpec;

BlockModel small_model(int64_t classes = 5, uint64_t seed = 1) {
  torch::manual_seed(seed);
  return recycle::make_encoder("resnet18:width=8", classes);
}

// Puts running statistics into the batch norms so eval mode is not the identity.
void warm_up(BlockModel& model) {
  torch::NoGradGuard no_grad;
  auto stack = model.as_stack();
  stack->train();
  for (int i = 0; i < 3; ++i) stack->forward(torch::randn({16, 1, 28, 28}) * 2 + 0.5);
  stack->eval();
}

TEST(EncoderRegistry, SpecsAreCompletedAndRoundTrip) {
  const EncoderSpec spec = recycle::resolve_encoder_spec("resnet18:in_channels=3,width=32");
  EXPECT_EQ(spec.get("width"), 32);
  EXPECT_EQ(spec.get("in_channels"), 3);
  EXPECT_EQ(spec.to_string(), "resnet18:width=32,in_channels=3");  // canonical order
  EXPECT_EQ(recycle::resolve_encoder_spec(spec.to_string()), spec);
  EXPECT_EQ(recycle::resolve_encoder_spec("resnet18").to_string(),
            "resnet18:width=16,in_channels=1");
  EXPECT_EQ(recycle::encoder_names(),
            (std::vector<std::string>{"pt2", "resnet18", "torchscript", "transformer"}));
  EXPECT_EQ(recycle::default_encoder_name(), "resnet18");
  EXPECT_EQ(recycle::encoder_info("resnet18").input, recycle::EncoderInput::kImage);
  for (const char* bad : {"vgg", "", ":width=3", "resnet18:width=0", "resnet18:depth=3",
                          "resnet18:width=1x", "resnet18:width=8,width=9", "resnet18:=4"}) {
    EXPECT_THROW(recycle::resolve_encoder_spec(bad), std::invalid_argument) << bad;
  }
  try {
    recycle::resolve_encoder_spec("vgg");
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("known: pt2, resnet18, torchscript"), std::string::npos)
        << e.what();
  }
}

TEST(EncoderRegistry, MakesTheModelItsSpecNames) {
  torch::manual_seed(0);
  BlockModel model = recycle::make_encoder("resnet18:width=4,in_channels=3", 7);
  EXPECT_EQ(model.spec, "resnet18:width=4,in_channels=3");
  EXPECT_EQ(model.classifier->classes(), 7);
  EXPECT_EQ(model.classifier->in_features(), 32);
  torch::NoGradGuard no_grad;
  auto stack = model.as_stack();
  stack->eval();
  EXPECT_EQ(stack->forward(torch::zeros({2, 3, 28, 28})).sizes(), (std::vector<int64_t>{2, 7}));
  EXPECT_THROW(recycle::make_encoder("resnet18", 0), std::invalid_argument);
  // The same seed gives the same weights: caches built from a seed are recognised later.
  torch::manual_seed(0);
  BlockModel again = recycle::make_encoder("resnet18:width=4,in_channels=3", 7);
  EXPECT_EQ(recycle::module_fingerprint(*model.as_stack()),
            recycle::module_fingerprint(*again.as_stack()));
}

TEST(BlockModel, HasEightNamedBlocksAndStageBoundaries) {
  BlockModel model = small_model();
  ASSERT_EQ(model.num_blocks(), 8);
  EXPECT_EQ(model.block_names.front(), "layer1.0");
  EXPECT_EQ(model.block_names.back(), "layer4.1");
  EXPECT_EQ(recycle::prefix_blocks_for_ratio(model, 0.25), 2);
  EXPECT_EQ(recycle::prefix_blocks_for_ratio(model, 0.5), 4);
  EXPECT_EQ(recycle::prefix_blocks_for_ratio(model, 0.75), 6);
  EXPECT_EQ(recycle::prefix_blocks_for_ratio(model, 1.0), 8);
  EXPECT_EQ(recycle::prefix_blocks_for_ratio(model, 0.0), 0);
  EXPECT_THROW(recycle::prefix_blocks_for_ratio(model, 1.7), std::invalid_argument);
  EXPECT_THROW(recycle::prefix_blocks_for_ratio(model, -0.1), std::invalid_argument);
  EXPECT_EQ(recycle::prefix_blocks_for_name(model, "layer2.1"), 4);
  EXPECT_THROW(recycle::prefix_blocks_for_name(model, "layer9.0"), std::invalid_argument);
}

TEST(Split, PrefixThenHeadEqualsWholeModelInEvalMode) {
  BlockModel model = small_model();
  warm_up(model);
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::randn({4, 1, 28, 28});
  auto whole = model.as_stack();
  whole->eval();
  const torch::Tensor expected = whole->forward(x);
  const std::vector<std::vector<int64_t>> shapes = {{8, 28, 28}, {16, 14, 14}, {32, 7, 7}};
  for (int64_t blocks : {2, 4, 6, 8}) {
    recycle::SplitModel split = recycle::split_block_model(model, blocks);
    split.head->eval();
    const torch::Tensor mid = split.prefix->forward(x);
    if (blocks < 8) {
      EXPECT_EQ(mid.sizes().slice(1).vec(), shapes[blocks / 2 - 1]) << blocks;
    }
    const torch::Tensor out = split.head->forward(mid);
    EXPECT_LT((out - expected).abs().max().item<float>(), 1e-5f) << blocks << " blocks";
  }
}

TEST(Split, PrefixIsFrozenAndHeadSharesTheModelsModules) {
  BlockModel model = small_model();
  recycle::SplitModel split = recycle::split_block_model(model, 4);
  EXPECT_EQ(split.split_at, "layer2.1");
  EXPECT_FALSE(split.prefix->is_training());
  EXPECT_TRUE(split.head->is_training());
  for (const auto& p : split.prefix->parameters()) EXPECT_FALSE(p.requires_grad());
  for (const auto& p : split.head->parameters()) EXPECT_TRUE(p.requires_grad());
  EXPECT_EQ(split.head->names().back(), "fc");
  // Changing the head's parameters changes the model's: they are the same tensors.
  torch::NoGradGuard no_grad;
  split.head->parameters().back().add_(1.0);
  EXPECT_TRUE(split.head->parameters().back().equal(model.classifier->parameters().back()));
}

TEST(Fingerprint, FollowsThePrefixWeightsOnly) {
  BlockModel a = small_model(5, 1);
  BlockModel b = small_model(5, 1);
  BlockModel c = small_model(5, 2);
  auto fp = [](BlockModel& m, int64_t blocks) {
    return recycle::module_fingerprint(*recycle::split_block_model(m, blocks).prefix);
  };
  EXPECT_EQ(fp(a, 4), fp(b, 4));
  EXPECT_NE(fp(a, 4), fp(c, 4));
  EXPECT_NE(fp(a, 4), fp(a, 6));
  const std::string before = fp(a, 4);
  {
    torch::NoGradGuard no_grad;
    a.classifier->parameters()[0].add_(1.0);  // head only
  }
  EXPECT_EQ(fp(a, 4), before);
  {
    torch::NoGradGuard no_grad;
    a.blocks[0].ptr()->parameters()[0].view(-1)[0].add_(1e-3);  // one prefix weight
  }
  EXPECT_NE(fp(a, 4), before);
}

TEST(Weights, SaveAndLoadKeepOutputsAndClassNames) {
  recycle::testing::TempDir dir;
  BlockModel model = small_model(3);
  model.class_names = {"a", "b", "c"};
  warm_up(model);
  const std::string path = dir.file("m.pt");
  recycle::save_block_model(model, path);
  BlockModel loaded = recycle::load_block_model(path);
  EXPECT_EQ(loaded.spec, model.spec);
  EXPECT_EQ(loaded.class_names, model.class_names);
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::randn({2, 1, 28, 28});
  auto s1 = model.as_stack();
  auto s2 = loaded.as_stack();
  s1->eval();
  s2->eval();
  EXPECT_TRUE(s1->forward(x).allclose(s2->forward(x)));

  recycle::testing::write_file(dir.file("junk.pt"), "not a model");
  EXPECT_THROW(recycle::load_block_model(dir.file("junk.pt")), std::runtime_error);
  EXPECT_THROW(recycle::load_block_model(dir.file("missing.pt")), std::runtime_error);
}

// Tensor files (engine/models/tensor_file.h): every dtype and metadata round-trip; damaged bytes
// and an older version's archive are refused with one line, never loaded.
TEST(TensorFile, RoundTripsAndRefusesWhatIsNotOne) {
  recycle::TensorFile f;
  f.tensors["a.weight"] = torch::randn({3, 4});
  f.tensors["half"] = torch::randn({5}).to(torch::kFloat16);
  f.tensors["bf"] = torch::randn({2, 2}).to(torch::kBFloat16);
  f.tensors["count"] = torch::tensor(int64_t{7});
  f.tensors["mask"] = torch::tensor({true, false});
  f.tensors["empty"] = torch::zeros({0, 3});
  f.tensors["bytes"] = torch::arange(10).to(torch::kUInt8);
  f.metadata["recycle.spec"] = "resnet18:width=8";
  const std::string bytes = recycle::to_safetensors(f);
  const recycle::TensorFile g = recycle::from_safetensors(bytes, "test bytes");
  EXPECT_EQ(g.metadata, f.metadata);
  ASSERT_EQ(g.tensors.size(), f.tensors.size());
  for (const auto& [name, t] : f.tensors) {
    ASSERT_TRUE(g.tensors.count(name)) << name;
    EXPECT_EQ(g.tensors.at(name).scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(g.tensors.at(name).equal(t)) << name;
  }
  // Every cut and a few flipped header bytes: one std::runtime_error each, nothing else.
  for (size_t n : {size_t{0}, size_t{7}, size_t{8}, size_t{20}, bytes.size() - 1}) {
    EXPECT_THROW(recycle::from_safetensors(bytes.substr(0, n), "cut"), std::runtime_error) << n;
  }
  std::string huge = bytes;
  huge[7] = '\x7f';
  EXPECT_THROW(recycle::from_safetensors(huge, "huge"), std::runtime_error);
  std::string shifted = bytes;
  const size_t at = shifted.find("data_offsets");
  ASSERT_NE(at, std::string::npos);
  shifted[at + 16] = '9';  // an offset out of range, or no longer JSON
  EXPECT_THROW(recycle::from_safetensors(shifted, "shifted"), std::runtime_error);
  std::string flipped = bytes;
  flipped[flipped.size() - 3] ^= 0x10;  // a byte of a tensor's data
  try {
    recycle::from_safetensors(flipped, "flipped");
    ADD_FAILURE() << "a flipped byte was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("XXH3-128 check"), std::string::npos) << e.what();
  }
  try {
    recycle::from_safetensors(std::string("PK\x03\x04rest of a zip", 20), "weights w.pt");
    ADD_FAILURE() << "an archive was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("weights w.pt is in the format of an older recycle"),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("recycle-inspect --convert-old FILE --to NEW"),
              std::string::npos) << e.what();
  }
}

// Weights and heads an older recycle wrote (torch::serialize archives, as it wrote them) are
// refused, and convert_old_file makes them tensor files that load to the same model and head.
TEST(Weights, OlderArchivesAreRefusedAndConvert) {
  recycle::testing::TempDir dir;
  BlockModel model = small_model(3);
  model.class_names = {"a", "b", "c"};
  warm_up(model);
  const std::string old_weights = dir.file("old.pt");
  {
    torch::serialize::OutputArchive archive;
    model.as_stack()->save(archive);
    archive.write("recycle.spec", c10::IValue(model.spec));
    c10::List<std::string> names;
    for (const auto& n : model.class_names) names.push_back(n);
    archive.write("recycle.class_names", c10::IValue(names));
    archive.write("recycle.classes", c10::IValue(int64_t{3}));
    archive.save_to(old_weights);
  }
  try {
    recycle::load_block_model(old_weights);
    ADD_FAILURE() << "an archive was loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--convert-old"), std::string::npos) << e.what();
  }
  EXPECT_EQ(recycle::convert_old_file(old_weights, dir.file("new.pt")), "weights");
  BlockModel loaded = recycle::load_block_model(dir.file("new.pt"));
  EXPECT_EQ(loaded.class_names, model.class_names);
  EXPECT_EQ(recycle::module_fingerprint(*loaded.as_stack()),
            recycle::module_fingerprint(*model.as_stack()));
  // A head file of the older format.
  auto head = recycle::split_block_model(model, 4).head;
  const std::string old_head = dir.file("old-head.pt");
  {
    torch::serialize::OutputArchive archive;
    head->save(archive);
    const nlohmann::json identity = {{"format", 1}, {"from_cache", false},
                                     {"model", model.spec}, {"fingerprint", "00"},
                                     {"split_at", "layer2.1"}, {"prefix_blocks", 4},
                                     {"total_blocks", 8}, {"class_names", model.class_names}};
    archive.write("recycle.head", c10::IValue(identity.dump()));
    archive.save_to(old_head);
  }
  EXPECT_THROW(recycle::HeadFile{old_head}, std::runtime_error);
  EXPECT_EQ(recycle::convert_old_file(old_head, dir.file("new-head.pt")), "head");
  recycle::HeadFile converted(dir.file("new-head.pt"));
  EXPECT_EQ(converted.identity().identity.split_at, "layer2.1");
  auto fresh = recycle::split_block_model(small_model(3, 9), 4).head;
  converted.load_into(fresh);
  EXPECT_EQ(recycle::module_fingerprint(*fresh), recycle::module_fingerprint(*head));
  // What is not an older file is not converted.
  EXPECT_THROW(recycle::convert_old_file(dir.file("new.pt"), dir.file("x.pt")),
               recycle::InvalidArgument);
}

TEST(Weights, ModuleBytesRoundTrip) {
  BlockModel a = small_model(5, 1);
  BlockModel b = small_model(5, 2);
  auto ha = recycle::split_block_model(a, 4).head;
  auto hb = recycle::split_block_model(b, 4).head;
  EXPECT_NE(recycle::module_fingerprint(*ha), recycle::module_fingerprint(*hb));
  recycle::module_from_bytes(*hb, recycle::module_to_bytes(*ha), "test bytes");
  EXPECT_EQ(recycle::module_fingerprint(*ha), recycle::module_fingerprint(*hb));
}

TEST(Dataset, ClassListsParse) {
  EXPECT_EQ(recycle::parse_class_list("5-9"), (std::vector<int64_t>{5, 6, 7, 8, 9}));
  EXPECT_EQ(recycle::parse_class_list("4,0,2"), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(recycle::parse_class_list("1-2,7"), (std::vector<int64_t>{1, 2, 7}));
  for (const char* bad : {"", "9-5", "a", "1,", "1--2", "-3"}) {
    EXPECT_THROW(recycle::parse_class_list(bad), std::invalid_argument) << bad;
  }
}

TEST(Dataset, FashionMnistClassFilterRemapsLabelsAndLimits) {
  if (!std::filesystem::exists(std::string(recycle::kDefaultFashionMnistDir))) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  recycle::DatasetOptions o;
  o.spec = "fashion-mnist";
  o.split = "test";
  o.classes = "5-9";
  o.limit = 300;
  const recycle::Dataset d = recycle::load_dataset(o);
  ASSERT_EQ(d.size(), 300u);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"Sandal", "Shirt", "Sneaker", "Bag",
                                                     "Ankle boot"}));
  EXPECT_EQ(d.pixels.size(), 300u * 784u);
  std::vector<int> counts(5, 0);
  for (int64_t l : d.labels) {
    ASSERT_GE(l, 0);
    ASSERT_LT(l, 5);
    ++counts[l];
  }
  for (int c : counts) EXPECT_GT(c, 30);
  // The first test image is an ankle boot (class 9 -> 4), sample "test/0".
  EXPECT_EQ(d.labels[0], 4);
  EXPECT_EQ(d.ids[0], "test/0");

  o.classes = "3,12";
  EXPECT_THROW(recycle::load_dataset(o), std::invalid_argument);
  o.classes = "";
  o.split = "validation";
  EXPECT_THROW(recycle::load_dataset(o), std::invalid_argument);
  o.spec = "mnist";
  EXPECT_THROW(recycle::load_dataset(o), std::invalid_argument);
}

TEST(Preprocess, NormalisesPixels) {
  recycle::Dataset d;
  d.item_shape = {1, 1, 2};
  d.pixels = {0, 255, 51, 102};
  d.labels = {0, 1};
  const int64_t idx[] = {1, 0};
  const torch::Tensor x = recycle::image_batch(d, idx, 2, torch::kCPU);
  ASSERT_EQ(x.sizes().vec(), (std::vector<int64_t>{2, 1, 1, 2}));
  const float m = recycle::kPixelMean, s = recycle::kPixelStd;
  EXPECT_NEAR(x[0][0][0][0].item<float>(), (0.2f - m) / s, 1e-5);
  EXPECT_NEAR(x[1][0][0][1].item<float>(), (1.0f - m) / s, 1e-5);
}

}  // namespace
