#include "engine/train/precision.h"

#include <ATen/autocast_mode.h>

#include <stdexcept>

namespace recycle {

bool cpu_has_bf16_instructions() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

AutocastScope::AutocastScope(Precision precision, c10::DeviceType device)
    : active_(precision == Precision::kBf16), cpu_(device == c10::DeviceType::CPU) {
  if (!active_) return;
  if (cpu_) {
    was_enabled_ = at::autocast::is_cpu_enabled();
    previous_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(true);
  } else {
    was_enabled_ = at::autocast::is_enabled();
    previous_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    at::autocast::set_enabled(true);
  }
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (cpu_) {
    at::autocast::set_cpu_enabled(was_enabled_);
    at::autocast::set_autocast_cpu_dtype(previous_dtype_);
  } else {
    at::autocast::set_enabled(was_enabled_);
    at::autocast::set_autocast_gpu_dtype(previous_dtype_);
  }
  // The bf16 copies of the weights were made for this forward; the next one casts the updated
  // weights again.
  if (!was_enabled_) at::autocast::clear_cache();
}

}  // namespace recycle
