#include "engine/models/preprocess.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace recycle {

std::string preprocess_spec() {
  return "pixels/255,mean=0.2860,std=0.3530";
}

std::string preprocess_spec(const Dataset& data) {
  if (data.token_ids) return kTokenIdsPreprocess;
  if (data.float_pixels) return "float32 as stored";
  if (data.transform.empty()) return preprocess_spec();
  return "files:" + data.transform + (data.norm_mean.empty() ? ";" + preprocess_spec() : "");
}

torch::Tensor image_batch(const Dataset& data, const int64_t* indices, int64_t n,
                          const torch::Device& device) {
  if (data.is_text) throw std::invalid_argument("image_batch: the dataset holds text");
  if (data.token_ids) return token_id_batch(data, indices, n, device);
  std::vector<int64_t> shape = {n};
  shape.insert(shape.end(), data.item_shape.begin(), data.item_shape.end());
  // For a GPU the pixels go up as they are stored (uint8: a quarter of float32's bytes), from
  // page-locked memory, and are normalised there; the arithmetic is the CPU's, op for op.
  const bool gpu = device.is_cuda();
  torch::Tensor raw = torch::empty(
      shape, torch::dtype(data.float_pixels ? torch::kFloat32 : torch::kUInt8).pinned_memory(gpu));
  const int64_t item = data.item_bytes();
  auto* dst = static_cast<uint8_t*>(raw.data_ptr());
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * item, data.item_pixels(indices[i]), item);
  if (gpu) raw = raw.to(device, /*non_blocking=*/true);
  if (data.float_pixels) return raw.to(device);  // inputs made elsewhere: as they are
  if (data.norm_mean.empty()) {
    torch::Tensor x = raw.to(torch::kFloat32).div_(255.0f).sub_(kPixelMean).div_(kPixelStd);
    return x.to(device);
  }
  const int64_t channels = data.item_shape.at(0);
  auto per_channel = [&](const std::vector<float>& v) {
    torch::Tensor t = torch::tensor(v, torch::kFloat32);
    if (v.size() == 1) t = t.expand({channels});
    if (t.size(0) != channels) {
      throw std::invalid_argument("image_batch: " + std::to_string(v.size()) +
                                  " normalisation values for " + std::to_string(channels) +
                                  " channels");
    }
    return t.reshape({1, channels, 1, 1}).to(raw.device());
  };
  torch::Tensor x = raw.to(torch::kFloat32)
                        .div_(255.0f)
                        .sub_(per_channel(data.norm_mean))
                        .div_(per_channel(data.norm_std));
  return x.to(device);
}

torch::Tensor token_id_batch(const Dataset& data, const int64_t* indices, int64_t n,
                             const torch::Device& device) {
  if (!data.token_ids) {
    throw std::invalid_argument("token_id_batch: the dataset holds no token ids");
  }
  const int64_t length = data.item_shape.at(1);
  int64_t longest = 1;
  for (int64_t i = 0; i < n; ++i) {
    const auto* mask = reinterpret_cast<const int64_t*>(data.item_pixels(indices[i])) + length;
    int64_t valid = 0;
    while (valid < length && mask[valid] != 0) ++valid;  // 1s then 0s (source_npy.cc)
    longest = std::max(longest, valid);
  }
  torch::Tensor batch = torch::empty({n, 2, longest}, torch::kInt64);
  int64_t* dst = batch.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const auto* src = reinterpret_cast<const int64_t*>(data.item_pixels(indices[i]));
    std::memcpy(dst + (2 * i) * longest, src, longest * 8);
    std::memcpy(dst + (2 * i + 1) * longest, src + length, longest * 8);
  }
  return batch.to(device);
}

}  // namespace recycle
