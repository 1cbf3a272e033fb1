// The arithmetic a forward runs in: fp32 everywhere, or mixed precision: LibTorch's autocast
// runs the convolutions, linear layers and matrix products of the forward in bfloat16 or
// float16 (so their backward too), while the parameters (and in training their gradients, the
// optimizer and the loss) stay fp32. A training step takes fp32 or bf16; a build's prefix any
// of the three (PrefixRunner, engine/precompute/prefix_runner.h). On CPUs with bf16 instructions
// (AVX512_BF16, AMX) oneDNN's bf16 convolutions are faster than its fp32 ones; elsewhere oneDNN
// emulates them and they are slower. No LibTorch operators here.
#pragma once

#include <c10/core/DeviceType.h>  // small: no LibTorch operators or modules
#include <c10/core/ScalarType.h>

#include "recycle/options.h"  // enum class Precision, its names

namespace recycle {

// Whether this CPU has bf16 dot-product instructions (x86 AVX512_BF16). False elsewhere.
bool cpu_has_bf16_instructions();

// While it lives, operations on `device` run under autocast to bf16 or fp16 as `precision`
// says (nothing changes for kFp32). Throws InvalidArgument for fp16 on the CPU with LibTorch
// 1.13, whose CPU autocast knows bf16 only. The thread's previous autocast state is restored when
// it goes, and the casts of the weights it cached are dropped. Not for nesting with another
// autocast scope on the same thread.
class AutocastScope {
 public:
  AutocastScope(Precision precision, c10::DeviceType device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType device_ = c10::DeviceType::CPU;  // CPU, or CUDA for any GPU device
  bool was_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::BFloat16;
};

}  // namespace recycle
