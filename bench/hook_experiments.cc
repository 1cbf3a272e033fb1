// The measurements behind the communication hooks' defaults (engine/distributed/comm_hook.h,
// adacomp_hook.h), run by hand: `recycle_hook_experiments accuracy` (the head's test accuracy
// per hook on the Fashion-MNIST transfer task, two ranks in this process) and
// `recycle_hook_experiments bins` (AdaComp's selected fraction per bin length). Built with
// RECYCLE_BUILD_BENCH; not part of the test suite. The in-process Gloo group and the
// gradient-like data are the tests' (tests/distributed/).
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/distributed/adacomp_hook.h"
#include "engine/distributed/comm_hook.h"
#include "engine/distributed/dist_options.h"
#include "engine/models/encoder_registry.h"
#include "engine/models/preprocess.h"
#include "engine/models/split_model.h"
#include "engine/models/weights_io.h"
#include "tests/distributed/gloo_group.h"
#include "tests/distributed/gradient_like.h"

using recycle::AdaCompCompressor;
using recycle::AdaCompPacket;
using recycle::CommHook;
using recycle::testing::gradient_like;

namespace {

using Group = c10::intrusive_ptr<c10d::ProcessGroup>;
using recycle::testing::run_gloo_group;  // every rank on a thread of this process

double ratio(const CommHook& hook) {
  return static_cast<double>(hook.fp32_bytes()) / static_cast<double>(hook.bytes_sent());
}

// The transfer task of the README's main job with two data-parallel ranks in this process: a
// ResNet-18 (width 16) cut after 4 of its 8 blocks, the prefix's activations of Fashion-MNIST
// classes 5-9 computed once, the head trained for 4 epochs (global batch 128 = 2 x 64, SGD with
// Nesterov momentum 0.9, weight decay 5e-4, lr 0.05 with a cosine schedule) with each hook,
// then rank 0's head evaluated on the test split. RECYCLE_ENCODER=FILE loads pretrained
// weights (a file from --save-model, e.g. the demo's out/encoder.pt), else the encoder is random;
// RECYCLE_SAMPLES (default 5000) limits both splits, RECYCLE_SEED (default 0) varies the
// classifier's initialisation and the order of the samples. Run with
//   RECYCLE_ENCODER=out/encoder.pt build/recycle_hook_experiments accuracy
void head_accuracy_per_hook() {
  const char* encoder = std::getenv("RECYCLE_ENCODER");
  const char* samples_env = std::getenv("RECYCLE_SAMPLES");
  const int64_t samples = samples_env ? std::atoll(samples_env) : 5000;
  const int world = 2, epochs = 4;
  const int64_t global_batch = 128, per_rank = global_batch / world, classes = 5;
  const char* seed_env = std::getenv("RECYCLE_SEED");
  const int64_t seed = seed_env ? std::atoll(seed_env) : 0;
  auto make_model = [&] {
    torch::manual_seed(3 + seed);
    recycle::BlockModel model = encoder ? recycle::load_block_model(encoder)
                                        : recycle::make_encoder("resnet18:width=16", classes);
    model.reset_classifier(classes);  // drawn after manual_seed: the same head every time
    return recycle::split_block_model(model, 4);
  };
  auto activations = [&](const std::string& split, torch::Tensor* x, torch::Tensor* y) {
    recycle::DatasetOptions options;
    options.spec = "fashion-mnist";
    options.split = split;
    options.classes = "5-9";
    options.limit = samples;
    const recycle::Dataset data = recycle::load_dataset(options);
    recycle::SplitModel model = make_model();
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> parts;
    std::vector<int64_t> indices(data.size());
    for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
    for (size_t start = 0; start < data.size(); start += 256) {
      const int64_t n = std::min<int64_t>(256, data.size() - start);
      parts.push_back(model.prefix->forward(
          recycle::image_batch(data, indices.data() + start, n, torch::kCPU)));
    }
    *x = torch::cat(parts);
    *y = torch::tensor(data.labels, torch::kInt64);
  };
  torch::Tensor train_x, train_y, test_x, test_y;
  activations("train", &train_x, &train_y);
  activations("test", &test_x, &test_y);
  const int64_t steps_per_epoch = train_x.size(0) / global_batch;
  const int64_t total_steps = steps_per_epoch * epochs;

  // "topk:BIN" runs topk with another bin length; RECYCLE_HOOKS (default "none fp16 topk")
  // chooses.
  const char* hooks_env = std::getenv("RECYCLE_HOOKS");
  std::vector<std::string> hook_names;
  std::istringstream hooks_in(hooks_env ? hooks_env : "none fp16 topk");
  for (std::string h; hooks_in >> h;) hook_names.push_back(h);
  for (const std::string& hook_name : hook_names) {
    std::vector<recycle::SplitModel> replicas;
    for (int r = 0; r < world; ++r) replicas.push_back(make_model());
    double accuracy = 0, compression = 0;
    const auto start = std::chrono::steady_clock::now();
    run_gloo_group(world, [&](int rank, Group group) {
      recycle::BlockStack head = replicas[rank].head;
      std::vector<torch::Tensor> ps = head->parameters();
      torch::optim::SGD sgd(ps, torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true)
                                    .weight_decay(5e-4));
      auto hook = hook_name.rfind("topk:", 0) == 0
                      ? recycle::make_adacomp_hook(group, std::make_shared<AdaCompCompressor>(
                                                              std::stoll(hook_name.substr(5))))
                      : recycle::make_comm_hook(recycle::parse_grad_compression(hook_name), group);
      const int64_t cap = (1 << 20) / 4;
      int64_t step = 0;
      for (int epoch = 0; epoch < epochs; ++epoch) {
        // The same permutation on every rank, from a private generator (the ranks' threads
        // must not share torch's global one).
        auto gen = at::detail::createCPUGenerator(100 + 1000 * seed + epoch);
        const torch::Tensor order = torch::randperm(train_x.size(0), gen);
        head->train();
        for (int64_t s = 0; s < steps_per_epoch; ++s, ++step) {
          const torch::Tensor idx = order.narrow(0, s * global_batch + rank * per_rank, per_rank);
          const double lr = 0.05 * 0.5 * (1 + std::cos(M_PI * step / total_steps));
          for (auto& group_options : sgd.param_groups()) group_options.options().set_lr(lr);
          sgd.zero_grad();
          torch::nn::functional::cross_entropy(head->forward(train_x.index_select(0, idx)),
                                               train_y.index_select(0, idx))
              .backward();
          std::vector<torch::Tensor> flat;
          for (auto it = ps.rbegin(); it != ps.rend(); ++it) flat.push_back(it->grad().reshape(-1));
          torch::Tensor all = torch::cat(flat);
          for (int64_t b = 0, off = 0; off < all.numel(); ++b, off += cap) {
            torch::Tensor bucket =
                all.narrow(0, off, std::min(cap, all.numel() - off)).contiguous();
            hook->reduce(b, bucket);
            all.narrow(0, off, bucket.numel()).copy_(bucket);
          }
          int64_t off = 0;
          for (auto it = ps.rbegin(); it != ps.rend(); ++it) {
            it->mutable_grad().copy_(all.narrow(0, off, it->numel()).view_as(*it));
            off += it->numel();
          }
          sgd.step();
        }
      }
      if (rank == 0) {
        head->eval();
        torch::NoGradGuard no_grad;
        int64_t correct = 0;
        for (int64_t i = 0; i < test_x.size(0); i += 500) {
          const int64_t n = std::min<int64_t>(500, test_x.size(0) - i);
          correct += head->forward(test_x.narrow(0, i, n)).argmax(1).eq(test_y.narrow(0, i, n))
                         .sum().item<int64_t>();
        }
        accuracy = static_cast<double>(correct) / test_x.size(0);
        compression = ratio(*hook);
      }
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("hook %-8s: test accuracy %.4f (%lld test samples), compression %.1fx, %.1f s\n",
                hook_name.c_str(), accuracy, static_cast<long long>(test_x.size(0)), compression,
                seconds);
  }
}

// The sweep behind kAdaCompDefaultBin: the fraction of elements AdaComp sends per step, for
// several bin lengths, on the gradient-like buckets and on one rank's gradients of a ResNet
// head (plain SGD on the uncompressed gradient; the compressors only watch). Run with
//   build/recycle_hook_experiments bins
void selected_fraction_per_bin_length() {
  const std::vector<int64_t> bins = {50, 100, 200, 500, 1000};
  using Feed = std::function<void(std::vector<AdaCompCompressor>&, std::vector<int64_t>&,
                                  int64_t&)>;
  auto report = [&](const char* what, const Feed& feed) {
    std::vector<AdaCompCompressor> compressors;
    for (int64_t bin : bins) compressors.emplace_back(bin);
    std::vector<int64_t> sent(bins.size(), 0);
    int64_t elements = 0;
    feed(compressors, sent, elements);
    for (size_t i = 0; i < bins.size(); ++i) {
      std::printf("%s: bin %4lld: %.2f bytes per 100 elements, compression %.1fx before headers "
                  "and padding\n",
                  what, static_cast<long long>(bins[i]), 100.0 * sent[i] / elements,
                  4.0 * elements / sent[i]);
    }
  };
  report("gradient-like", [&](std::vector<AdaCompCompressor>& cs, std::vector<int64_t>& sent,
                              int64_t& elements) {
    const std::vector<int64_t> sizes = {262144, 131072, 4099};
    AdaCompPacket packet;
    for (uint32_t step = 0; step < 8; ++step) {
      for (size_t b = 0; b < sizes.size(); ++b) {
        const std::vector<float> g = gradient_like(sizes[b], b, 0, step);
        elements += sizes[b];
        for (size_t i = 0; i < cs.size(); ++i) {
          cs[i].compress(b, g.data(), sizes[b], &packet);
          sent[i] += packet.bytes.size();
        }
      }
    }
  });
  report("resnet head", [&](std::vector<AdaCompCompressor>& cs, std::vector<int64_t>& sent,
                            int64_t& elements) {
    torch::manual_seed(11);
    recycle::SplitModel model =
        recycle::split_block_model(recycle::make_encoder("resnet18:width=16", 5), 4);
    torch::Tensor x, y;
    {
      torch::NoGradGuard no_grad;
      auto shape = model.prefix->forward(torch::randn({1, 1, 28, 28})).sizes().vec();
      shape[0] = 512;
      x = torch::randn(shape);
      y = x.mean({2, 3}).matmul(torch::randn({shape[1], 5})).argmax(1);
    }
    std::vector<torch::Tensor> ps = model.head->parameters();
    torch::optim::SGD sgd(ps, torch::optim::SGDOptions(0.05).momentum(0.9));
    AdaCompPacket packet;
    const int64_t cap = (1 << 20) / 4;
    for (int step = 0; step < 40; ++step) {
      sgd.zero_grad();
      const int64_t start = (step * 32) % 512;
      torch::nn::functional::cross_entropy(model.head->forward(x.narrow(0, start, 32)),
                                           y.narrow(0, start, 32)).backward();
      std::vector<torch::Tensor> flat;
      for (auto it = ps.rbegin(); it != ps.rend(); ++it) flat.push_back(it->grad().reshape(-1));
      const torch::Tensor all = torch::cat(flat).contiguous();
      for (int64_t b = 0, off = 0; off < all.numel(); ++b, off += cap) {
        const int64_t n = std::min(cap, all.numel() - off);
        elements += n;
        for (size_t i = 0; i < cs.size(); ++i) {
          cs[i].compress(b, all.data_ptr<float>() + off, n, &packet);
          sent[i] += packet.bytes.size();
        }
      }
      sgd.step();
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc == 2 ? argv[1] : "";
  if (which == "accuracy") {
    head_accuracy_per_hook();
  } else if (which == "bins") {
    selected_fraction_per_bin_length();
  } else {
    std::fprintf(stderr, "usage: recycle_hook_experiments accuracy|bins\n");
    return 2;
  }
  return 0;
}
