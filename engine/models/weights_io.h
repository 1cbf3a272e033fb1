// Weights files: a whole block model (its encoder spec, class names, every parameter and
// buffer) in a tensor file (engine/models/tensor_file.h: safetensors, which loads without
// running anything), and a module's parameters and buffers as bytes in the same format.
#pragma once

#include <torch/torch.h>

#include <string>

#include "engine/models/block_model.h"

namespace recycle {

// Saves spec, class names and every parameter and buffer to `path`.
void save_block_model(const BlockModel& model, const std::string& path);
// Loads a model saved by save_block_model. A model loaded from a file (torchscript:FILE) is made
// from `model_given` (the user's --model: spec_with_given_file in encoder_registry.h), never from
// the file the weights name. Throws std::runtime_error naming the file when it cannot be read,
// is an older version's (tensor_file.h: how to convert it) or does not fit its spec.
BlockModel load_block_model(const std::string& path, const std::string& model_given = "");
// The encoder spec a weights file was saved with, without making the model (same checks and
// errors as load_block_model's up to the spec).
std::string read_weights_spec(const std::string& path);

// A module's parameters and buffers as bytes (a tensor file) and back; `what` names the bytes in
// errors (module_from_bytes throws std::runtime_error, e.g. for an older version's archive).
std::string module_to_bytes(const torch::nn::Module& module);
void module_from_bytes(torch::nn::Module& module, const std::string& bytes,
                       const std::string& what);

}  // namespace recycle
