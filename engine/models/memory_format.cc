#include "engine/models/memory_format.h"

#include <torch/torch.h>

#include <stdexcept>

namespace recycle {

c10::MemoryFormat parse_memory_format(const std::string& name, const std::string& flag) {
  if (name == "channels_last") return c10::MemoryFormat::ChannelsLast;
  if (name == "contiguous") return c10::MemoryFormat::Contiguous;
  throw std::invalid_argument(flag + " '" + name + "': expected channels_last or contiguous");
}

std::vector<std::string> memory_format_names() { return {"channels_last", "contiguous"}; }

void set_memory_format(torch::nn::Module& module, c10::MemoryFormat format) {
  torch::NoGradGuard no_grad;
  auto relayout = [format](torch::Tensor& t) {
    if (t.defined() && t.dim() == 4 && !t.is_contiguous(format)) t.set_data(t.contiguous(format));
  };
  for (torch::Tensor& p : module.parameters(/*recurse=*/true)) {
    relayout(p);
    if (p.grad().defined() && p.grad().dim() == 4) p.mutable_grad() = p.grad().contiguous(format);
  }
  for (torch::Tensor& b : module.buffers(/*recurse=*/true)) relayout(b);
}

torch::Tensor in_memory_format(const torch::Tensor& x, c10::MemoryFormat format) {
  return x.dim() == 4 ? x.contiguous(format) : x;
}

}  // namespace recycle
