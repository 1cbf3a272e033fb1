// Block models: an ordered list of named encoder blocks plus a classifier. Encoders are made by
// the registry (encoder_registry.h), cut in two by split_model.h, saved and loaded by
// weights_io.h. Image tensors are float32, NCHW; text tensors are described in
// engine/models/transformer.h. All are on the device the modules were moved to (CPU by default).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>


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

// How a classifier pools its input before its linear layer.
enum class Pooling {
  kSpatialMean,  // images: mean over H and W of [N, C, H, W]
  kMaskedMean,   // text: mean over the valid positions of packed text features [N, L, C + 1]
                 // (the last channel is the mask; see engine/models/transformer.h)
};

// Pooling, then a linear layer: [N, C, H, W] or [N, L, C + 1] -> [N, classes].
class ClassifierImpl : public torch::nn::Module {
 public:
  ClassifierImpl(int64_t in_features, int64_t classes, Pooling pooling = Pooling::kSpatialMean);
  torch::Tensor forward(torch::Tensor x);
  void reset_parameters() { fc_->reset_parameters(); }
  int64_t in_features() const { return fc_->options.in_features(); }
  int64_t classes() const { return fc_->options.out_features(); }
  Pooling pooling() const { return pooling_; }

 private:
  torch::nn::Linear fc_{nullptr};
  Pooling pooling_;
};
TORCH_MODULE(Classifier);

// A whole model: encoder blocks and a classifier, plus what it was trained to tell apart.
struct BlockModel {
  std::string spec;  // canonical encoder spec, e.g. "resnet18:width=16,in_channels=1"
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

}  // namespace recycle
