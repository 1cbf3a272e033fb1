// An inference-only form of a frozen prefix, for recycle-build. The prefix never trains, so its
// batch norms (eval mode: running statistics) are folded into the convolutions before them,
// it runs under c10::InferenceMode with in-place ReLUs and residual adds, and in the memory
// format measured fastest here (see docs/performance.md, "Build").
//
// Folded: ResNet-18's blocks (engine/models/resnet18.cc), recognised by their children's names
// (stem_conv/stem_bn/block; conv1/bn1/conv2/bn2[/down_conv/down_bn]) when every batch norm
// keeps running statistics and every convolution pads with zeros. Any other block runs as it
// is (eval mode, no grad). The model's own modules and parameters are not changed: the cache's
// identity is the fingerprint of the plain prefix, which this form does not touch.
//
// Tolerance: for every batch, max |folded - plain| <= kInferencePrefixTolerance * max(1,
// max |plain|) over the whole output (the plain prefix in eval mode under NoGradGuard,
// float32). Folding only reorders float32 arithmetic (w * s then conv, instead of conv then
// * s), so records of a cache built before match within this bound and the cache stays valid.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/models/block_model.h"

namespace recycle {

constexpr double kInferencePrefixTolerance = 1e-4;

// How the activations are laid out while the prefix runs.
enum class PrefixLayout {
  kContiguous,    // strided NCHW
  kChannelsLast,  // strided NHWC
  // oneDNN's own (blocked) layout end to end, its convolution weights reordered for it once:
  // no reorder between the blocks. CPU only, and only when every block folds; otherwise the
  // prefix runs channels last.
  kMkldnn,
};

class InferencePrefix {
 public:
  // The first `prefix_blocks` blocks of `model`, folded, run in `layout` (or channels last,
  // see PrefixLayout::kMkldnn).
  InferencePrefix(const BlockModel& model, int64_t prefix_blocks,
                  PrefixLayout layout = kDefaultLayout);
  ~InferencePrefix();
  InferencePrefix(InferencePrefix&&) noexcept;
  InferencePrefix& operator=(InferencePrefix&&) noexcept;

  // x: float32 [N, C, H, W] on the model's device. Returns the prefix's output, float32,
  // contiguous (NCHW). It is an inference tensor: read it or copy it; outside InferenceMode
  // it cannot be modified in place or saved for autograd.
  torch::Tensor forward(const torch::Tensor& x) const;

  int64_t blocks() const;         // blocks in the prefix
  int64_t folded_blocks() const;  // of them, how many were folded (the rest run as they are)
  PrefixLayout layout() const { return layout_; }  // the one it runs in

  // The fastest layout on this machine's CPU build (measured, docs/performance.md).
  static constexpr PrefixLayout kDefaultLayout = PrefixLayout::kMkldnn;

  struct Step;  // one block, folded or not (inference_prefix.cc)

 private:
  std::vector<std::unique_ptr<Step>> steps_;
  PrefixLayout layout_;
};

}  // namespace recycle
