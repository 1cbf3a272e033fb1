// ModelOptions: which encoder to make or load. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>

namespace recycle {

struct ModelOptions {
  std::string arch = "resnet18";
  int64_t width = 16;    // ignored when weights are given (the file's spec is used)
  std::string weights;   // a file saved by recycle-train --save-model; "" = random init
  uint64_t seed = 0;     // initialisation seed when there are no weights
};

}  // namespace recycle
