#include "engine/models/precision.h"

#include <ATen/autocast_mode.h>

#include "engine/models/torch_compat.h"
#include "recycle/errors.h"

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
    : active_(precision != Precision::kFp32),
      device_(device == c10::DeviceType::CPU ? c10::DeviceType::CPU : c10::DeviceType::CUDA) {
  if (!active_) return;
  const at::ScalarType dtype = precision == Precision::kFp16 ? at::kHalf : at::kBFloat16;
#if TORCH_VERSION_MAJOR < 2
  if (dtype == at::kHalf && device_ == c10::DeviceType::CPU) {
    throw InvalidArgument("--precision fp16 on the CPU needs LibTorch 2.x (1.13's CPU autocast "
                          "knows bf16 only): use bf16");
  }
#endif
  was_enabled_ = compat::autocast_enabled(device_);
  previous_dtype_ = compat::autocast_dtype(device_);
  compat::set_autocast_dtype(device_, dtype);
  compat::set_autocast_enabled(device_, true);
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  compat::set_autocast_enabled(device_, was_enabled_);
  compat::set_autocast_dtype(device_, previous_dtype_);
  // The bf16 or fp16 copies of the weights were made for this forward; the next one casts the
  // updated weights again.
  if (!was_enabled_) at::autocast::clear_cache();
}

}  // namespace recycle
