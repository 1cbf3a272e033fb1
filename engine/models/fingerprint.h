// The identity of a frozen prefix's weights.
#pragma once

#include <torch/torch.h>

#include <string>

namespace recycle {

// XXH3-128 hex over the names, dtypes, shapes and values of every parameter and buffer of
// `module` (in registration order).
std::string module_fingerprint(const torch::nn::Module& module);

}  // namespace recycle
