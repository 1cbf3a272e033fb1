// ModelSpec: which architecture, as a string stored in weights files and cache manifests.
// No LibTorch here.
#pragma once

#include <cstdint>
#include <string>

namespace recycle {

struct ModelSpec {
  std::string arch = "resnet18";  // the only architecture so far
  int64_t width = 16;             // channels of the first stage (then 2x, 4x, 8x)
  int64_t in_channels = 1;        // input channels (1 for Fashion-MNIST)

  // "resnet18:width=16,in_channels=1"
  std::string to_string() const;
  // Parses to_string()'s form; a bare "resnet18" takes the defaults. Throws
  // std::invalid_argument naming what is wrong.
  static ModelSpec parse(const std::string& text);
  friend bool operator==(const ModelSpec& a, const ModelSpec& b) {
    return a.arch == b.arch && a.width == b.width && a.in_channels == b.in_channels;
  }
};

}  // namespace recycle
