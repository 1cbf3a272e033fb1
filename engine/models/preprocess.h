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
// The preprocessing of `data`'s images as a cache identity stores it: "float32 as stored" for
// float pixels, preprocess_spec() for uint8 pixels read as stored (IDX, npy), else "files:" +
// data.transform (the canonical --transform spec) followed, without a normalize op, by ";" and
// preprocess_spec(); for token ids (data.token_ids) kTokenIdsPreprocess.
std::string preprocess_spec(const Dataset& data);
constexpr const char* kTokenIdsPreprocess = "token ids and attention mask as stored";

// Samples `indices[0..n)` of an image dataset as a float32 tensor [n, C, H, W] on `device`:
// pixels/255, minus the mean, over the std: data.norm_mean and data.norm_std per channel (one
// value: every channel), or when they are empty kPixelMean and kPixelStd. float32 pixels
// (data.float_pixels) are taken as they are. Token ids (data.token_ids): token_id_batch's.
torch::Tensor image_batch(const Dataset& data, const int64_t* indices, int64_t n,
                          const torch::Device& device);

// Samples `indices[0..n)` of token ids (data.token_ids) as int64 [n, 2, L] on `device`: per
// sample its ids then its attention mask, L the longest of the n (the padding beyond is cut).
torch::Tensor token_id_batch(const Dataset& data, const int64_t* indices, int64_t n,
                             const torch::Device& device);

}  // namespace recycle
