#include "engine/models/block_model.h"

#include <stdexcept>

namespace recycle {

namespace nn = torch::nn;

void BlockStackImpl::append(const std::string& name, nn::AnyModule block) {
  // Module names may not contain '.', so register "layer1.0" as "layer1_0".
  std::string reg = name;
  for (char& c : reg) {
    if (c == '.') c = '_';
  }
  register_module(reg, block.ptr());
  names_.push_back(name);
  blocks_.push_back(std::move(block));
}

torch::Tensor BlockStackImpl::forward(torch::Tensor x) {
  for (auto& block : blocks_) x = block.forward(x);
  return x;
}

torch::Tensor BlockStackImpl::forward_all(const std::vector<torch::Tensor>& inputs) {
  if (inputs.size() != 1) {
    throw std::invalid_argument("a stack of blocks takes one input tensor, not " +
                                std::to_string(inputs.size()));
  }
  return forward(inputs[0]);
}

ClassifierImpl::ClassifierImpl(int64_t in_features, int64_t classes, Pooling pooling)
    : in_features_(in_features),
      classes_(classes),
      pooling_(pooling),
      fc_(register_module("fc", nn::Linear(in_features, classes))) {}

ClassifierImpl::ClassifierImpl(nn::AnyModule own, int64_t in_features, int64_t classes,
                               Pooling pooling)
    : in_features_(in_features), classes_(classes), pooling_(pooling), own_(std::move(own)) {
  register_module("own", own_.ptr());
}

torch::Tensor ClassifierImpl::forward(torch::Tensor x) {
  if (is_own()) return own_.forward(x);
  switch (pooling_) {
    case Pooling::kSpatialMean:
      return fc_->forward(x.mean({2, 3}));
    case Pooling::kFlatten:
      return fc_->forward(x.flatten(1));
    case Pooling::kMaskedMean:
      break;
  }
  const int64_t c = x.size(-1) - 1;
  const torch::Tensor mask = x.narrow(-1, c, 1);  // [N, L, 1], 1 at valid positions
  const torch::Tensor sum = (x.narrow(-1, 0, c) * mask).sum(1);
  return fc_->forward(sum / mask.sum(1).clamp_min(1.0));
}

void ClassifierImpl::reset_parameters() {
  if (is_own()) throw std::logic_error("a model's own classifier cannot be drawn again");
  fc_->reset_parameters();
}

BlockStack BlockModel::as_stack() const {
  BlockStack stack;
  for (size_t i = 0; i < blocks.size(); ++i) stack->append(block_names[i], blocks[i]);
  stack->append("fc", nn::AnyModule(classifier));
  return stack;
}

void BlockModel::reset_classifier(int64_t classes) {
  classifier = Classifier(classifier->in_features(), classes, classifier->pooling());
}

void BlockModel::to(const torch::Device& device) {
  for (auto& b : blocks) b.ptr()->to(device);
  classifier->to(device);
}

}  // namespace recycle
