#include "engine/models/memory_format.h"

#include <c10/util/strides.h>
#include <torch/torch.h>

#include <stdexcept>

namespace recycle {

c10::MemoryFormat to_c10(MemoryFormat format) {
  return format == MemoryFormat::kChannelsLast ? c10::MemoryFormat::ChannelsLast
                                               : c10::MemoryFormat::Contiguous;
}

namespace {

// `t` with exactly the strides of `format`. Tensor::contiguous(format) returns a tensor as it
// is when it already counts as contiguous in that format, and a tensor with a dimension of
// size 1 (a 1-channel stem's weight [O, 1, kH, kW], a 1x1 convolution's [O, I, 1, 1], a
// 1-channel image batch) counts as both; its NCHW strides then make oneDNN pick NCHW for the
// convolution, and layouts mix downstream (the residual adds, ReLU and their backward ran
// 2.5-6x slower than the peer's, docs/performance.md). Tensor::to(format) decides by
// suggest_memory_format() instead and so lays such a tensor out anew, as PyTorch's
// Module.to(memory_format=...) does.
torch::Tensor exactly_in(const torch::Tensor& t, c10::MemoryFormat format) {
  return t.to(t.options(), /*non_blocking=*/false, /*copy=*/false, format);
}

}  // namespace

void set_memory_format(torch::nn::Module& module, c10::MemoryFormat format) {
  torch::NoGradGuard no_grad;
  auto relayout = [format](torch::Tensor& t) {
    if (!t.defined() || t.dim() != 4) return;
    torch::Tensor r = exactly_in(t, format);
    if (!r.is_same(t)) t.set_data(r);
  };
  for (torch::Tensor& p : module.parameters(/*recurse=*/true)) {
    relayout(p);
    if (p.grad().defined() && p.grad().dim() == 4) p.mutable_grad() = exactly_in(p.grad(), format);
  }
  for (torch::Tensor& b : module.buffers(/*recurse=*/true)) relayout(b);
}

std::vector<int64_t> strides_in(const std::vector<int64_t>& shape, c10::MemoryFormat format) {
  if (format == c10::MemoryFormat::ChannelsLast && shape.size() == 4) {
    return c10::get_channels_last_strides_2d(shape);
  }
  const c10::DimVector strides = c10::contiguous_strides(shape);
  return {strides.begin(), strides.end()};
}

torch::Tensor in_memory_format(const torch::Tensor& x, c10::MemoryFormat format) {
  return x.dim() == 4 ? exactly_in(x, format) : x;
}

}  // namespace recycle
