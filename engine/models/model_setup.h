// Model setup shared by recycle-build and recycle-train's raw-data modes: make or load the
// model, fit its classifier to the data's classes, split it.
#pragma once

#include <torch/torch.h>

#include "engine/models/block_model.h"
#include "engine/models/split_model.h"
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

// Loads options.weights (or makes the encoder options.encoder names, seeded with options.seed,
// its input channels taken from the data), gives it a new classifier when the weights' classes
// differ from data.class_names, and splits it by `recycle` (a fraction in [0, 1]) or, when
// recycle < 0, by the block name `split_at`. Throws std::invalid_argument for an encoder that
// does not read this kind of data or a bad spec, std::runtime_error for weights that do not fit.
PreparedModel prepare_model(const ModelOptions& options, const Dataset& data, double recycle,
                            const std::string& split_at, const torch::Device& device);

// `data` with encoder_input set (for an image folder; other data is returned as it is) from
// the encoder `options` name: the weights file's spec (in_channels, and in_height and in_width
// for encoders that have them) or, without weights, the options an --model spec gives; nothing
// the data decides is set. The jobs call it before load_dataset, so that the default
// --transform makes the encoder's input. Throws std::runtime_error for unreadable weights and
// std::invalid_argument for a bad spec.
DatasetOptions with_encoder_input(DatasetOptions data, const ModelOptions& options);

// Sets LibTorch's and OpenMP's thread count; 0 keeps every core.
void set_thread_count(int threads);

}  // namespace recycle
