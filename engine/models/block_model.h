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
  // The stack on a batch of several inputs (a record's tensors, in its layout's order). Blocks
  // take one tensor: forward(inputs[0]) when there is one, std::invalid_argument naming the
  // count when there are more. A TorchScript head (load_script_head) takes them all as its
  // forward's arguments.
  virtual torch::Tensor forward_all(const std::vector<torch::Tensor>& inputs);
  size_t size() const { return blocks_.size(); }
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<std::string> names_;
  std::vector<torch::nn::AnyModule> blocks_;
};
TORCH_MODULE(BlockStack);

// How a classifier turns its input into the features of its linear layer.
enum class Pooling {
  kSpatialMean,  // images: mean over H and W of [N, C, H, W] -> [N, C]
  kFlatten,      // every dimension after the first: [N, ...] -> [N, numel / N]
  kMaskedMean,   // text: mean over the valid positions of packed text features [N, L, C + 1]
                 // (the last channel is the mask; see engine/models/transformer.h)
};

// Pooling then a linear layer: [N, ...] -> [N, classes]; or a model's own classifier module
// (a scripted model's last child), run as it is.
class ClassifierImpl : public torch::nn::Module {
 public:
  ClassifierImpl(int64_t in_features, int64_t classes, Pooling pooling = Pooling::kSpatialMean);
  // `own` maps the blocks' output to [N, classes]; a replacement (BlockModel::reset_classifier)
  // is `pooling` then a new linear layer of in_features inputs.
  ClassifierImpl(torch::nn::AnyModule own, int64_t in_features, int64_t classes, Pooling pooling);
  torch::Tensor forward(torch::Tensor x);
  // Draws the linear layer's weights again; throws std::logic_error for a model's own module.
  void reset_parameters();
  int64_t in_features() const { return in_features_; }
  int64_t classes() const { return classes_; }
  Pooling pooling() const { return pooling_; }
  // True when this runs the model's own module (kept from a scripted file).
  bool is_own() const { return !own_.is_empty(); }

 private:
  int64_t in_features_;
  int64_t classes_;
  Pooling pooling_;
  torch::nn::Linear fc_{nullptr};
  torch::nn::AnyModule own_;
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
  // Replaces the classifier by a freshly initialised linear one with `classes` outputs (same
  // inputs and pooling).
  void reset_classifier(int64_t classes);
  void to(const torch::Device& device);
};

}  // namespace recycle
