#include "engine/models/inference_prefix.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "engine/models/memory_format.h"
#include "engine/models/torch_compat.h"

namespace recycle {

namespace nn = torch::nn;

namespace {

using Children = std::map<std::string, std::shared_ptr<nn::Module>>;

Children children_of(const nn::Module& module) {
  Children out;
  for (const auto& item : module.named_children()) out[item.key()] = item.value();
  return out;
}

std::set<std::string> names_of(const Children& c) {
  std::set<std::string> out;
  for (const auto& [name, m] : c) out.insert(name);
  return out;
}

nn::Conv2d as_conv(const Children& c, const std::string& name) {
  auto impl = std::dynamic_pointer_cast<nn::Conv2dImpl>(c.at(name));
  return impl ? nn::Conv2d(impl) : nn::Conv2d(nullptr);
}

nn::BatchNorm2d as_bn(const Children& c, const std::string& name) {
  auto impl = std::dynamic_pointer_cast<nn::BatchNorm2dImpl>(c.at(name));
  // Only running statistics fold: without them eval mode uses the batch's.
  if (!impl || !impl->options.track_running_stats() || !impl->running_mean.defined()) {
    return nn::BatchNorm2d(nullptr);
  }
  return nn::BatchNorm2d(impl);
}

// conv then bn (eval mode) as one convolution with a bias, computed in float64:
//   s = gamma / sqrt(var + eps);  w' = w * s (per output channel);  b' = (b - mean) * s + beta.
nn::Conv2d fold(const nn::Conv2d& conv, const nn::BatchNorm2d& bn, torch::MemoryFormat format) {
  torch::NoGradGuard no_grad;
  const auto f64 = torch::kFloat64;
  const torch::Tensor mean = bn->running_mean.to(f64);
  const torch::Tensor var = bn->running_var.to(f64);
  const bool affine = bn->options.affine();
  const torch::Tensor gamma = affine ? bn->weight.to(f64) : torch::ones_like(mean);
  const torch::Tensor beta = affine ? bn->bias.to(f64) : torch::zeros_like(mean);
  const torch::Tensor scale = gamma / (var + bn->options.eps()).sqrt();
  const torch::Tensor b0 = conv->options.bias() ? conv->bias.to(f64) : torch::zeros_like(mean);

  const auto& o = conv->options;
  nn::Conv2d out(nn::Conv2dOptions(o.in_channels(), o.out_channels(), o.kernel_size())
                     .stride(o.stride())
                     .padding(o.padding())
                     .dilation(o.dilation())
                     .groups(o.groups())
                     .padding_mode(o.padding_mode())
                     .bias(true));
  out->to(conv->weight.device());
  out->weight.copy_((conv->weight.to(f64) * scale.view({-1, 1, 1, 1})).to(torch::kFloat32));
  out->bias.copy_(((b0 - mean) * scale + beta).to(torch::kFloat32));
  out->weight.set_data(in_memory_format(out->weight, format));
  out->eval();
  for (auto& p : out->parameters()) p.set_requires_grad(false);
  return out;
}

}  // namespace

// A convolution with its batch norm folded in. With oneDNN weights (kMkldnn) it takes and
// gives oneDNN tensors; otherwise strided ones, through the module.
struct FoldedConv {
  nn::Conv2d conv{nullptr};
  torch::Tensor mkldnn_weight, mkldnn_bias;  // reordered once for oneDNN (use_mkldnn)
  std::vector<int64_t> padding;

  explicit operator bool() const { return !conv.is_empty(); }
  // oneDNN's convolution takes explicit padding sizes only.
  const torch::ExpandingArray<2>* explicit_padding() const {
    return compat::get_if<torch::ExpandingArray<2>>(&conv->options.padding());
  }
  // Reorders the weights for oneDNN; needs explicit_padding().
  void use_mkldnn() {
    const auto& o = conv->options;
    const torch::ExpandingArray<2>& pad = *explicit_padding();
    padding.assign(pad->begin(), pad->end());
    mkldnn_weight = at::mkldnn_reorder_conv2d_weight(conv->weight.contiguous().to_mkldnn(), padding,
                                                     *o.stride(), *o.dilation(), o.groups());
    mkldnn_bias = conv->bias.to_mkldnn();
  }
  torch::Tensor operator()(const torch::Tensor& x) {
    if (!mkldnn_weight.defined()) return conv->forward(x);
    const auto& o = conv->options;
    return at::mkldnn_convolution(x, mkldnn_weight, mkldnn_bias, padding, *o.stride(),
                                  *o.dilation(), o.groups());
  }
};

// One block of the prefix. Folded: [relu(stem(x))], then relu(c2(relu(c1(x))) + shortcut),
// the shortcut being down(x) or x. Not folded: `plain`.
struct InferencePrefix::Step {
  bool folded = false;
  FoldedConv stem, c1, c2, down;
  nn::AnyModule plain;

  torch::Tensor run(torch::Tensor x) {
    if (!folded) return plain.forward(x);
    if (stem) x = stem(x).relu_();
    torch::Tensor y = c1(x).relu_();
    y = c2(y);
    y.add_(down ? down(x) : x);
    return y.relu_();
  }
  std::vector<FoldedConv*> convs() {
    std::vector<FoldedConv*> out;
    for (FoldedConv* c : {&stem, &c1, &c2, &down}) {
      if (*c) out.push_back(c);
    }
    return out;
  }
  // Folded, with convolutions oneDNN's convolution takes.
  bool mkldnn_ready() {
    if (!folded) return false;
    for (FoldedConv* c : convs()) {
      if (!c->explicit_padding()) return false;
    }
    return true;
  }
};

namespace {

// Fills the folded convolutions of a ResNet-18 basic block; false when `module` is not one
// (or a batch norm cannot fold).
bool fold_basic(const nn::Module& module, torch::MemoryFormat format, InferencePrefix::Step* s) {
  const Children c = children_of(module);
  const std::set<std::string> plain = {"conv1", "bn1", "conv2", "bn2"};
  const std::set<std::string> down = {"conv1", "bn1", "conv2", "bn2", "down_conv", "down_bn"};
  const std::set<std::string> names = names_of(c);
  if (names != plain && names != down) return false;
  const nn::Conv2d conv1 = as_conv(c, "conv1"), conv2 = as_conv(c, "conv2");
  const nn::BatchNorm2d bn1 = as_bn(c, "bn1"), bn2 = as_bn(c, "bn2");
  if (!conv1 || !conv2 || !bn1 || !bn2) return false;
  if (names == down) {
    const nn::Conv2d dc = as_conv(c, "down_conv");
    const nn::BatchNorm2d db = as_bn(c, "down_bn");
    if (!dc || !db) return false;
    s->down.conv = fold(dc, db, format);
  }
  s->c1.conv = fold(conv1, bn1, format);
  s->c2.conv = fold(conv2, bn2, format);
  return true;
}

// The stem block: stem_conv, stem_bn, ReLU, then a basic block.
bool fold_stem(const nn::Module& module, torch::MemoryFormat format, InferencePrefix::Step* s) {
  const Children c = children_of(module);
  if (names_of(c) != std::set<std::string>{"stem_conv", "stem_bn", "block"}) return false;
  const nn::Conv2d conv = as_conv(c, "stem_conv");
  const nn::BatchNorm2d bn = as_bn(c, "stem_bn");
  if (!conv || !bn || !fold_basic(*c.at("block"), format, s)) return false;
  s->stem.conv = fold(conv, bn, format);
  return true;
}

}  // namespace

InferencePrefix::InferencePrefix(const BlockModel& model, int64_t prefix_blocks,
                                 PrefixLayout layout)
    : layout_(layout) {
  if (prefix_blocks < 0 || prefix_blocks > model.num_blocks()) {
    throw std::invalid_argument("a prefix of " + std::to_string(prefix_blocks) +
                                " blocks in a model of " + std::to_string(model.num_blocks()));
  }
  // The folded modules are channels last for kMkldnn too: its fallback.
  const torch::MemoryFormat format = layout_ == PrefixLayout::kContiguous
                                         ? torch::MemoryFormat::Contiguous
                                         : torch::MemoryFormat::ChannelsLast;
  for (int64_t i = 0; i < prefix_blocks; ++i) {
    auto step = std::make_unique<Step>();
    const nn::Module& block = *model.blocks[i].ptr();
    step->folded = fold_stem(block, format, step.get()) || fold_basic(block, format, step.get());
    if (!step->folded) {
      *step = Step();
      step->plain = model.blocks[i];
    }
    steps_.push_back(std::move(step));
  }
  // oneDNN's layout is for the CPU and a prefix folded throughout; otherwise channels last.
  bool on_cpu = true;
  for (int64_t i = 0; i < prefix_blocks; ++i) {
    for (const torch::Tensor& p : model.blocks[i].ptr()->parameters()) {
      on_cpu = on_cpu && p.device().is_cpu();
    }
  }
  const bool ready =
      std::all_of(steps_.begin(), steps_.end(), [](const auto& s) { return s->mkldnn_ready(); });
  if (layout_ == PrefixLayout::kMkldnn && !(at::hasMKLDNN() && on_cpu && ready)) {
    layout_ = PrefixLayout::kChannelsLast;
  }
  if (layout_ == PrefixLayout::kMkldnn) {
    c10::InferenceMode inference;
    for (const auto& step : steps_) {
      for (FoldedConv* c : step->convs()) c->use_mkldnn();
    }
  }
}

InferencePrefix::~InferencePrefix() = default;
InferencePrefix::InferencePrefix(InferencePrefix&&) noexcept = default;
InferencePrefix& InferencePrefix::operator=(InferencePrefix&&) noexcept = default;

torch::Tensor InferencePrefix::forward(const torch::Tensor& x) const {
  c10::InferenceMode inference;
  if (layout_ == PrefixLayout::kMkldnn) {
    torch::Tensor h = x.to(torch::kFloat32).contiguous().to_mkldnn();
    for (const auto& step : steps_) h = step->run(h);
    return h.to_dense();  // NCHW, contiguous
  }
  torch::Tensor h = in_memory_format(x, layout_ == PrefixLayout::kContiguous
                                            ? torch::MemoryFormat::Contiguous
                                            : torch::MemoryFormat::ChannelsLast);
  for (const auto& step : steps_) h = step->run(h);
  return h.contiguous();
}

int64_t InferencePrefix::blocks() const { return static_cast<int64_t>(steps_.size()); }

int64_t InferencePrefix::folded_blocks() const {
  int64_t n = 0;
  for (const auto& step : steps_) n += step->folded ? 1 : 0;
  return n;
}

}  // namespace recycle
