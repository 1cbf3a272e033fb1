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
  // Every input, in order: what a head of several inputs takes (BlockStackImpl::forward_all).
  std::vector<torch::Tensor> tensors() const;
  void clear();
};

// *had (a tensor a Batch held) when nothing else refers to it or to its memory (no other tensor,
// no view) and it has this shape, the dtype and device of `options` and the strides
// torch::empty gives it in `format`; else a new such tensor. Batch sources decode or gather
// each batch into the buffers of the one before instead of allocating anew.
torch::Tensor reuse_or_empty(const torch::Tensor* had, const std::vector<int64_t>& shape,
                             const torch::TensorOptions& options,
                             c10::MemoryFormat format = c10::MemoryFormat::Contiguous);

}  // namespace recycle
