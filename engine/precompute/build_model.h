// The LibTorch side of a SplitBuild (engine/precompute/build_stages.h keeps LibTorch out): the
// prepared, split model behind SplitBuild::model(). Include it (it brings <torch/torch.h>)
// to call SplitBuild's tensor steps (chunk_inputs, chunk_prefix_outputs, encode_chunk_outputs):
// recycle-predict runs the prefix on its misses, the head reads the outputs, --write-back
// stores them encoded. Not thread safe: used by the thread that runs the build's stages.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

#include "engine/models/device.h"
#include "engine/models/inference_prefix.h"
#include "engine/models/model_setup.h"
#include "engine/precompute/build_stages.h"

namespace recycle {

struct BuildModel {
  explicit BuildModel(const std::string& device_name) : device(usable_device(device_name)) {}
  torch::Device device;
  std::optional<PreparedModel> prepared;
  std::optional<InferencePrefix> fast;  // the prepared prefix, folded: what records come from
  // The head blob of a new cache, when it is not prepared's head (a build from another cache).
  std::string head_blob;
};

}  // namespace recycle
