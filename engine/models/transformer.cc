#include "engine/models/transformer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "engine/data/byte_tokenizer.h"
#include "engine/models/block_model.h"

namespace recycle {

namespace nn = torch::nn;

namespace {

// Multi-head self-attention with nn::MultiheadAttention's parameters (in_proj_weight,
// in_proj_bias, out_proj) and initialisation, computed by masked_self_attention.
class SelfAttentionImpl : public nn::Module {
 public:
  SelfAttentionImpl(int64_t d_model, int64_t heads) : heads_(heads) {
    in_proj_weight_ = register_parameter("in_proj_weight", torch::empty({3 * d_model, d_model}));
    in_proj_bias_ = register_parameter("in_proj_bias", torch::zeros({3 * d_model}));
    out_proj_ = register_module("out_proj", nn::Linear(d_model, d_model));
    torch::NoGradGuard no_grad;
    nn::init::xavier_uniform_(in_proj_weight_);
    nn::init::zeros_(out_proj_->bias);
  }

  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) {
    return masked_self_attention(x, mask, in_proj_weight_, in_proj_bias_, out_proj_->weight,
                                 out_proj_->bias, heads_);
  }

 private:
  int64_t heads_;
  torch::Tensor in_proj_weight_, in_proj_bias_;
  nn::Linear out_proj_{nullptr};
};
TORCH_MODULE(SelfAttention);

// One pre-norm layer: x + attention(norm(x)), then x + feed_forward(norm(x)). The first layer
// embeds token ids first; the last one ends with a layer norm.
class TextLayerImpl : public nn::Module {
 public:
  TextLayerImpl(int64_t d_model, int64_t heads, int64_t ff, int64_t max_tokens, bool embed,
                bool final_norm)
      : d_model_(d_model), max_tokens_(max_tokens) {
    if (embed) {
      tokens_ = register_module("token_embedding", nn::Embedding(kByteVocabulary, d_model));
      positions_ = register_module("position_embedding", nn::Embedding(max_tokens, d_model));
    }
    norm1_ = register_module("norm1", nn::LayerNorm(nn::LayerNormOptions({d_model})));
    attention_ = register_module("attention", SelfAttention(d_model, heads));
    norm2_ = register_module("norm2", nn::LayerNorm(nn::LayerNormOptions({d_model})));
    ff1_ = register_module("ff1", nn::Linear(d_model, ff));
    ff2_ = register_module("ff2", nn::Linear(ff, d_model));
    if (final_norm) {
      final_norm_ = register_module("final_norm", nn::LayerNorm(nn::LayerNormOptions({d_model})));
    }
  }

  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor h, mask;
    if (tokens_) {
      if (x.dim() != 2 || x.scalar_type() != torch::kInt64) {
        throw std::invalid_argument("the transformer's first layer takes token ids, int64 [N, L]");
      }
      const int64_t length = x.size(1);
      if (length < 1 || length > max_tokens_) {
        throw std::invalid_argument("token sequences of length " + std::to_string(length) +
                                    ", the model takes 1.." + std::to_string(max_tokens_));
      }
      mask = x.ne(kPadToken);
      h = tokens_->forward(x) +
          positions_->forward(torch::arange(length, x.options())).unsqueeze(0);
    } else {
      if (x.dim() != 3 || x.size(2) != d_model_ + 1) {
        throw std::invalid_argument("a transformer layer takes packed text features [N, L, " +
                                    std::to_string(d_model_ + 1) + "]");
      }
      h = x.narrow(2, 0, d_model_);
      mask = x.select(2, d_model_).gt(0.5);
    }
    h = h + attention_->forward(norm1_->forward(h), mask);
    h = h + ff2_->forward(torch::gelu(ff1_->forward(norm2_->forward(h))));
    if (final_norm_) h = final_norm_->forward(h);
    return pack_text_features(h, mask);
  }

 private:
  int64_t d_model_;
  int64_t max_tokens_;
  nn::Embedding tokens_{nullptr}, positions_{nullptr};
  nn::LayerNorm norm1_{nullptr}, norm2_{nullptr}, final_norm_{nullptr};
  SelfAttention attention_{nullptr};
  nn::Linear ff1_{nullptr}, ff2_{nullptr};
};
TORCH_MODULE(TextLayer);

}  // namespace

EncoderInfo transformer_info() {
  EncoderInfo info;
  info.name = "transformer";
  info.input = EncoderInput::kText;
  info.options = {
      {"d_model", 64, 8, 1024, "width of the hidden states"},
      {"layers", 4, 1, 48, "transformer layers (the blocks)"},
      {"heads", 4, 1, 64, "attention heads (must divide d_model)"},
      {"ff", 256, 8, 8192, "width of each layer's feed-forward part"},
      {"max_tokens", 128, 1, 8192, "tokens (bytes) kept per text; longer texts are cut"}};
  info.help = "pre-norm transformer over UTF-8 bytes, mask-aware mean pooling";
  return info;
}

BlockModel make_transformer(const EncoderSpec& spec, int64_t classes) {
  const int64_t d = spec.get("d_model"), layers = spec.get("layers"), heads = spec.get("heads");
  if (d % heads != 0) {
    throw std::invalid_argument("transformer: heads (" + std::to_string(heads) +
                                ") must divide d_model (" + std::to_string(d) + ")");
  }
  BlockModel model;
  for (int64_t i = 0; i < layers; ++i) {
    model.block_names.push_back("layer" + std::to_string(i));
    model.blocks.emplace_back(TextLayer(d, heads, spec.get("ff"), spec.get("max_tokens"),
                                        /*embed=*/i == 0, /*final_norm=*/i == layers - 1));
  }
  model.classifier = Classifier(d, classes, Pooling::kMaskedMean);
  return model;
}

int64_t transformer_max_tokens(const std::string& spec) {
  const EncoderSpec s = resolve_encoder_spec(spec);
  if (s.name != "transformer") throw std::invalid_argument(spec + " is not a transformer");
  return s.get("max_tokens");
}

torch::Tensor masked_self_attention(const torch::Tensor& x, const torch::Tensor& mask,
                                    const torch::Tensor& in_proj_weight,
                                    const torch::Tensor& in_proj_bias,
                                    const torch::Tensor& out_weight, const torch::Tensor& out_bias,
                                    int64_t heads) {
  const int64_t n = x.size(0), length = x.size(1), d = x.size(2), head_dim = d / heads;
  // One matmul for queries, keys and values, then [N, L, 3, heads, head_dim] ->
  // 3 x [N * heads, L, head_dim] (unbind: its backward stacks, no zero-filled copies).
  const std::vector<torch::Tensor> qkv =
      torch::linear(x, in_proj_weight, in_proj_bias).view({n, length, 3, heads, head_dim})
          .permute({2, 0, 3, 1, 4}).reshape({3, n * heads, length, head_dim}).unbind(0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const torch::Tensor keys = qkv[1].transpose(1, 2);
  // scores [N * heads, L, L] = q k^T / sqrt(head_dim), plus -inf at padded keys. The padding
  // bias [N * heads, 1, L] is broadcast by baddbmm as it writes the scores, so masking costs
  // no pass of its own over them, forward or backward (the bias needs no gradient). Every
  // row has a valid key, so no row is all -inf. A batch without padding skips the bias.
  torch::Tensor scores;
  const torch::Tensor padded = mask.logical_not();
  if (padded.any().item<bool>()) {
    const torch::Tensor bias =
        torch::zeros({n, 1, 1, length}, x.options())
            .masked_fill_(padded.view({n, 1, 1, length}), -std::numeric_limits<float>::infinity())
            .expand({n, heads, 1, length})
            .reshape({n * heads, 1, length});
    scores = torch::baddbmm(bias, qkv[0], keys, /*beta=*/1.0, /*alpha=*/scale);
  } else {
    scores = torch::bmm(qkv[0] * scale, keys);
  }
  const torch::Tensor attended =
      torch::bmm(torch::softmax(scores, -1), qkv[2]);  // [N*heads, L, hd]
  const torch::Tensor joined =
      attended.view({n, heads, length, head_dim}).transpose(1, 2).reshape({n, length, d});
  return torch::linear(joined, out_weight, out_bias);
}

torch::Tensor pack_text_features(const torch::Tensor& hidden, const torch::Tensor& mask) {
  const torch::Tensor m = mask.unsqueeze(-1).to(hidden.scalar_type());
  return torch::cat({hidden * m, m}, -1);
}

torch::Tensor mask_from_lengths(const torch::Tensor& lengths, int64_t max_length) {
  return torch::arange(max_length, lengths.options()).unsqueeze(0).lt(lengths.unsqueeze(1));
}

torch::Tensor token_batch(const std::vector<std::string>& texts, int64_t max_tokens,
                          const torch::Device& device) {
  int64_t length = 1;
  for (const std::string& t : texts) length = std::max(length, byte_token_count(t, max_tokens));
  torch::Tensor ids = torch::full({static_cast<int64_t>(texts.size()), length}, kPadToken,
                                  torch::kInt64);
  int64_t* p = ids.data_ptr<int64_t>();
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<int64_t> row = byte_tokens(texts[i], max_tokens);
    std::copy(row.begin(), row.end(), p + static_cast<int64_t>(i) * length);
  }
  return ids.to(device);
}

}  // namespace recycle
