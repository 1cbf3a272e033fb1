// Block models: an ordered list of named encoder blocks plus a classifier, and how to split
// one into a frozen prefix and a trainable head.
//
// The native ResNet-18 ("resnet18") has 8 residual blocks named layer1.0 ... layer4.1; the stem
// (3x3 conv, batch norm, ReLU) travels with layer1.0, so 25/50/75% recycling ends at a stage
// boundary (2/4/6 blocks). The classifier is global average pooling then a linear layer ("fc").
// All tensors are float32, NCHW, on the device the modules were moved to (CPU by default).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "engine/models/model_spec.h"

namespace recycle {

// An ordered list of named blocks run one after another. Blocks are shared with the model
// they came from (no copies): training a head trains the model's modules.
class BlockStackImpl : public torch::nn::Module {
 public:
  void append(const std::string& name, torch::nn::AnyModule block);
  torch::Tensor forward(torch::Tensor x);
  size_t size() const { return blocks_.size(); }
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<std::string> names_;
  std::vector<torch::nn::AnyModule> blocks_;
};
TORCH_MODULE(BlockStack);

// Global average pooling over H and W, then a linear layer: [N, C, H, W] -> [N, classes].
class ClassifierImpl : public torch::nn::Module {
 public:
  ClassifierImpl(int64_t in_features, int64_t classes);
  torch::Tensor forward(torch::Tensor x);
  void reset_parameters() { fc_->reset_parameters(); }
  int64_t classes() const { return fc_->options.out_features(); }

 private:
  torch::nn::Linear fc_{nullptr};
};
TORCH_MODULE(Classifier);

// A whole model: encoder blocks and a classifier, plus what it was trained to tell apart.
struct BlockModel {
  ModelSpec spec;
  std::vector<std::string> block_names;
  std::vector<torch::nn::AnyModule> blocks;
  Classifier classifier{nullptr};
  std::vector<std::string> class_names;  // class_names[i] is output i; may be empty

  int64_t num_blocks() const { return static_cast<int64_t>(blocks.size()); }
  // Every block then the classifier, as one stack (modules shared).
  BlockStack as_stack() const;
  // Replaces the classifier by a freshly initialised one with `classes` outputs.
  void reset_classifier(int64_t classes);
  void to(const torch::Device& device);
};

// Builds a randomly initialised model (initialisation drawn from torch's global generator).
BlockModel make_block_model(const ModelSpec& spec, int64_t classes);

// Saves spec, class names and every parameter and buffer to `path` (torch::serialize archive).
void save_block_model(const BlockModel& model, const std::string& path);
// Loads a model saved by save_block_model. Throws std::runtime_error naming the file when it
// cannot be read or does not fit `expected` (architecture, width, input channels).
BlockModel load_block_model(const std::string& path, const ModelSpec* expected = nullptr);

// A model cut in two. The prefix is frozen: eval mode, requires_grad off. The head (remaining
// blocks and the classifier) is in train mode.
struct SplitModel {
  BlockStack prefix;
  BlockStack head;
  int64_t prefix_blocks = 0;
  int64_t total_blocks = 0;
  std::string split_at;  // name of the prefix's last block, "input" when the prefix is empty
};

// round(ratio * blocks); throws std::invalid_argument unless 0 <= ratio <= 1.
int64_t prefix_blocks_for_ratio(const BlockModel& model, double ratio);
// The number of blocks up to and including the block named `name`; throws listing the names.
int64_t prefix_blocks_for_name(const BlockModel& model, const std::string& name);
SplitModel split_block_model(const BlockModel& model, int64_t prefix_blocks);

// XXH3-128 hex over the names, dtypes, shapes and values of every parameter and buffer of
// `module` (in registration order): the identity of a frozen prefix's weights.
std::string module_fingerprint(const torch::nn::Module& module);

// A module's parameters and buffers as bytes (torch::serialize archive) and back.
std::string module_to_bytes(const torch::nn::Module& module);
void module_from_bytes(torch::nn::Module& module, const std::string& bytes);

}  // namespace recycle
