// The byte tokenizer and the native text encoder: spec round trip, mask correctness (padding
// never changes a sample's output), the split prefix-then-head equal to the whole model, how
// ratios map to layers, and the weights round trip.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "engine/data/byte_tokenizer.h"
#include "engine/models/block_model.h"
#include "engine/models/encoder_registry.h"
#include "engine/models/split_model.h"
#include "engine/models/transformer.h"
#include "engine/models/weights_io.h"
#include "tests/test_util.h"

namespace recycle {
namespace {

constexpr const char* kSmall = "transformer:d_model=16,layers=4,heads=2,ff=32,max_tokens=24";

TEST(ByteTokenizerTest, BytesPlusOneTruncatedAtTheTail) {
  EXPECT_EQ(byte_tokens("Ab", 8), (std::vector<int64_t>{'A' + 1, 'b' + 1}));
  EXPECT_EQ(byte_tokens("abcdef", 3), (std::vector<int64_t>{'a' + 1, 'b' + 1, 'c' + 1}));
  // A byte above 127 (here the first byte of "é") is one token, id byte + 1.
  EXPECT_EQ(byte_tokens("\xc3\xa9", 1), (std::vector<int64_t>{0xc3 + 1}));
  EXPECT_EQ(byte_tokens(std::string(1, '\0'), 4), (std::vector<int64_t>{1}));  // never the pad id
  EXPECT_EQ(byte_tokens(std::string(1, '\xff'), 4), (std::vector<int64_t>{256}));
  EXPECT_EQ(byte_token_count("abcdef", 3), 3);
  EXPECT_THROW(byte_tokens("", 4), std::invalid_argument);
  EXPECT_THROW(byte_tokens("a", 0), std::invalid_argument);
  EXPECT_EQ(byte_tokenizer_spec(), "utf8-bytes:id=byte+1,pad=0,truncate=tail");
}

TEST(TransformerTest, SpecRoundTripsAndIsTheDefaultForText) {
  const EncoderSpec spec = resolve_encoder_spec("transformer");
  EXPECT_EQ(spec.to_string(), "transformer:d_model=64,layers=4,heads=4,ff=256,max_tokens=128");
  EXPECT_EQ(resolve_encoder_spec(spec.to_string()).to_string(), spec.to_string());
  EXPECT_EQ(resolve_encoder_spec(kSmall).to_string(), kSmall);
  EXPECT_EQ(encoder_info("transformer").input, recycle::EncoderInput::kText);
  EXPECT_EQ(default_encoder_for(recycle::EncoderInput::kText), "transformer");
  EXPECT_EQ(default_encoder_for(recycle::EncoderInput::kImage), "resnet18");
  EXPECT_EQ(recycle::input_name(recycle::EncoderInput::kText), "text");
  EXPECT_THROW(make_encoder("transformer:d_model=30,heads=4", 2), std::invalid_argument);
  EXPECT_THROW(resolve_encoder_spec("transformer:width=8"), std::invalid_argument);
  EXPECT_EQ(transformer_max_tokens(kSmall), 24);
}

TEST(TransformerTest, TokenBatchPadsToTheLongestAndCuts) {
  const torch::Tensor t = token_batch({"ab", "abcdefgh", "x"}, 5, torch::kCPU);
  ASSERT_EQ(t.sizes().vec(), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(t[0][1].item<int64_t>(), 'b' + 1);
  EXPECT_EQ(t[0][2].item<int64_t>(), kPadToken);
  EXPECT_EQ(t[1][4].item<int64_t>(), 'e' + 1);
  const torch::Tensor lengths = t.ne(kPadToken).sum(1);
  EXPECT_TRUE(torch::equal(lengths, torch::tensor({2, 5, 1}, torch::kInt64)));
  EXPECT_THROW(token_batch({"a", ""}, 5, torch::kCPU), std::invalid_argument);
}

TEST(TransformerTest, PackingAndMasks) {
  const torch::Tensor mask = mask_from_lengths(torch::tensor({1, 3}, torch::kInt64), 3);
  EXPECT_TRUE(torch::equal(mask, torch::tensor({1, 0, 0, 1, 1, 1}).to(torch::kBool).view({2, 3})));
  const torch::Tensor hidden = torch::ones({2, 3, 2});
  const torch::Tensor packed = pack_text_features(hidden, mask);
  ASSERT_EQ(packed.sizes().vec(), (std::vector<int64_t>{2, 3, 3}));
  EXPECT_EQ(packed[0][1][0].item<float>(), 0.0f);  // padding zeroed
  EXPECT_EQ(packed[0][0][0].item<float>(), 1.0f);
  EXPECT_EQ(packed[0][0][2].item<float>(), 1.0f);  // the mask channel
  EXPECT_EQ(packed[0][2][2].item<float>(), 0.0f);
}

// Each text alone and in a batch padded to a longer one gives the same logits and the same
// hidden states at its valid positions, after every layer.
TEST(TransformerTest, PaddingDoesNotChangeASamplesOutput) {
  torch::manual_seed(3);
  BlockModel model = make_encoder(kSmall, 3);
  BlockStack whole = model.as_stack();
  whole->eval();
  torch::NoGradGuard no_grad;
  const std::vector<std::string> texts = {"hi", "a longer text, padded less", "mid length"};
  const torch::Tensor batch = token_batch(texts, 24, torch::kCPU);
  const torch::Tensor logits = whole->forward(batch);
  for (size_t i = 0; i < texts.size(); ++i) {
    const torch::Tensor alone = whole->forward(token_batch({texts[i]}, 24, torch::kCPU));
    EXPECT_TRUE(torch::allclose(alone[0], logits[static_cast<int64_t>(i)], 1e-5, 1e-5)) << texts[i];
  }
  // Layer by layer: valid positions equal, padded positions zero with a zero mask.
  torch::Tensor x = batch, y = token_batch({texts[0]}, 24, torch::kCPU);
  for (int64_t b = 0; b < model.num_blocks(); ++b) {
    x = model.blocks[b].forward(x);
    y = model.blocks[b].forward(y);
    const int64_t n = y.size(1);
    EXPECT_TRUE(torch::allclose(x[0].narrow(0, 0, n), y[0], 1e-5, 1e-5)) << "block " << b;
    EXPECT_EQ(x[0].narrow(0, n, x.size(1) - n).abs().sum().item<float>(), 0.0f);
  }
  // A change in the padding's content (what a garbage pad would be) changes nothing either.
  torch::Tensor packed = model.blocks[0].forward(batch);
  torch::Tensor noisy = packed.clone();
  const int64_t d = packed.size(2) - 1;
  noisy.narrow(2, 0, d).add_(torch::randn({packed.size(0), packed.size(1), d}) *
                             (1 - packed.narrow(2, d, 1)));
  BlockStack rest;
  for (int64_t b = 1; b < model.num_blocks(); ++b) {
    rest->append(model.block_names[b], model.blocks[b]);
  }
  rest->append("fc", torch::nn::AnyModule(model.classifier));
  EXPECT_TRUE(torch::allclose(rest->forward(packed), rest->forward(noisy), 1e-5, 1e-5));
}

// The hand-written attention computes what LibTorch's nn::MultiheadAttention computes with
// the same weights and key_padding_mask, and a padded key's content never reaches a valid
// position.
TEST(TransformerTest, SelfAttentionMatchesMultiheadAttention) {
  torch::manual_seed(11);
  torch::nn::MultiheadAttention reference(16, 2);
  torch::NoGradGuard no_grad;
  reference->out_proj->bias.uniform_(-0.5, 0.5);  // its init zeroes the biases; test them too
  reference->in_proj_bias.uniform_(-0.5, 0.5);
  const torch::Tensor x = torch::randn({3, 7, 16});
  const torch::Tensor mask = mask_from_lengths(torch::tensor({7, 3, 1}, torch::kInt64), 7);
  const torch::Tensor t = x.transpose(0, 1);  // nn::MultiheadAttention takes [L, N, D]
  const torch::Tensor expected = std::get<0>(
      reference->forward(t, t, t, mask.logical_not(), /*need_weights=*/false)).transpose(0, 1);
  const auto attend = [&](const torch::Tensor& in) {
    return masked_self_attention(in, mask, reference->in_proj_weight, reference->in_proj_bias,
                                 reference->out_proj->weight, reference->out_proj->bias, 2);
  };
  const torch::Tensor got = attend(x);
  ASSERT_EQ(got.sizes().vec(), (std::vector<int64_t>{3, 7, 16}));
  EXPECT_TRUE(torch::allclose(got, expected, 1e-5, 1e-5));
  // New content at the padded positions: the valid positions' outputs do not move.
  const torch::Tensor noisy = x + torch::randn({3, 7, 16}) * mask.logical_not().unsqueeze(-1);
  const torch::Tensor valid = mask.unsqueeze(-1).to(torch::kFloat);
  EXPECT_FALSE(torch::equal(noisy, x));
  EXPECT_TRUE(torch::allclose(attend(noisy) * valid, got * valid, 1e-5, 1e-5));
  // Without padding, every key counts (the masked pass is skipped).
  const torch::Tensor all = torch::ones({3, 7}, torch::kBool);
  const torch::Tensor full = std::get<0>(reference->forward(t, t, t, {}, false)).transpose(0, 1);
  EXPECT_TRUE(torch::allclose(
      masked_self_attention(x, all, reference->in_proj_weight, reference->in_proj_bias,
                            reference->out_proj->weight, reference->out_proj->bias, 2),
      full, 1e-5, 1e-5));
}

TEST(TransformerTest, RatiosMapToLayers) {
  const BlockModel model = make_encoder(kSmall, 2);
  ASSERT_EQ(model.block_names, (std::vector<std::string>{"layer0", "layer1", "layer2", "layer3"}));
  EXPECT_EQ(prefix_blocks_for_ratio(model, 0.25), 1);
  EXPECT_EQ(prefix_blocks_for_ratio(model, 0.5), 2);
  EXPECT_EQ(prefix_blocks_for_ratio(model, 0.75), 3);
  EXPECT_EQ(prefix_blocks_for_ratio(model, 1.0), 4);
  EXPECT_THROW(prefix_blocks_for_ratio(model, 0.3), std::invalid_argument);
  EXPECT_EQ(prefix_blocks_for_name(model, "layer1"), 2);
}

// The prefix then the head gives the whole model's output (train mode: no dropout) at every
// split point, and training the head trains the model's own modules.
TEST(TransformerTest, SplitPrefixThenHeadEqualsTheWholeModel) {
  torch::manual_seed(5);
  BlockModel model = make_encoder(kSmall, 2);
  const torch::Tensor tokens =
      token_batch({"one", "two words", "three words here"}, 24, torch::kCPU);
  BlockStack whole = model.as_stack();
  whole->train();
  const torch::Tensor expected = whole->forward(tokens).detach();
  for (int64_t k = 0; k <= model.num_blocks(); ++k) {
    SplitModel split = split_block_model(model, k);
    torch::Tensor x = tokens;
    {
      torch::NoGradGuard no_grad;
      if (k > 0) x = split.prefix->forward(tokens);
    }
    const torch::Tensor got = split.head->forward(x);
    EXPECT_TRUE(torch::allclose(got, expected, 1e-5, 1e-5)) << "split after " << k << " blocks";
    if (k == model.num_blocks()) {
      got.sum().backward();
      EXPECT_TRUE(model.classifier->parameters()[0].grad().defined());
    }
  }
}

TEST(TransformerTest, InputErrorsAreClear) {
  BlockModel model = make_encoder(kSmall, 2);
  torch::NoGradGuard no_grad;
  EXPECT_THROW(model.blocks[0].forward(torch::zeros({1, 4})), std::invalid_argument);  // float
  EXPECT_THROW(model.blocks[0].forward(torch::ones({1, 25}, torch::kInt64)),
               std::invalid_argument);  // longer than max_tokens
  EXPECT_THROW(model.blocks[1].forward(torch::zeros({1, 4, 16})), std::invalid_argument);
}

TEST(TransformerTest, WeightsRoundTrip) {
  testing::TempDir dir;
  torch::manual_seed(9);
  BlockModel model = make_encoder(kSmall, 3);
  model.class_names = {"a", "b", "c"};
  save_block_model(model, dir.file("w.pt"));
  BlockModel loaded = load_block_model(dir.file("w.pt"));
  EXPECT_EQ(loaded.spec, model.spec);
  EXPECT_EQ(loaded.classifier->pooling(), Pooling::kMaskedMean);
  const torch::Tensor tokens = token_batch({"same input", "x"}, 24, torch::kCPU);
  BlockStack a = model.as_stack(), b = loaded.as_stack();
  a->eval();
  b->eval();
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(a->forward(tokens), b->forward(tokens)));
  loaded.reset_classifier(5);
  EXPECT_EQ(loaded.classifier->pooling(), Pooling::kMaskedMean);
}

}  // namespace
}  // namespace recycle
