// The device the tools and the library run on (--device; BuildOptions, TrainOptions and
// PredictOptions' `device`): "cpu", "cuda" or "cuda:N", checked against what this process can
// use before any work, so that a device it cannot have is one line, not LibTorch's dispatcher
// dump.
#pragma once

#include <c10/core/Device.h>

#include <string>

namespace recycle {

// `name` as a device this process can use. Throws InvalidArgument (recycle/errors.h) naming
// `option` (the option as the caller's user knows it: --device on the command line, device in
// the library and Python) for another spelling, for cuda in a program whose LibTorch has no
// CUDA (Debian's 1.13), where no GPU is visible (no driver, or CUDA_VISIBLE_DEVICES empty), or
// for cuda:N past the GPUs there.
c10::Device usable_device(const std::string& name, const std::string& option = "--device");

}  // namespace recycle
