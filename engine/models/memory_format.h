// The memory format of a module's 4-D tensors (convolution weights; NCHW contiguous or NHWC
// "channels last") and of the batches fed to it. oneDNN's convolutions run faster on
// channels-last data on these CPUs (docs/profile.md measures it); the values do not change,
// only their order in memory.
#pragma once

#include <c10/core/MemoryFormat.h>  // small: no LibTorch operators or modules

#include <string>
#include <vector>

#include "recycle/options.h"  // enum class MemoryFormat

namespace at {
class Tensor;
}
namespace torch::nn {
class Module;
}

namespace recycle {

// LibTorch's memory format for `format`: ChannelsLast or Contiguous.
c10::MemoryFormat to_c10(MemoryFormat format);

// Re-lays every 4-D parameter and buffer of `module` out in `format` (exact strides, as
// in_memory_format), in place: each tensor
// keeps its identity (optimizer state and gradient hooks stay attached), only its strides
// change. Not thread safe.
void set_memory_format(torch::nn::Module& module, c10::MemoryFormat format);

// The strides torch::empty(shape, format) gives: channels last for a 4-D shape in
// ChannelsLast, row-major otherwise.
std::vector<int64_t> strides_in(const std::vector<int64_t>& shape, c10::MemoryFormat format);

// `x` in `format` when it is 4-D, else `x` unchanged. The strides are exactly those of `format`,
// also for a tensor with a dimension of size 1, which Tensor::contiguous(format) would leave
// as it is (see memory_format.cc); `x` itself when it is already laid out so.
at::Tensor in_memory_format(const at::Tensor& x, c10::MemoryFormat format);

}  // namespace recycle
