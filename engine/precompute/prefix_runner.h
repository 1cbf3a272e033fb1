// PrefixRunner: the frozen prefix on its device, what a ChunkEncoder (chunk_encoder.h) runs its
// chunks through. Batches go in on the device, outputs come out float32 and contiguous on the
// CPU, where the records are encoded: recycle-build's chunks, and recycle-predict's misses
// (which then go through the head).
//
// What runs: for images the folded prefix (engine/models/inference_prefix.h: batch norms
// folded, within kInferencePrefixTolerance of the plain prefix, whose weights make the cache's
// identity); for text the plain prefix in eval mode under InferenceMode (nothing of a
// transformer folds); for a build from another cache, the blocks after its split point, folded.
// The forward runs in the runner's precision (fp32, or bf16 / fp16 under autocast;
// engine/models/precision.h; the folded prefix then runs channels last, not in oneDNN's own
// layout, whose convolution autocast does not cast); its outputs are widened to float32.
//
// On a GPU, start queues the forward and the copy of its outputs back into page-locked host
// memory (one block per batch from LibTorch's caching host allocator) on a side stream that
// waits for it, and returns: the caller encodes the outputs of the run before while the device
// computes this one and the copy engine brings the one before back. finish waits for the
// oldest run's copy. On the CPU, start does the whole run.
//
// Not thread safe: used by the thread that runs the build's stages.
#pragma once

#include <torch/torch.h>

#include <list>
#include <optional>
#include <string>

#include "engine/models/device.h"
#include "engine/models/inference_prefix.h"
#include "engine/models/model_setup.h"
#include "engine/models/precision.h"

namespace recycle {

class PrefixRunner {
 public:
  // The device by name ("cpu", "cuda", "cuda:N"; engine/models/device.h refuses one this
  // process cannot use, in one line).
  explicit PrefixRunner(const std::string& device_name, Precision precision = Precision::kFp32);
  ~PrefixRunner();

  const torch::Device& device() const { return device_; }
  Precision precision() const { return precision_; }

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

  // Starts the prefix (no grad) on `inputs` (on device()); finish() gives its outputs. Runs
  // are finished in the order they were started; any number may be in flight.
  void start(const torch::Tensor& inputs);
  // The oldest started run's outputs: float32, contiguous, on the CPU (waiting for them on a
  // GPU). std::logic_error when none was started.
  torch::Tensor finish();
  size_t in_flight() const;
  // start then finish, with no other run in flight (std::logic_error otherwise).
  torch::Tensor run(const torch::Tensor& inputs);
  // The last finished run's seconds: the device's time from its forward's start to its copy's
  // end (CUDA events; LibTorch 1.13: the host's time from start to finish), the CPU's time of
  // the whole run.
  double last_seconds() const { return last_seconds_; }

  // Seconds a sample takes in the model's head (eval, inference mode), timed on up to 64 rows of
  // `outputs` (run's form); negative when there is no model or the head does not take them.
  // The head's training mode is left as it was.
  double head_seconds_per_sample(const torch::Tensor& outputs);

 private:
  // The folded prefix's layout: oneDNN's own in fp32, channels last under autocast.
  PrefixLayout folded_layout() const;

  torch::Device device_;
  std::optional<PreparedModel> prepared_;
  std::optional<InferencePrefix> fast_;  // the folded prefix (images, another cache's blocks)
  std::string head_blob_;
  double last_seconds_ = 0;
  const Precision precision_;
  struct Pending;
  std::list<Pending> pending_;  // started, oldest first
  std::optional<c10::Stream> copy_stream_;  // a GPU's side stream for the copies back
};

}  // namespace recycle
