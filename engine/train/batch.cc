#include "engine/train/batch.h"

#include <stdexcept>

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

void Batch::clear() {
  inputs.clear();
  labels = torch::Tensor();
}

}  // namespace recycle
