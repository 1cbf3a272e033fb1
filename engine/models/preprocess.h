// Input preprocessing: how raw dataset samples become model input. Its spec string is part of
// a cache's identity, so changing the preprocessing invalidates caches built before.
#pragma once

#include <torch/torch.h>

#include <string>

#include "engine/data/dataset.h"

namespace recycle {

// uint8 pixels scaled to [0, 1], then normalised with Fashion-MNIST's mean and std.
constexpr float kPixelMean = 0.2860f;
constexpr float kPixelStd = 0.3530f;
std::string preprocess_spec();

// Samples `indices[0..n)` of an image dataset as a float32 tensor [n, C, H, W] on `device`.
torch::Tensor image_batch(const Dataset& data, const int64_t* indices, int64_t n,
                          const torch::Device& device);

}  // namespace recycle
