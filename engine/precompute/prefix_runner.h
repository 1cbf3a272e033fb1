// PrefixRunner: the frozen prefix on its device, the LibTorch side of a SplitBuild
// (engine/precompute/build_stages.h keeps LibTorch out). Batches go in on the device, outputs
// come out float32 and contiguous on the CPU, where the records are encoded: recycle-build's
// chunks, and recycle-predict's misses (which then go through the head). Include it (it brings
// <torch/torch.h>) to call SplitBuild's tensor steps (chunk_inputs, chunk_prefix_outputs,
// encode_chunk_outputs).
//
// What runs: for images the folded prefix (engine/models/inference_prefix.h: batch norms
// folded, within kInferencePrefixTolerance of the plain prefix, whose weights make the cache's
// identity); for text the plain prefix in eval mode under InferenceMode (nothing of a
// transformer folds); for a build from another cache, the blocks after its split point, folded.
// On a GPU the outputs come back into page-locked host memory (one block per batch from
// LibTorch's caching host allocator), and the copy waits for the forward: run's time is the
// device's, not only the launch's.
//
// Not thread safe: used by the thread that runs the build's stages.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

#include "engine/models/device.h"
#include "engine/models/inference_prefix.h"
#include "engine/models/model_setup.h"
#include "engine/precompute/build_stages.h"

namespace recycle {

class PrefixRunner {
 public:
  // The device by name ("cpu", "cuda", "cuda:N"; engine/models/device.h refuses one this
  // process cannot use, in one line).
  explicit PrefixRunner(const std::string& device_name) : device_(usable_device(device_name)) {}

  const torch::Device& device() const { return device_; }

  // A prepared, split model (prepared on device()): its prefix runs, folded when `fold`
  // (images), else as it is (text).
  void use_model(PreparedModel model, bool fold);
  // Another cache's blocks after its split point (a derived level), folded; `head_blob`: the
  // head's initial weights a new cache gets.
  void use_blocks(const BlockModel& blocks, std::string head_blob);

  bool has_model() const { return prepared_.has_value(); }
  // The prepared model of use_model; throws std::logic_error for blocks of another cache.
  PreparedModel& model();
  // The initial weights of the head a new cache stores (the model's head, or use_blocks' blob).
  std::string head_bytes() const;

  // The prefix (no grad) on `inputs` (on device()): float32, contiguous, on the CPU.
  torch::Tensor run(const torch::Tensor& inputs);
  double last_seconds() const { return last_seconds_; }  // run's last call, the copy included

  // Seconds a sample takes in the model's head (eval, inference mode), timed on up to 64 rows of
  // `outputs` (run's form); negative when there is no model or the head does not take them.
  // The head's training mode is left as it was.
  double head_seconds_per_sample(const torch::Tensor& outputs);

 private:
  torch::Device device_;
  std::optional<PreparedModel> prepared_;
  std::optional<InferencePrefix> fast_;  // the folded prefix (images, another cache's blocks)
  std::string head_blob_;
  double last_seconds_ = 0;
};

}  // namespace recycle
