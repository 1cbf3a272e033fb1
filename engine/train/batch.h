// Batch: the samples one training or evaluation step sees: named input tensors, each with the
// batch as dimension 0 (float32 activations or images; later int64 token ids, bool masks), and
// int64 labels [n]. Padding of variable-length tensors happens when a batch is assembled, never
// in storage. Tensors are shared (torch semantics), not copied. Not thread safe.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace recycle {

struct Batch {
  std::vector<std::pair<std::string, torch::Tensor>> inputs;  // in the order they were set
  torch::Tensor labels;                                       // int64 [n]

  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
  // Sets the input `name`, replacing one of that name.
  void set(const std::string& name, torch::Tensor tensor);
  // The input `name`; throws std::out_of_range naming the inputs the batch has.
  const torch::Tensor& at(const std::string& name) const;
  // The first input: what a head of blocks takes as its forward's argument.
  const torch::Tensor& features() const;
  void clear();
};

}  // namespace recycle
