// Small IDX data sets for build tests, in process and through the tools: image i shows
// pattern[i], so equal patterns are duplicate samples (equal keys).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/tool_runner.h"

namespace recycle::testing {

constexpr int kPatternSide = 28;

// Writes train-images/train-labels IDX files for `pattern` into dir (label = pattern % 10).
inline void write_pattern_images(const std::string& dir, const std::vector<int>& pattern) {
  const int n = static_cast<int>(pattern.size());
  std::vector<uint8_t> images, labels;
  for (int p : pattern) {
    for (int q = 0; q < kPatternSide * kPatternSide; ++q)
      images.push_back(static_cast<uint8_t>((p * 37 + q * 11) % 251));
    labels.push_back(static_cast<uint8_t>(p % 10));
  }
  write_idx(dir + "/train-images-idx3-ubyte.gz", {n, kPatternSide, kPatternSide}, images);
  write_idx(dir + "/train-labels-idx1-ubyte.gz", {n}, labels);
}

// 0..unique-1, then the first `repeats` of them again.
inline std::vector<int> patterns(int unique, int repeats) {
  std::vector<int> p;
  for (int i = 0; i < unique; ++i) p.push_back(i);
  for (int i = 0; i < repeats; ++i) p.push_back(i);
  return p;
}

}  // namespace recycle::testing
