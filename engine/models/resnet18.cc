#include "engine/models/resnet18.h"

#include <torch/torch.h>

#include <string>

#include "engine/models/block_model.h"

namespace recycle {

namespace nn = torch::nn;

namespace {

nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

// The residual block of ResNet-18: two 3x3 convolutions with batch norm, and a 1x1
// projection on the shortcut when the shape changes.
class BasicBlockImpl : public nn::Module {
 public:
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride)
      : conv1_(register_module("conv1", conv3x3(in, out, stride))),
        bn1_(register_module("bn1", nn::BatchNorm2d(out))),
        conv2_(register_module("conv2", conv3x3(out, out, 1))),
        bn2_(register_module("bn2", nn::BatchNorm2d(out))) {
    if (stride != 1 || in != out) {
      down_conv_ = register_module(
          "down_conv", nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)));
      down_bn_ = register_module("down_bn", nn::BatchNorm2d(out));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor y = torch::relu(bn1_->forward(conv1_->forward(x)));
    y = bn2_->forward(conv2_->forward(y));
    torch::Tensor shortcut = down_conv_ ? down_bn_->forward(down_conv_->forward(x)) : x;
    return torch::relu(y + shortcut);
  }

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  nn::Conv2d down_conv_{nullptr};
  nn::BatchNorm2d down_bn_{nullptr};
};
TORCH_MODULE(BasicBlock);

// The stem (3x3 conv, stride 1, batch norm, ReLU; no max pool for 28x28 inputs) followed by
// the first residual block.
class StemBlockImpl : public nn::Module {
 public:
  StemBlockImpl(int64_t in_channels, int64_t width)
      : conv_(register_module("stem_conv", conv3x3(in_channels, width, 1))),
        bn_(register_module("stem_bn", nn::BatchNorm2d(width))),
        block_(register_module("block", BasicBlock(width, width, 1))) {}
  torch::Tensor forward(torch::Tensor x) {
    return block_->forward(torch::relu(bn_->forward(conv_->forward(x))));
  }

 private:
  nn::Conv2d conv_;
  nn::BatchNorm2d bn_;
  BasicBlock block_;
};
TORCH_MODULE(StemBlock);

void init_weights(nn::Module& module) {
  for (auto& m : module.modules(/*include_self=*/true)) {
    if (auto* conv = m->as<nn::Conv2d>()) {
      nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
    } else if (auto* bn = m->as<nn::BatchNorm2d>()) {
      nn::init::ones_(bn->weight);
      nn::init::zeros_(bn->bias);
    }
  }
}

}  // namespace

EncoderInfo resnet18_info() {
  EncoderInfo info;
  info.name = "resnet18";
  info.input = EncoderInput::kImage;
  info.options = {{"width", 16, 1, 4096, "channels of the first stage (then 2x, 4x, 8x)"},
                  {"in_channels", 1, 1, 4096, "input channels (set from the data)"}};
  info.help = "ResNet-18 for small images: 8 residual blocks, no max pool";
  return info;
}

BlockModel make_resnet18(const EncoderSpec& spec, int64_t classes) {
  BlockModel model;
  const int64_t w = spec.get("width");
  auto add = [&](const std::string& name, nn::AnyModule block) {
    init_weights(*block.ptr());
    model.block_names.push_back(name);
    model.blocks.push_back(std::move(block));
  };
  add("layer1.0", nn::AnyModule(StemBlock(spec.get("in_channels"), w)));
  add("layer1.1", nn::AnyModule(BasicBlock(w, w, 1)));
  int64_t in = w;
  for (int stage = 2; stage <= 4; ++stage) {
    const int64_t out = w << (stage - 1);
    add("layer" + std::to_string(stage) + ".0", nn::AnyModule(BasicBlock(in, out, 2)));
    add("layer" + std::to_string(stage) + ".1", nn::AnyModule(BasicBlock(out, out, 1)));
    in = out;
  }
  model.classifier = Classifier(in, classes);
  return model;
}

}  // namespace recycle
