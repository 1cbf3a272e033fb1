// The LibTorch side of a build's state (engine/precompute/build_stages.h keeps LibTorch out):
// the prepared, split model behind BuildState::model, and compute_chunk's steps for image
// records, one by one, for a job that needs the prefix's outputs themselves (recycle-predict:
// a miss runs the prefix, the head reads its output, --write-back stores it encoded).
// Not thread safe: called by the thread that runs the state's stages.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

#include "engine/models/inference_prefix.h"
#include "engine/models/model_setup.h"
#include "engine/precompute/build_stages.h"

namespace recycle {

struct BuildModel {
  explicit BuildModel(const std::string& device_name) : device(device_name) {}
  torch::Device device;
  std::optional<PreparedModel> prepared;
  std::optional<InferencePrefix> fast;  // the prepared prefix, folded: what records come from
  // The head blob of a new cache, when it is not prepared's head (a build from another cache).
  std::string head_blob;
};

// An image split's samples chunk->compute_pos as the prefix's input: float32 [m, C, H, W] on the
// model's device (images from chunk->pixels when a ChunkReader read them, else from the
// dataset or a stream of the state's own; a build from another cache: its decoded records).
torch::Tensor chunk_inputs(BuildState& s, BuildChunk* chunk);
// The folded prefix on `inputs` (no grad): float32 [m, ...record shape], contiguous, on the
// CPU; its time added to s.report.prefix_seconds. Throws std::runtime_error when the output's
// shape is not the manifest's record shape.
torch::Tensor chunk_prefix_outputs(BuildState& s, const torch::Tensor& inputs);
// One record per row of `outputs` (chunk_prefix_outputs' form), encoded by s.codec, into
// chunk->records. Throws CodecRangeError naming the sample for a value the codec cannot hold.
void encode_chunk_outputs(BuildState& s, const torch::Tensor& outputs, BuildChunk* chunk);

}  // namespace recycle
