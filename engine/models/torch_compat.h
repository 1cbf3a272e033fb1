// Where the LibTorch versions this engine builds against differ in their C++ API: Debian's 1.13
// and pip's 2.x (see docs/pytorch2.md). Each difference is one small function here, so the engine
// reads the same under both; c10d's process group is made in engine/distributed/process_group.cc.
#pragma once

#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <c10/util/string_utils.h>
#include <torch/version.h>

#include <string>
#include <variant>

namespace recycle::compat {

// std::get_if on a module option's variant (a convolution's padding, say): LibTorch 1.13 has
// its own c10::variant, 2.x uses std::variant.
template <class T, class Variant>
const T* get_if(const Variant* v) {
#if TORCH_VERSION_MAJOR >= 2
  return std::get_if<T>(v);
#else
  return c10::get_if<T>(v);
#endif
}

// The key of a parameter's entry in a torch::optim optimizer's state(): its TensorImpl's
// address, as a string in 1.13 and as the pointer itself in 2.x.
#if TORCH_VERSION_MAJOR >= 2
inline void* optimizer_state_key(const at::Tensor& p) { return p.unsafeGetTensorImpl(); }
#else
inline std::string optimizer_state_key(const at::Tensor& p) {
  return c10::guts::to_string(p.unsafeGetTensorImpl());
}
#endif

// Autocast's switch and dtype for a device type (CPU or CUDA): one function per device in 1.13,
// one taking the device in 2.x.
inline bool autocast_enabled(c10::DeviceType device) {
#if TORCH_VERSION_MAJOR >= 2
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CPU ? at::autocast::is_cpu_enabled()
                                        : at::autocast::is_enabled();
#endif
}
inline void set_autocast_enabled(c10::DeviceType device, bool enabled) {
#if TORCH_VERSION_MAJOR >= 2
  at::autocast::set_autocast_enabled(device, enabled);
#else
  if (device == c10::DeviceType::CPU) {
    at::autocast::set_cpu_enabled(enabled);
  } else {
    at::autocast::set_enabled(enabled);
  }
#endif
}
inline at::ScalarType autocast_dtype(c10::DeviceType device) {
#if TORCH_VERSION_MAJOR >= 2
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CPU ? at::autocast::get_autocast_cpu_dtype()
                                        : at::autocast::get_autocast_gpu_dtype();
#endif
}
inline void set_autocast_dtype(c10::DeviceType device, at::ScalarType dtype) {
#if TORCH_VERSION_MAJOR >= 2
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CPU) {
    at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_gpu_dtype(dtype);
  }
#endif
}

}  // namespace recycle::compat
