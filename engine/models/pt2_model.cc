#include "engine/models/pt2_model.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/data/regular_file.h"
#include "engine/models/block_model.h"
#include "recycle/content_hasher.h"

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 6)
#define RECYCLE_PT2 1
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#else
#define RECYCLE_PT2 0
#endif

namespace recycle {

namespace nn = torch::nn;

namespace {

#if RECYCLE_PT2
bool is_hex_digest(const std::string& s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
         });
}

// The first line of an error's text (LibTorch's carry a stack after it).
std::string first_line(const std::string& what) { return what.substr(0, what.find('\n')); }

using Loader = torch::inductor::AOTIModelPackageLoader;

// The one line for a file the loader could not read (`what` names it: "--head", "pt2 model").
std::invalid_argument not_a_package(const std::string& what, const std::string& file,
                                    const std::exception& e) {
  return std::invalid_argument(what + " " + file +
                               " is not an AOTInductor package (write one with recycle.export, "
                               "docs/pytorch2.md): " +
                               first_line(e.what()));
}

// The metadata of the package `file` (--model's: "pt2 model" in the refusal), without loading
// its code.
std::unordered_map<std::string, std::string> package_metadata(const std::string& file) {
  try {
    return Loader::load_metadata_from_package(file, "model");
  } catch (const std::exception& e) {
    throw not_a_package("pt2 model", file, e);
  }
}

std::shared_ptr<Loader> open_package(const std::string& file, const std::string& what) {
  try {
    return std::make_shared<Loader>(file, "model");
  } catch (const std::exception& e) {
    throw not_a_package(what, file, e);
  }
}

// x with the strides of a contiguous tensor of its sizes. contiguous() is not enough: a tensor
// whose size-1 dimensions have other strides counts as contiguous (a channels-last batch of one
// channel: [N, 1, H, W] with strides [HW, 1, W, 1]), and a package given one computed other
// values (torch 2.11: every output of a ResNet-18 prefix, by up to 8).
torch::Tensor dense(const torch::Tensor& x) {
  std::vector<int64_t> strides(x.dim(), 1);
  for (int64_t d = x.dim() - 2; d >= 0; --d) strides[d] = strides[d + 1] * x.size(d + 1);
  return x.strides() == c10::IntArrayRef(strides) ? x : x.clone(torch::MemoryFormat::Contiguous);
}

constexpr const char* kInputKey = "recycle.input";  // "tokens" for a text prefix

bool takes_token_ids(const std::unordered_map<std::string, std::string>& meta) {
  const auto input = meta.find(kInputKey);
  return input != meta.end() && input->second == "tokens";
}

// The package: run on its device, one tensor in and one out (a text prefix: ids and mask packed
// in, packed features out; see pt2_model.h). Its one buffer is the package's digest (as ASCII),
// so that a fingerprint of the module covers the package's weights.
class PackageBlockImpl : public nn::Module {
 public:
  PackageBlockImpl(std::shared_ptr<Loader> loader, const std::string& digest)
      : loader_(std::move(loader)) {
    const auto meta = loader_->get_metadata();
    tokens_ = takes_token_ids(meta);
    const auto key = meta.find("AOTI_DEVICE_KEY");
    device_ = key != meta.end() && key->second.rfind("cuda", 0) == 0 ? torch::Device(torch::kCUDA)
                                                                     : torch::Device(torch::kCPU);
    torch::Tensor d = torch::empty({static_cast<int64_t>(digest.size())}, torch::kUInt8);
    std::copy(digest.begin(), digest.end(), d.data_ptr<uint8_t>());
    register_buffer("xxh3", d);
  }
  bool tokens() const { return tokens_; }
  torch::Tensor forward(torch::Tensor x) {
    if (tokens_) return forward_tokens(x);
    const torch::Device back = x.device();
    std::vector<torch::Tensor> out = loader_->run({dense(x.to(device_))});
    if (out.size() != 1) {
      throw std::runtime_error("a pt2 package gave " + std::to_string(out.size()) +
                               " outputs; the engine takes one tensor (export a module that "
                               "returns one)");
    }
    return out[0].to(back);
  }

 private:
  // ids and mask [N, 2, L] -> the hidden states with the mask as a last channel [N, L, H + 1].
  torch::Tensor forward_tokens(const torch::Tensor& x) {
    if (x.dim() != 3 || x.size(1) != 2 || x.scalar_type() != torch::kInt64) {
      throw std::invalid_argument("a pt2 text prefix takes token ids and their mask as int64 "
                                  "[N, 2, L], not " + x.toString() + " " + c10::str(x.sizes()));
    }
    const torch::Tensor on = x.to(device_);
    std::vector<torch::Tensor> out = loader_->run({dense(on.select(1, 0)), dense(on.select(1, 1))});
    const int64_t n = x.size(0), length = x.size(2);
    if (out.empty() || out.size() > 2 || out[0].dim() != 3 || out[0].size(0) != n ||
        out[0].size(1) != length) {
      throw std::runtime_error("a pt2 text prefix gave " + std::to_string(out.size()) +
                               " outputs, the first not [N, L, H] for token ids [" +
                               std::to_string(n) + ", " + std::to_string(length) +
                               "] (export recycle.hf.split's prefix with recycle.export)");
    }
    const torch::Tensor mask = x.select(1, 1).to(torch::kFloat32).unsqueeze(2);
    return torch::cat({out[0].to(x.device()).to(torch::kFloat32), mask}, 2);
  }

  std::shared_ptr<Loader> loader_;
  torch::Device device_{torch::kCPU};
  bool tokens_ = false;
};
TORCH_MODULE(PackageBlock);
#else
// The one line a build without AOTInductor gives for any package.
std::string unsupported(const std::string& what, const std::string& file) {
  return what + " " + file + ": AOTInductor packages (torch.export) are read by the tools " +
         "built against torch >= 2.6; this build has LibTorch " + TORCH_VERSION +
         " (give torchscript:FILE here, or use the tools of pip's torch: docs/pytorch2.md)";
}
#endif

}  // namespace

bool pt2_supported() { return RECYCLE_PT2 != 0; }

bool is_pt2_path(const std::string& path) {
  return path.size() > 4 && path.compare(path.size() - 4, 4, ".pt2") == 0;
}

EncoderInfo pt2_info() {
  EncoderInfo info;
  info.name = "pt2";
  info.input = EncoderInput::kImage;
  info.options = input_shape_options();
  info.help =
      "an AOTInductor package from recycle.export or torch.export (pt2:FILE): the "
      "whole package is the frozen prefix (--recycle 1), the head a new classifier";
  info.takes_file = true;
  return info;
}

std::string pt2_digest(const std::string& path, const std::string& bytes) {
#if RECYCLE_PT2
  const auto meta = package_metadata(path);
  const auto w = meta.find("recycle.weights");
  if (w != meta.end() && is_hex_digest(w->second)) return w->second;
  return hash128(bytes).to_hex();
#else
  (void)bytes;
  throw std::invalid_argument(unsupported("pt2 model", path));
#endif
}

void check_pt2_input(const std::string& file, bool token_ids) {
#if RECYCLE_PT2
  const auto meta = package_metadata(file);
  if (takes_token_ids(meta) && !token_ids) {
    throw std::invalid_argument("pt2 model " + file +
                                " is a text prefix: it takes token ids (npy:DIR of SPLIT_x.npy "
                                "ids and SPLIT_mask.npy, docs/pytorch2.md)");
  }
  if (!takes_token_ids(meta) && token_ids) {
    throw std::invalid_argument("pt2 model " + file + " takes float32 inputs, not token ids "
                                "(a text prefix is exported by recycle.export from "
                                "recycle.hf.split's prefix)");
  }
#else
  (void)token_ids;
  throw std::invalid_argument(unsupported("pt2 model", file));
#endif
}

#if RECYCLE_PT2
namespace {

// A probe batch for the block: 2 float32 inputs of the spec's shape, or for a text prefix the
// ids and masks of 2 texts of up to 8 tokens (ids 1..97, which every vocabulary holds).
torch::Tensor probe_batch(const PackageBlock& block, const EncoderSpec& spec, std::string* what) {
  const int64_t c = spec.get("in_channels"), h = spec.get("in_height"), w = spec.get("in_width");
  if (block->tokens()) {
    const int64_t length = std::min<int64_t>(h, 8);
    torch::Tensor x = torch::ones({2, 2, length}, torch::kInt64);
    x.select(1, 0).copy_(torch::arange(2 * length, torch::kInt64).reshape({2, length}) % 97 + 1);
    if (length > 2) x[1][1].narrow(0, length / 2 + 1, length - length / 2 - 1).zero_();
    *what = "2 texts of " + std::to_string(length) + " token ids";
    return x;
  }
  *what = std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w) +
          " float32 inputs (export it with a dynamic batch for this input shape)";
  return torch::sin(torch::arange(2 * c * h * w, torch::kFloat32) * 0.37).reshape({2, c, h, w});
}

}  // namespace
#endif

BlockModel make_pt2(const EncoderSpec& spec, int64_t classes) {
#if RECYCLE_PT2
  const std::string& file = spec.file;
  PackageBlock block(open_package(file, "pt2 model"), spec.digest);
  torch::Tensor features;
  std::string what;
  try {
    torch::NoGradGuard no_grad;
    features = block->forward(probe_batch(block, spec, &what));
  } catch (const std::exception& e) {
    throw std::invalid_argument("pt2 model " + file + " does not run on a batch of " + what +
                                ": " + first_line(e.what()));
  }
  if (features.dim() < 2 || features.size(0) != 2 || features.scalar_type() != torch::kFloat32) {
    throw std::invalid_argument("pt2 model " + file + " gives " + features.toString() + " " +
                                c10::str(features.sizes()) + " for a batch of 2: the engine " +
                                "caches float32 [N, ...] (export a module that returns one)");
  }
  if (!torch::isfinite(features).all().item<bool>()) {
    throw std::invalid_argument("pt2 model " + file +
                                ": its outputs on a probe batch are not "
                                "finite (NaN or infinity): check its weights");
  }
  BlockModel model;
  model.block_names.push_back("package");
  model.blocks.emplace_back(block);
  model.classifier = block->tokens()
                         ? Classifier(features.size(2) - 1, classes, Pooling::kMaskedMean)
                         : Classifier(features.numel() / 2, classes, Pooling::kFlatten);
  return model;
#else
  (void)classes;
  throw std::invalid_argument(unsupported("pt2 model", spec.file));
#endif
}

BlockStack load_pt2_head(const std::string& file, const std::string& flag,
                         std::string* metadata_head) {
#if RECYCLE_PT2
  std::string bytes;
  try {
    bytes = read_regular_file(file);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(flag + " " + e.what());
  }
  auto loader = open_package(file, flag);
  const auto meta = loader->get_metadata();
  const auto head = meta.find("recycle.head");
  if (metadata_head) *metadata_head = head == meta.end() ? "" : head->second;
  BlockStack stack;
  stack->append("package", nn::AnyModule(PackageBlock(loader, hash128(bytes).to_hex())));
  return stack;
#else
  (void)metadata_head;
  throw std::invalid_argument(unsupported(flag, file));
#endif
}

}  // namespace recycle
