#include "engine/models/preprocess.h"

#include <cstring>
#include <stdexcept>

namespace recycle {

std::string preprocess_spec() {
  return "pixels/255,mean=0.2860,std=0.3530";
}

torch::Tensor image_batch(const Dataset& data, const int64_t* indices, int64_t n,
                          const torch::Device& device) {
  if (data.is_text) throw std::invalid_argument("image_batch: the dataset holds text");
  std::vector<int64_t> shape = {n};
  shape.insert(shape.end(), data.item_shape.begin(), data.item_shape.end());
  torch::Tensor raw = torch::empty(shape, torch::kUInt8);
  const int64_t item = data.item_bytes();
  uint8_t* dst = raw.data_ptr<uint8_t>();
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * item, data.item_pixels(indices[i]), item);
  torch::Tensor x = raw.to(torch::kFloat32).div_(255.0f).sub_(kPixelMean).div_(kPixelStd);
  return x.to(device);
}

}  // namespace recycle
