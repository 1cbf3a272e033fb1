#include "engine/train/text_batches.h"

#include <stdexcept>
#include <string>

#include "engine/models/transformer.h"

namespace recycle {

void TextFeatureBatches::load(const int64_t* indices, int64_t n, Batch* out) {
  source_.load(indices, n, out);
  torch::Tensor hidden, lengths;
  try {
    hidden = out->at("hidden");
    lengths = out->at("length");
  } catch (const std::out_of_range& e) {
    throw std::runtime_error(std::string("not a text cache: ") + e.what());
  }
  const int64_t length = hidden.size(1);
  if (lengths.dim() != 1 || lengths.size(0) != n ||
      (n > 0 && (lengths.min().item<int64_t>() < 1 || lengths.max().item<int64_t>() > length))) {
    throw std::runtime_error("text cache batch: lengths outside 1.." + std::to_string(length));
  }
  torch::Tensor labels = out->labels;
  out->clear();
  out->set("features", pack_text_features(hidden, mask_from_lengths(lengths, length)));
  out->labels = std::move(labels);
}

RawTextBatches::RawTextBatches(const Dataset& data, BlockStack prefix, int64_t max_tokens,
                               const torch::Device& device)
    : data_(data), prefix_(std::move(prefix)), max_tokens_(max_tokens), device_(device) {
  if (!data.is_text) throw std::invalid_argument("RawTextBatches: the dataset holds images");
}

void RawTextBatches::load(const int64_t* indices, int64_t n, Batch* out) {
  std::vector<std::string> texts(static_cast<size_t>(n));
  torch::Tensor y = torch::empty({n}, torch::kInt64);
  int64_t* yp = y.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    texts[i] = data_.texts[indices[i]];
    yp[i] = data_.labels[indices[i]];
  }
  torch::Tensor x = token_batch(texts, max_tokens_, device_);
  if (prefix_->size() > 0) {
    torch::NoGradGuard no_grad;
    x = prefix_->forward(x);
  }
  out->clear();
  out->set("input", x);
  out->labels = y.to(device_);
}

}  // namespace recycle
