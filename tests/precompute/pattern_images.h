// Small IDX data sets (and image folders) for build tests, in process and through the tools:
// image i shows pattern[i], so equal patterns are duplicate samples (equal keys).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/data/image_files.h"
#include "tests/tool_runner.h"

namespace recycle::testing {

constexpr int kPatternSide = 28;

// The pixels of pattern p's image.
inline std::vector<uint8_t> pattern_pixels(int p) {
  std::vector<uint8_t> pixels;
  for (int q = 0; q < kPatternSide * kPatternSide; ++q) {
    pixels.push_back(static_cast<uint8_t>((p * 37 + q * 11) % 251));
  }
  return pixels;
}

// Writes train-images/train-labels IDX files for `pattern` into dir (label = pattern % 10).
inline void write_pattern_images(const std::string& dir, const std::vector<int>& pattern) {
  const int n = static_cast<int>(pattern.size());
  std::vector<uint8_t> images, labels;
  for (int p : pattern) {
    const std::vector<uint8_t> pixels = pattern_pixels(p);
    images.insert(images.end(), pixels.begin(), pixels.end());
    labels.push_back(static_cast<uint8_t>(p % 10));
  }
  write_idx(dir + "/train-images-idx3-ubyte.gz", {n, kPatternSide, kPatternSide}, images);
  write_idx(dir + "/train-labels-idx1-ubyte.gz", {n}, labels);
}

// The same images as an image folder: dir/c<label>/<i>.png for image i (five digits), gray
// PNGs. imagefolder:DIR reads them class by class, each class's files by name.
inline void write_pattern_png_folder(const std::string& dir, const std::vector<int>& pattern) {
  for (size_t i = 0; i < pattern.size(); ++i) {
    const std::string cls = dir + "/c" + std::to_string(pattern[i] % 10);
    std::filesystem::create_directories(cls);
    char name[16];
    std::snprintf(name, sizeof name, "/%05zu.png", i);
    write_gray_png(cls + name, kPatternSide, kPatternSide, pattern_pixels(pattern[i]));
  }
}

// 0..unique-1, then the first `repeats` of them again.
inline std::vector<int> patterns(int unique, int repeats) {
  std::vector<int> p;
  for (int i = 0; i < unique; ++i) p.push_back(i);
  for (int i = 0; i < repeats; ++i) p.push_back(i);
  return p;
}

}  // namespace recycle::testing
