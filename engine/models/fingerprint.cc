#include "engine/models/fingerprint.h"

#include "recycle/content_hasher.h"

namespace recycle {

namespace nn = torch::nn;

namespace {

void hash_tensor(ContentHasher& hasher, const std::string& name, const torch::Tensor& t) {
  const torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
  TensorView view;
  const std::string dtype(c10::toString(c.scalar_type()));
  view.dtype = dtype;
  view.shape = c.sizes().vec();
  view.strides = c.strides().vec();
  view.data = c.data_ptr();
  view.element_size = c.element_size();
  hasher.update_field(name);
  hasher.update_tensor(view);
}

}  // namespace

std::string module_fingerprint(const nn::Module& module) {
  ContentHasher hasher;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    hash_tensor(hasher, p.key(), p.value());
  }
  for (const auto& b : module.named_buffers(/*recurse=*/true)) {
    hash_tensor(hasher, b.key(), b.value());
  }
  return hasher.digest().to_hex();
}

}  // namespace recycle
