#include "engine/train/preload.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>

namespace recycle {

namespace {

// The memory format of `t`: a channels-last batch is preloaded and served channels last (each
// sample's values still one block, in [H, W, C] order).
c10::MemoryFormat format_of(const torch::Tensor& t) {
  return t.dim() == 4 ? t.suggest_memory_format() : c10::MemoryFormat::Contiguous;
}

// A buffer of `n` rows like `like` (its dtype, device and layout): *had when it can be reused.
torch::Tensor rows_buffer(const torch::Tensor* had, const torch::Tensor& like, int64_t n) {
  std::vector<int64_t> shape = like.sizes().vec();
  shape[0] = n;
  return reuse_or_empty(had, shape, like.options(), format_of(like));
}

// rows[i] = all[index[i]]: each sample one block of bytes in both (row-major or channels last).
void gather_rows(const torch::Tensor& all, const int64_t* index, int64_t n, torch::Tensor* rows) {
  if (!all.device().is_cpu()) {
    const torch::Tensor i = torch::from_blob(const_cast<int64_t*>(index), {n}, torch::kInt64);
    torch::index_select_out(*rows, all, 0, i.to(all.device()));
    return;
  }
  const int64_t row = all.size(0) > 0 ? static_cast<int64_t>(all.nbytes()) / all.size(0) : 0;
  const char* from = static_cast<const char*>(all.data_ptr());
  char* to = static_cast<char*>(rows->data_ptr());
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(to + i * row, from + index[i] * row, static_cast<size_t>(row));
  }
}

}  // namespace

int64_t batch_bytes(BatchSource& source, int64_t n) {
  if (source.size() == 0 || n <= 0) return 0;
  const int64_t first = 0;
  Batch one;
  source.load(&first, 1, &one);
  int64_t bytes = static_cast<int64_t>(one.labels.nbytes());
  for (const auto& [name, t] : one.inputs) bytes += static_cast<int64_t>(t.nbytes());
  return bytes * n;
}

PreloadedBatches::PreloadedBatches(BatchSource& source, int64_t chunk) : source_(source) {
  const int64_t size = source.size();
  chunk = std::max<int64_t>(chunk, 1);
  std::vector<int64_t> indices(static_cast<size_t>(std::min(chunk, size)));
  Batch b;
  for (int64_t pos = 0; pos < size; pos += chunk) {
    const int64_t n = std::min(chunk, size - pos);
    std::iota(indices.begin(), indices.begin() + n, pos);
    source.load(indices.data(), n, &b);
    if (pos == 0) {
      for (const auto& [name, t] : b.inputs) {
        std::vector<int64_t> shape = t.sizes().vec();
        shape[0] = size;
        inputs_.emplace_back(name, torch::empty(shape, t.options().memory_format(format_of(t))));
      }
      labels_ = torch::empty({size}, b.labels.options());
    }
    if (b.inputs.size() != inputs_.size()) {
      throw std::runtime_error("cannot preload: the batches do not all have the same inputs");
    }
    for (size_t j = 0; j < inputs_.size(); ++j) {
      const torch::Tensor& t = b.inputs[j].second;
      if (b.inputs[j].first != inputs_[j].first ||
          t.sizes().slice(1) != inputs_[j].second.sizes().slice(1)) {
        throw std::runtime_error("cannot preload: input '" + b.inputs[j].first +
                                 "' has no single shape across samples (a variable layout)");
      }
      inputs_[j].second.narrow(0, pos, n).copy_(t);
    }
    labels_.narrow(0, pos, n).copy_(b.labels);
  }
}

int64_t PreloadedBatches::bytes() const {
  int64_t total = static_cast<int64_t>(labels_.nbytes());
  for (const auto& [name, t] : inputs_) total += static_cast<int64_t>(t.nbytes());
  return total;
}

void PreloadedBatches::load(const int64_t* indices, int64_t n, Batch* out) {
  for (int64_t i = 0; i < n; ++i) {
    if (indices[i] < 0 || indices[i] >= size()) {
      throw std::out_of_range("sample " + std::to_string(indices[i]) + " is outside 0.." +
                              std::to_string(size() - 1));
    }
  }
  std::vector<torch::Tensor> rows;
  for (const auto& [name, all] : inputs_) {
    const torch::Tensor* had = nullptr;
    for (const auto& [have, t] : out->inputs) {
      if (have == name) had = &t;
    }
    rows.push_back(rows_buffer(had, all, n));
  }
  torch::Tensor y = rows_buffer(&out->labels, labels_, n);
  out->clear();
  for (size_t j = 0; j < inputs_.size(); ++j) {
    gather_rows(inputs_[j].second, indices, n, &rows[j]);
    out->set(inputs_[j].first, rows[j]);
  }
  gather_rows(labels_, indices, n, &y);
  out->labels = y;
}

AlternatingBatches::AlternatingBatches(BatchSource& first, BatchSource& second)
    : first_(first), second_(second), current_(&first) {
  if (first.size() != second.size()) {
    throw std::invalid_argument("alternating sources of " + std::to_string(first.size()) +
                                " and " + std::to_string(second.size()) + " samples");
  }
}

}  // namespace recycle
