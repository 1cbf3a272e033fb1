// Weights files: a whole block model (its encoder spec, class names, every parameter and
// buffer) in a torch::serialize archive, and a module's parameters and buffers as bytes.
#pragma once

#include <torch/torch.h>

#include <string>

#include "engine/models/block_model.h"

namespace recycle {

// Saves spec, class names and every parameter and buffer to `path`.
void save_block_model(const BlockModel& model, const std::string& path);
// Loads a model saved by save_block_model, after checking the zip's CRC-32s. Throws
// std::runtime_error naming the file when it cannot be read or does not fit its spec.
BlockModel load_block_model(const std::string& path);
// The encoder spec a weights file was saved with, without making the model (same checks and
// errors as load_block_model's up to the spec).
std::string read_weights_spec(const std::string& path);

// A module's parameters and buffers as bytes (torch::serialize archive) and back.
std::string module_to_bytes(const torch::nn::Module& module);
void module_from_bytes(torch::nn::Module& module, const std::string& bytes);

}  // namespace recycle
