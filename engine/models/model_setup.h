// Model setup shared by recycle-build and recycle-train's raw-data modes: make or load the
// model, fit its classifier to the data's classes, split it.
#pragma once

#include <torch/torch.h>

#include "engine/models/block_model.h"
#include "engine/models/model_options.h"
#include "engine/data/dataset.h"

namespace recycle {

struct PreparedModel {
  BlockModel model;
  SplitModel split;
  // True when the classifier was initialised here (no weights, or weights trained on other
  // classes); false when it came from the weights file with the same class names.
  bool classifier_is_new = true;
};

// Loads options.weights (or makes a model seeded with options.seed), gives it a new classifier
// when the weights' classes differ from data.class_names, and splits it by `recycle` (a
// fraction in [0, 1]) or, when recycle < 0, by the block name `split_at`.
PreparedModel prepare_model(const ModelOptions& options, const Dataset& data, double recycle,
                            const std::string& split_at, const torch::Device& device);

// Sets LibTorch's and OpenMP's thread count; 0 keeps every core.
void set_thread_count(int threads);

}  // namespace recycle
