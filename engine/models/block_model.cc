#include "engine/models/block_model.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "engine/models/zip_checksums.h"
#include "keyers/content_hasher.h"

namespace recycle {

namespace nn = torch::nn;

// ---- blocks ---------------------------------------------------------------------------------

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

ClassifierImpl::ClassifierImpl(int64_t in_features, int64_t classes)
    : fc_(register_module("fc", nn::Linear(in_features, classes))) {}

torch::Tensor ClassifierImpl::forward(torch::Tensor x) { return fc_->forward(x.mean({2, 3})); }

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

// ---- models ---------------------------------------------------------------------------------

BlockStack BlockModel::as_stack() const {
  BlockStack stack;
  for (size_t i = 0; i < blocks.size(); ++i) stack->append(block_names[i], blocks[i]);
  stack->append("fc", nn::AnyModule(classifier));
  return stack;
}

void BlockModel::reset_classifier(int64_t classes) {
  classifier = Classifier(8 * spec.width, classes);
}

void BlockModel::to(const torch::Device& device) {
  for (auto& b : blocks) b.ptr()->to(device);
  classifier->to(device);
}

BlockModel make_block_model(const ModelSpec& spec, int64_t classes) {
  if (spec.arch != "resnet18") throw std::invalid_argument("unknown model " + spec.arch);
  if (classes < 1) throw std::invalid_argument("a model needs at least one class");
  BlockModel model;
  model.spec = spec;
  const int64_t w = spec.width;
  auto add = [&](const std::string& name, nn::AnyModule block) {
    init_weights(*block.ptr());
    model.block_names.push_back(name);
    model.blocks.push_back(std::move(block));
  };
  add("layer1.0", nn::AnyModule(StemBlock(spec.in_channels, w)));
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

// ---- save and load --------------------------------------------------------------------------

void save_block_model(const BlockModel& model, const std::string& path) {
  torch::serialize::OutputArchive archive;
  model.as_stack()->save(archive);
  archive.write("recycle.spec", c10::IValue(model.spec.to_string()));
  c10::List<std::string> names;
  for (const auto& n : model.class_names) names.push_back(n);
  archive.write("recycle.class_names", c10::IValue(names));
  archive.write("recycle.classes", c10::IValue(model.classifier->classes()));
  try {
    archive.save_to(path);
  } catch (const c10::Error& e) {
    throw std::runtime_error("cannot write model weights to " + path + ": " +
                             e.what_without_backtrace());
  }
}

BlockModel load_block_model(const std::string& path, const ModelSpec* expected) {
  verify_zip_checksums(path);
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
  } catch (const c10::Error& e) {
    throw std::runtime_error("cannot read model weights " + path +
                             " (not a file saved by --save-model?)");
  }
  c10::IValue spec_value, names_value, classes_value;
  if (!archive.try_read("recycle.spec", spec_value) ||
      !archive.try_read("recycle.classes", classes_value)) {
    throw std::runtime_error(path + " is not a model saved by recycle-train --save-model");
  }
  const ModelSpec spec = ModelSpec::parse(spec_value.toStringRef());
  if (expected != nullptr && !(spec == *expected)) {
    throw std::runtime_error("weights " + path + " are for " + spec.to_string() +
                             ", not " + expected->to_string());
  }
  BlockModel model = make_block_model(spec, classes_value.toInt());
  if (archive.try_read("recycle.class_names", names_value)) {
    for (const c10::IValue& n : names_value.toListRef()) model.class_names.push_back(n.toStringRef());
  }
  try {
    model.as_stack()->load(archive);
  } catch (const c10::Error& e) {
    throw std::runtime_error("weights " + path + " do not fit " + spec.to_string() + ": " +
                             e.what_without_backtrace());
  }
  return model;
}

// ---- splitting ------------------------------------------------------------------------------

int64_t prefix_blocks_for_ratio(const BlockModel& model, double ratio) {
  if (!(ratio >= 0.0 && ratio <= 1.0)) {
    throw std::invalid_argument("recycle ratio must be between 0 and 1, got " +
                                std::to_string(ratio));
  }
  const double exact = ratio * static_cast<double>(model.num_blocks());
  const int64_t blocks = static_cast<int64_t>(std::llround(exact));
  if (std::abs(exact - static_cast<double>(blocks)) > 1e-6) {
    std::ostringstream msg;
    msg << "--recycle " << ratio << " falls between blocks: this model has "
        << model.num_blocks() << " blocks, so a ratio is a multiple of 1/" << model.num_blocks()
        << " (0.25, 0.5 and 0.75 end at stage boundaries); or name the last frozen block with "
           "--split-at";
    throw std::invalid_argument(msg.str());
  }
  return blocks;
}

int64_t prefix_blocks_for_name(const BlockModel& model, const std::string& name) {
  std::string known;
  for (int64_t i = 0; i < model.num_blocks(); ++i) {
    if (model.block_names[i] == name) return i + 1;
    known += (i ? ", " : "") + model.block_names[i];
  }
  throw std::invalid_argument("no block named '" + name + "' (blocks: " + known + ")");
}

SplitModel split_block_model(const BlockModel& model, int64_t prefix_blocks) {
  if (prefix_blocks < 0 || prefix_blocks > model.num_blocks()) {
    throw std::invalid_argument("split point out of range");
  }
  SplitModel split;
  split.prefix_blocks = prefix_blocks;
  split.total_blocks = model.num_blocks();
  split.split_at = prefix_blocks == 0 ? "input" : model.block_names[prefix_blocks - 1];
  for (int64_t i = 0; i < model.num_blocks(); ++i) {
    (i < prefix_blocks ? split.prefix : split.head)->append(model.block_names[i], model.blocks[i]);
  }
  split.head->append("fc", nn::AnyModule(model.classifier));
  split.prefix->eval();
  for (auto& p : split.prefix->parameters()) p.set_requires_grad(false);
  split.head->train();
  return split;
}

// ---- identity and bytes ---------------------------------------------------------------------

namespace {

void hash_tensor(ContentHasher& hasher, const std::string& name, const torch::Tensor& t) {
  const torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
  TensorView view;
  const std::string dtype(c10::toString(c.scalar_type()));
  view.dtype = dtype;
  view.shape = c.sizes().vec();
  view.strides = c.strides().vec();
  view.data = c.data_ptr();
  view.element_size = c.element_size();
  hasher.update_field(name);
  hasher.update_tensor(view);
}

}  // namespace

std::string module_fingerprint(const nn::Module& module) {
  ContentHasher hasher;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) hash_tensor(hasher, p.key(), p.value());
  for (const auto& b : module.named_buffers(/*recurse=*/true)) hash_tensor(hasher, b.key(), b.value());
  return hasher.digest().to_hex();
}

std::string module_to_bytes(const nn::Module& module) {
  torch::serialize::OutputArchive archive;
  module.save(archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void module_from_bytes(nn::Module& module, const std::string& bytes) {
  std::istringstream in(bytes);
  torch::serialize::InputArchive archive;
  archive.load_from(in);
  module.load(archive);
}

}  // namespace recycle
