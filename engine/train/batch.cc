#include "engine/train/batch.h"

#include <stdexcept>

#include "engine/models/memory_format.h"

namespace recycle {

void Batch::set(const std::string& name, torch::Tensor tensor) {
  for (auto& [have, t] : inputs) {
    if (have == name) {
      t = std::move(tensor);
      return;
    }
  }
  inputs.emplace_back(name, std::move(tensor));
}

const torch::Tensor& Batch::at(const std::string& name) const {
  std::string names;
  for (const auto& [have, t] : inputs) {
    if (have == name) return t;
    names += (names.empty() ? "" : ", ") + have;
  }
  throw std::out_of_range("the batch has no input '" + name + "' (it has: " + names + ")");
}

const torch::Tensor& Batch::features() const {
  if (inputs.empty()) throw std::out_of_range("the batch has no inputs");
  return inputs.front().second;
}

std::vector<torch::Tensor> Batch::tensors() const {
  std::vector<torch::Tensor> all;
  all.reserve(inputs.size());
  for (const auto& [name, t] : inputs) all.push_back(t);
  return all;
}

void Batch::clear() {
  inputs.clear();
  labels = torch::Tensor();
}

torch::Tensor reuse_or_empty(const torch::Tensor* had, const std::vector<int64_t>& shape,
                             const torch::TensorOptions& options, c10::MemoryFormat format) {
  if (had != nullptr) {
    const torch::Tensor& t = *had;  // not copied: a copy would count as a second reference
    if (t.defined() && t.use_count() == 1 && t.storage().use_count() == 1 &&
        t.storage_offset() == 0 && t.dtype() == options.dtype() &&
        t.device() == options.device() && t.sizes().vec() == shape &&
        t.strides().vec() == strides_in(shape, format)) {
      return t;
    }
  }
  return torch::empty(shape, options.memory_format(format));
}

}  // namespace recycle
