#include "engine/models/torchscript_model.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/data/regular_file.h"
#include "engine/models/block_model.h"
#include "engine/util/atomic_file.h"
#include "recycle/content_hasher.h"

namespace recycle {

namespace nn = torch::nn;
using JitModule = torch::jit::Module;

namespace {

// A scripted module's parameters and buffers registered as a torch::nn::Module's, under the same
// names and as the same tensors; its submodules mirrored the same way. Nothing is copied, so an
// optimizer over these parameters trains the scripted module.
class ScriptViewImpl : public nn::Module {
 public:
  explicit ScriptViewImpl(JitModule module) : module_(std::move(module)) {
    for (const auto& p : module_.named_parameters(/*recurse=*/false)) {
      register_parameter(p.name, p.value, /*requires_grad=*/true);
    }
    for (const auto& b : module_.named_buffers(/*recurse=*/false)) register_buffer(b.name, b.value);
    for (const auto& c : module_.named_children()) {
      register_module(c.name, std::make_shared<ScriptViewImpl>(c.value));
    }
  }
  // Sets this view's mode and the scripted module's (its submodules follow through the views).
  void train(bool on) override {
    nn::Module::train(on);
    module_.train(on);
  }
  torch::Tensor forward(torch::Tensor x) { return module_.forward({std::move(x)}).toTensor(); }
  torch::Tensor forward_all(const std::vector<torch::Tensor>& inputs) {
    return module_.forward(std::vector<c10::IValue>(inputs.begin(), inputs.end())).toTensor();
  }
  const JitModule& module() const { return module_; }

 private:
  JitModule module_;
};
TORCH_MODULE(ScriptView);

// A head of one TorchScript module: a batch's inputs are its forward's arguments, in order.
class ScriptHeadImpl : public BlockStackImpl {
 public:
  explicit ScriptHeadImpl(const JitModule& module) : view_(ScriptView(module)) {
    append("script", nn::AnyModule(view_));
  }
  torch::Tensor forward_all(const std::vector<torch::Tensor>& inputs) override {
    return view_->forward_all(inputs);
  }

 private:
  ScriptView view_;
};

// Consecutive children of the scripted Sequential, run in order.
class ScriptBlockImpl : public nn::Module {
 public:
  explicit ScriptBlockImpl(const std::vector<torch::jit::NameModule>& children) {
    for (const auto& c : children) parts_.push_back(register_module(c.name, ScriptView(c.value)));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& part : parts_) x = part->forward(std::move(x));
    return x;
  }

 private:
  std::vector<ScriptView> parts_;
};
TORCH_MODULE(ScriptBlock);

bool has_parameters(const JitModule& m) { return m.named_parameters(/*recurse=*/true).size() > 0; }
bool has_children(const JitModule& m) { return m.named_children().size() > 0; }

struct Group {
  std::string name;  // the child with parameters that started it
  std::vector<torch::jit::NameModule> children;
};

// The blocks of children[0, end): see torchscript_model.h.
std::vector<Group> group_blocks(const std::vector<torch::jit::NameModule>& children, size_t end) {
  std::vector<Group> groups;
  std::vector<torch::jit::NameModule> leading;  // parameterless children before the first block
  for (size_t i = 0; i < end; ++i) {
    if (has_parameters(children[i].value)) {
      groups.push_back({children[i].name, std::move(leading)});
      leading.clear();
      groups.back().children.push_back(children[i]);
    } else if (groups.empty()) {
      leading.push_back(children[i]);
    } else {
      groups.back().children.push_back(children[i]);
    }
  }
  // The stem: the blocks before the first one started by a composite child join it.
  auto composite = [](const Group& g) {
    for (const auto& c : g.children) {
      if (c.name == g.name) return has_children(c.value);
    }
    return false;
  };
  const auto first = std::find_if(groups.begin(), groups.end(), composite);
  if (first != groups.end() && first != groups.begin()) {
    Group stem{first->name, {}};
    for (auto g = groups.begin(); g != first + 1; ++g) {
      for (auto& c : g->children) stem.children.push_back(std::move(c));
    }
    groups.erase(groups.begin(), first + 1);
    groups.insert(groups.begin(), std::move(stem));
  }
  return groups;
}

// The line of a TorchScript error that says what went wrong: its last "SomethingError: why"
// line (after the interpreter's traceback), as "why"; else its first non-empty line.
std::string error_summary(const std::string& what) {
  std::string first, found;
  size_t start = 0;
  while (start < what.size()) {
    size_t end = what.find('\n', start);
    if (end == std::string::npos) end = what.size();
    const std::string line = what.substr(start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (first.empty()) first = line;
    const size_t error = line.find("Error: ");  // "RuntimeError: why": letters, then ": "
    if (error != std::string::npos &&
        line.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") ==
            error + 5) {
      found = line.substr(error + 7);
    }
  }
  return found.empty() ? first : found;
}

// max |a - b| <= 1e-4 * max(1, max |a|).
bool close(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  const double scale = std::max(1.0, a.abs().max().item<double>());
  return (a - b).abs().max().item<double>() <= 1e-4 * scale;
}

}  // namespace

EncoderInfo torchscript_info() {
  EncoderInfo info;
  info.name = "torchscript";
  info.input = EncoderInput::kImage;
  info.options = input_shape_options();
  info.help = "a scripted nn.Sequential from torch.jit.save (torchscript:FILE); its named "
              "children are the blocks, the last one with parameters the classifier";
  info.takes_file = true;
  return info;
}

BlockModel make_torchscript(const EncoderSpec& spec, int64_t classes) {
  const std::string& file = spec.file;
  JitModule root;
  try {
    root = torch::jit::load(file, torch::kCPU);
  } catch (const c10::Error& e) {
    throw std::invalid_argument("model file " + file +
                                " is not a TorchScript module (save one with torch.jit.save)");
  }
  std::vector<torch::jit::NameModule> children;
  for (const auto& c : root.named_children()) children.push_back(c);
  size_t cls = children.size();
  for (size_t i = children.size(); i-- > 0;) {
    if (has_parameters(children[i].value)) {
      cls = i;
      break;
    }
  }
  if (cls == children.size()) {
    throw std::invalid_argument("model file " + file + " has no child module with parameters to "
                                "be its classifier (expected a scripted nn.Sequential)");
  }
  std::vector<Group> groups = group_blocks(children, cls);
  if (groups.empty()) {
    throw std::invalid_argument("model file " + file + " has no block before its classifier " +
                                children[cls].name);
  }

  BlockModel model;
  for (const Group& g : groups) {
    model.block_names.push_back(g.name);
    model.blocks.emplace_back(ScriptBlock(g.children));
  }
  ScriptBlock own(std::vector<torch::jit::NameModule>(children.begin() + cls, children.end()));

  // One probe batch in eval mode: the blocks' output size, the classifier's outputs, and the
  // check that forward is the children in order.
  const int64_t c = spec.get("in_channels"), h = spec.get("in_height"), w = spec.get("in_width");
  root.eval();
  torch::Tensor features, logits, whole;
  try {
    torch::NoGradGuard no_grad;
    const torch::Tensor probe =
        torch::sin(torch::arange(2 * c * h * w, torch::kFloat32) * 0.37).reshape({2, c, h, w});
    features = probe;
    for (auto& b : model.blocks) features = b.forward(features);
    logits = own->forward(features);
    whole = root.forward({probe}).toTensor();
  } catch (const std::exception& e) {
    // One line first (the tools print it alone); the traceback follows for --verbose.
    throw std::invalid_argument("model file " + file + " does not run on a batch of " +
                                std::to_string(c) + "x" + std::to_string(h) + "x" +
                                std::to_string(w) + " inputs: " + error_summary(e.what()) + "\n" +
                                e.what());
  }
  root.train();
  if (!torch::isfinite(whole).all().item<bool>()) {
    throw std::invalid_argument("model file " + file + ": its outputs on a probe batch are not "
                                "finite (NaN or infinity): check its weights");
  }
  if (logits.dim() != 2 || !close(whole, logits)) {
    throw std::invalid_argument("model file " + file + ": its forward is not its children run in "
                                "order to [N, classes] (expected a scripted nn.Sequential)");
  }
  const int64_t in_features = features.numel() / features.size(0);
  if (logits.size(1) == classes) {
    model.classifier = Classifier(nn::AnyModule(own), in_features, classes, Pooling::kFlatten);
  } else {
    model.classifier = Classifier(in_features, classes, Pooling::kFlatten);
  }
  return model;
}

BlockStack load_script_head(const std::string& file, std::string* digest) {
  std::string bytes;
  try {
    bytes = read_regular_file(file);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument("--script-head " + std::string(e.what()));
  }
  JitModule module;
  try {
    std::istringstream in(bytes);
    module = torch::jit::load(in, torch::kCPU);
  } catch (const c10::Error& e) {
    throw std::invalid_argument("--script-head " + file +
                                " is not a TorchScript module (save one with "
                                "torch.jit.script(head).save(FILE))");
  }
  if (!has_parameters(module)) {
    throw std::invalid_argument("--script-head " + file + " has no parameters to train");
  }
  if (digest) *digest = hash128(bytes).to_hex();
  module.train();
  return BlockStack(std::shared_ptr<BlockStackImpl>(std::make_shared<ScriptHeadImpl>(module)));
}

void save_script_head(BlockStack& head, const std::string& path) {
  const auto children = head->children();
  const auto view = children.size() == 1
                        ? std::dynamic_pointer_cast<ScriptViewImpl>(children[0])
                        : nullptr;
  if (!view) throw std::logic_error("save_script_head: not a head of load_script_head");
  AtomicFile out(path);
  try {
    view->module().save(out.temp_path());
  } catch (const c10::Error& e) {
    throw std::runtime_error("cannot write " + path + ": " + error_summary(e.what()));
  }
  out.commit();
}

}  // namespace recycle
