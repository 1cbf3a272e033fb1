// The communication hooks (engine/distributed/comm_hook.h): none, fp16 and topk (AdaComp), with two
// ranks in this process, one thread and one Gloo process group each over a shared HashStore;
// and AdaComp's pure selection, quantisation and decoding without a process group.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/distributed/adacomp_hook.h"
#include "engine/distributed/comm_hook.h"
#include "engine/distributed/dist_options.h"
#include "tests/distributed/gloo_group.h"
#include "tests/distributed/gradient_like.h"
#include "engine/models/encoder_registry.h"
#include "engine/models/split_model.h"

using recycle::AdaCompCompressor;
using recycle::AdaCompPacket;
using recycle::CommHook;
using recycle::testing::gradient_like;
using recycle::testing::to_tensor;

namespace {

using Group = c10::intrusive_ptr<c10d::ProcessGroup>;

// Every rank of a `world`-rank job on its own thread (tests/distributed/gloo_group.h). A rank that
// fails leaves the others to their collectives' 30 s timeout.
void run_ranks(int world, const std::function<void(int, Group)>& fn) {
  recycle::testing::run_gloo_group(world, fn);
}

double ratio(const CommHook& hook) {
  return static_cast<double>(hook.fp32_bytes()) / static_cast<double>(hook.bytes_sent());
}

// ---- the factory ----------------------------------------------------------------------------

TEST(CommHook, FactoryNamesTheKnownHooks) {
  EXPECT_EQ(recycle::grad_compression_names(), (std::vector<std::string>{"none", "fp16", "topk"}));
  try {
    recycle::parse_grad_compression("zip");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "unknown --grad-compression 'zip' (known: none, fp16, topk)");
  }
  for (const std::string& name : recycle::grad_compression_names()) {
    const recycle::GradCompression c = recycle::parse_grad_compression(name);
    EXPECT_EQ(recycle::grad_compression_name(c), name);
    EXPECT_EQ(recycle::make_comm_hook(c, Group())->name(), name);
  }
}

// ---- none and fp16 ----------------------------------------------------------------------------

TEST(CommHook, NoneGivesTheExactMeanAndFp16ItsHalfPrecision) {
  const int64_t n = 10007;
  std::vector<std::vector<float>> inputs = {gradient_like(n, 0, 1, 0), gradient_like(n, 0, 2, 0)};
  std::vector<float> mean(n);
  for (int64_t i = 0; i < n; ++i) mean[i] = (inputs[0][i] + inputs[1][i]) / 2.0f;
  std::vector<std::vector<float>> none(2), fp16(2);
  std::vector<std::vector<int64_t>> bytes(2);
  run_ranks(2, [&](int rank, Group group) {
    for (const char* name : {"none", "fp16"}) {
      auto hook = recycle::make_comm_hook(recycle::parse_grad_compression(name), group);
      torch::Tensor grad = to_tensor(inputs[rank]);
      hook->reduce(0, grad);
      (std::string(name) == "none" ? none : fp16)[rank].assign(
          grad.data_ptr<float>(), grad.data_ptr<float>() + n);
      bytes[rank].push_back(hook->bytes_sent());
      bytes[rank].push_back(hook->fp32_bytes());
    }
  });
  EXPECT_EQ(bytes[0], (std::vector<int64_t>{4 * n, 4 * n, 2 * n, 4 * n}));
  EXPECT_EQ(none[0], none[1]);
  EXPECT_EQ(fp16[0], fp16[1]);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(none[0][i], mean[i]) << i;  // (a + b) / 2 in float, exactly as Gloo sums
    // Each half is rounded to 11 significant bits (2^-11 relative), then the sum once more;
    // below half's normal range (6.1e-5) the absolute step is 2^-24.
    const float tolerance = 2.0f * std::ldexp(std::fabs(mean[i]), -11) +
                            std::ldexp(std::fabs(inputs[0][i]) + std::fabs(inputs[1][i]), -12) +
                            3.0f * std::ldexp(1.0f, -24);
    ASSERT_NEAR(fp16[0][i], mean[i], tolerance) << i;
  }
}

// ---- AdaComp without a process group --------------------------------------------------------

TEST(CommHookAdaComp, SelectionFollowsTheRuleOnHandMadeBins) {
  std::vector<uint32_t> picked;
  // gmax = 4 (|G[2]|): H[i] = G[i] + grad[i]; picked where |H| >= 4.
  const float G1[] = {1.0f, -3.0f, -4.0f, 0.5f, 2.5f};
  const float H1[] = {1.5f, -4.0f, -3.5f, 0.6f, 5.0f};
  recycle::adacomp_select_bin(G1, H1, 5, 100, &picked);
  EXPECT_EQ(picked, (std::vector<uint32_t>{101, 104}));  // the max of G itself (-4) shrank in H
  // Equality counts; a bin of zeros sends nothing (even though |H| >= 0 everywhere).
  picked.clear();
  const float G2[] = {0.0f, 0.0f, 0.0f};
  const float H2[] = {0.0f, 1.0f, -1.0f};
  recycle::adacomp_select_bin(G2, H2, 3, 0, &picked);
  EXPECT_TRUE(picked.empty());
  const float G3[] = {2.0f, -2.0f, 1.0f};
  const float H3[] = {2.0f, -2.0f, 2.0f};
  recycle::adacomp_select_bin(G3, H3, 3, 7, &picked);
  EXPECT_EQ(picked, (std::vector<uint32_t>{7, 8, 9}));

  // Through the compressor: bins of 4; step 1 G = grad, H = 2 grad.
  AdaCompCompressor compressor(4);
  const std::vector<float> grad = {0.1f, 0.2f, -0.3f, 0.05f,   // gmax .3: |H| .2 .4 .6 .1
                                   0.0f, 0.0f, 0.0f, 0.0f,     // nothing
                                   1.0f, -1.0f, 0.01f, 0.02f,  // gmax 1: both 1s
                                   0.001f};                    // a bin of one: itself
  AdaCompPacket packet;
  compressor.compress(3, grad.data(), 13, &packet);
  std::vector<uint32_t> indices;
  recycle::adacomp_for_each(packet.bytes.data(), packet.bytes.size(), 13,
                            [&](int64_t i, uint8_t) { indices.push_back(i); });
  EXPECT_EQ(packet.elements, 5);
  EXPECT_EQ(packet.bytes.size(), 10u);
  EXPECT_EQ(indices, (std::vector<uint32_t>{1, 2, 8, 9, 12}));
  EXPECT_EQ(packet.scale, 1.0f);
  // The residue is G minus what was sent (exact here for +-1; 0.2 and 0.3 leave their
  // quantisation error, within 2^(1/16) - 1 of the value).
  const std::vector<float>& residue = *compressor.residue(3);
  EXPECT_EQ(residue[0], 0.1f);
  EXPECT_EQ(residue[3], 0.05f);
  EXPECT_EQ(residue[8], 0.0f);
  EXPECT_EQ(residue[9], 0.0f);
  EXPECT_EQ(residue[10], 0.01f);
  EXPECT_LE(std::fabs(residue[1]), 0.2f * 0.045f);
  EXPECT_LE(std::fabs(residue[2]), 0.3f * 0.045f);
  EXPECT_EQ(compressor.residue(4), nullptr);
  EXPECT_THROW(compressor.compress(3, grad.data(), 12, &packet), std::invalid_argument);
}

TEST(CommHookAdaComp, ALogCodeWithinFourPointFivePercentAndGapsRoundTrip) {
  uint8_t code = 0;
  ASSERT_TRUE(recycle::adacomp_quantise(-1.0f, 1.0f, &code));
  EXPECT_EQ(code, 0x80);
  EXPECT_EQ(recycle::adacomp_dequantise(code, 1.0f), -1.0f);
  ASSERT_TRUE(recycle::adacomp_quantise(0.25f, 2.0f, &code));
  EXPECT_EQ(code, 24);  // 2^-3 of the scale: k = 24
  EXPECT_EQ(recycle::adacomp_dequantise(code, 2.0f), 0.25f);
  EXPECT_FALSE(recycle::adacomp_quantise(0.0f, 1.0f, &code));
  EXPECT_FALSE(recycle::adacomp_quantise(1e-6f, 1.0f, &code));  // 2^-19.9: below the code's range
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> exponent(-15.0f, 0.0f);
  for (int i = 0; i < 10000; ++i) {
    const float v = (i % 2 ? -1.0f : 1.0f) * std::exp2(exponent(rng)) * 3.0f;
    ASSERT_TRUE(recycle::adacomp_quantise(v, 3.0f, &code));
    const float back = recycle::adacomp_dequantise(code, 3.0f);
    ASSERT_LE(std::fabs(back - v), std::fabs(v) * 0.0443f) << v;
    ASSERT_EQ(std::signbit(back), std::signbit(v));
  }
  // Decoding adds at the word's index, and refuses an index outside the bucket.
  std::vector<float> out(4, 1.0f);
  const uint8_t bytes[] = {4, 0x80 | 8};  // index -1 + 4, -2^-1 of the scale
  recycle::adacomp_decode_add(bytes, 2, 4.0f, out.data(), 4);
  EXPECT_EQ(out, (std::vector<float>{1.0f, 1.0f, 1.0f, -1.0f}));
  EXPECT_THROW(recycle::adacomp_decode_add(bytes, 2, 4.0f, out.data(), 3), std::runtime_error);
  EXPECT_THROW(recycle::adacomp_decode_add(bytes, 1, 4.0f, out.data(), 4), std::runtime_error);
  // Gaps of 255 and more take skip pairs (0, m - 1), each 255 m long.
  const std::vector<int64_t> indices = {0, 255, 256, 511, 767, 768, 100000, 100001 + 255 * 256};
  std::vector<uint8_t> encoded;
  int64_t last = -1;
  for (size_t i = 0; i < indices.size(); ++i) {
    recycle::adacomp_encode(indices[i], static_cast<uint8_t>(i), &last, &encoded);
  }
  // 0: gap 1; 255: gap 255; 256: 1; 511: 255; 767: 256 = a skip of 255, then 1; 768: 1;
  // 100000: 99232 = 389 skips of 255 (two pairs: 256 and 133), then 37; the last: 65281 = 256
  // skips of 255, then 1.
  EXPECT_EQ(encoded, (std::vector<uint8_t>{1, 0, 255, 1, 1, 2, 255, 3, 0, 0, 1, 4, 1, 5, 0, 255,
                                           0, 132, 37, 6, 0, 255, 1, 7}));
  std::vector<int64_t> decoded;
  std::vector<uint8_t> codes;
  recycle::adacomp_for_each(encoded.data(), encoded.size(), 200000, [&](int64_t i, uint8_t c) {
    decoded.push_back(i);
    codes.push_back(c);
  });
  EXPECT_EQ(decoded, indices);
  EXPECT_EQ(codes, (std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(CommHookAdaComp, ErrorFeedbackLosesNothingOnOneRank) {
  // Sum over steps of what was sent plus the final residue = sum of the gradients.
  const int64_t n = 30000;
  AdaCompCompressor compressor;
  std::vector<double> grads(n, 0.0), sent(n, 0.0), magnitude(n, 0.0);
  AdaCompPacket packet;
  for (uint32_t step = 0; step < 20; ++step) {
    const std::vector<float> g = gradient_like(n, 1, 3, step);
    for (int64_t i = 0; i < n; ++i) {
      grads[i] += g[i];
      magnitude[i] += std::fabs(g[i]);
    }
    compressor.compress(0, g.data(), n, &packet);
    std::vector<float> decoded(n, 0.0f);
    recycle::adacomp_decode_add(packet.bytes.data(), packet.bytes.size(), packet.scale,
                                decoded.data(), n);
    for (int64_t i = 0; i < n; ++i) sent[i] += decoded[i];
  }
  const std::vector<float>& residue = *compressor.residue(0);
  for (int64_t i = 0; i < n; ++i) {
    // float rounding: two roundings of the residue per step, each within 2^-24 of |G|
    ASSERT_NEAR(sent[i] + residue[i], grads[i], 4e-6 * magnitude[i]) << i;
  }
}

// ---- topk with two ranks --------------------------------------------------------------------

TEST(CommHook, TopkErrorFeedbackLosesNothingAndRanksAgree) {
  const int world = 2;
  const std::vector<int64_t> sizes = {50000, 777};
  const uint32_t steps = 10;
  // applied[rank][bucket]: sum over steps of the hook's result; grads: sum of every rank's input.
  std::vector<std::vector<std::vector<double>>> applied(world);
  std::vector<std::vector<double>> grads(sizes.size()), magnitude(sizes.size());
  for (size_t b = 0; b < sizes.size(); ++b) {
    grads[b].assign(sizes[b], 0.0);
    magnitude[b].assign(sizes[b], 0.0);
  }
  for (uint32_t step = 0; step < steps; ++step) {
    for (int r = 0; r < world; ++r) {
      for (size_t b = 0; b < sizes.size(); ++b) {
        const std::vector<float> g = gradient_like(sizes[b], b, r, step);
        for (int64_t i = 0; i < sizes[b]; ++i) {
          grads[b][i] += g[i];
          magnitude[b][i] += std::fabs(g[i]);
        }
      }
    }
  }
  std::vector<std::shared_ptr<AdaCompCompressor>> compressors(world);
  std::vector<std::vector<std::vector<float>>> last(world);
  run_ranks(world, [&](int rank, Group group) {
    compressors[rank] = std::make_shared<AdaCompCompressor>();
    auto hook = recycle::make_adacomp_hook(group, compressors[rank]);
    applied[rank].resize(sizes.size());
    last[rank].resize(sizes.size());
    for (size_t b = 0; b < sizes.size(); ++b) applied[rank][b].assign(sizes[b], 0.0);
    for (uint32_t step = 0; step < steps; ++step) {
      for (size_t b = 0; b < sizes.size(); ++b) {
        torch::Tensor grad = to_tensor(gradient_like(sizes[b], b, rank, step));
        hook->reduce(static_cast<int64_t>(b), grad);
        const float* out = grad.data_ptr<float>();
        for (int64_t i = 0; i < sizes[b]; ++i) applied[rank][b][i] += out[i];
        last[rank][b].assign(out, out + sizes[b]);
      }
    }
  });
  for (size_t b = 0; b < sizes.size(); ++b) {
    EXPECT_EQ(last[0][b], last[1][b]) << "bucket " << b;  // bit-identical on both ranks
    EXPECT_EQ(applied[0][b], applied[1][b]) << "bucket " << b;
    const std::vector<float>& r0 = *compressors[0]->residue(b);
    const std::vector<float>& r1 = *compressors[1]->residue(b);
    int64_t nonzero = 0;
    for (int64_t i = 0; i < sizes[b]; ++i) {
      // world x mean applied + what is still in the residues = every gradient ever given.
      const double total = world * applied[0][b][i] + r0[i] + r1[i];
      ASSERT_NEAR(total, grads[b][i], 1e-5 * magnitude[b][i]) << b << " " << i;
      nonzero += applied[0][b][i] != 0.0;
    }
    EXPECT_GT(nonzero, 0);
  }
}

// Runs `steps` steps of buckets `sizes` of gradient_like data through topk hooks with `bin` on
// two ranks; returns rank 0's compression ratio (both ranks send the same padded sizes).
double topk_ratio_on_gradient_like(int64_t bin, const std::vector<int64_t>& sizes, uint32_t steps) {
  std::vector<double> ratios(2);
  std::vector<int64_t> sent(2);
  run_ranks(2, [&](int rank, Group group) {
    auto hook = recycle::make_adacomp_hook(group, std::make_shared<AdaCompCompressor>(bin));
    for (uint32_t step = 0; step < steps; ++step) {
      for (size_t b = 0; b < sizes.size(); ++b) {
        torch::Tensor grad = to_tensor(gradient_like(sizes[b], b, rank, step));
        hook->reduce(static_cast<int64_t>(b), grad);
      }
    }
    ratios[rank] = ratio(*hook);
    sent[rank] = hook->bytes_sent();
  });
  EXPECT_EQ(sent[0], sent[1]);
  return ratios[0];
}

TEST(CommHook, TopkCompressesGradientLikeBucketsAtLeastFortyTimes) {
  const std::vector<int64_t> sizes = {262144, 131072, 4099};
  const double r = topk_ratio_on_gradient_like(recycle::kAdaCompDefaultBin, sizes, 8);
  std::printf("topk on heavy-tailed gradient-like buckets (%lld + %lld + %lld floats, 8 steps, "
              "2 ranks, bin %lld): compression ratio %.1fx\n",
              static_cast<long long>(sizes[0]), static_cast<long long>(sizes[1]),
              static_cast<long long>(sizes[2]), static_cast<long long>(recycle::kAdaCompDefaultBin),
              r);
  EXPECT_GE(r, 40.0);
}

// A ResNet-18 head (width 16, the last 4 blocks and the classifier, 0.66 M parameters) trained
// data-parallel on two ranks for a few SGD steps on a learnable synthetic task over
// prefix-shaped inputs; its gradients, in 1 MiB buckets, go through `hook_name`. Returns rank 0's
// compression ratio and the last steps' mean loss.
struct HeadRun {
  double ratio = 0;         // over every step
  double later_ratio = 0;   // over the second half of the steps
  double loss = 0;          // mean loss of the last 5 steps
  std::vector<float> params0, params1;  // every parameter, flat, per rank
};

HeadRun train_head_two_ranks(const std::string& hook_name, int steps) {
  const int world = 2;
  const int64_t per_rank = 8, classes = 5;
  std::vector<recycle::SplitModel> replicas;
  torch::Tensor x, y;
  {
    torch::NoGradGuard no_grad;
    for (int r = 0; r < world; ++r) {
      torch::manual_seed(11);  // same initial weights on every rank
      recycle::BlockModel model = recycle::make_encoder("resnet18:width=16", classes);
      replicas.push_back(recycle::split_block_model(model, 4));
    }
    torch::manual_seed(12);
    const torch::Tensor images = torch::randn({1, 1, 28, 28});
    const auto shape = replicas[0].prefix->forward(images).sizes().vec();
    std::vector<int64_t> data_shape = shape;
    data_shape[0] = 256;
    x = torch::randn(data_shape);
    const torch::Tensor teacher = torch::randn({data_shape[1], classes});
    y = x.mean({2, 3}).matmul(teacher).argmax(1);
  }
  HeadRun result;
  std::vector<double> losses(world);
  std::vector<double> ratios(world), later_ratios(world);
  std::vector<std::vector<float>> params(world);
  run_ranks(world, [&](int rank, Group group) {
    recycle::BlockStack head = replicas[rank].head;
    head->train();
    std::vector<torch::Tensor> ps = head->parameters();
    auto hook = recycle::make_comm_hook(recycle::parse_grad_compression(hook_name), group);
    const int64_t cap = (1 << 20) / 4;  // 1 MiB buckets, filled from the last parameter back
    double loss_sum = 0;
    int loss_count = 0;
    int64_t half_sent = 0, half_fp32 = 0;
    for (int step = 0; step < steps; ++step) {
      if (step == steps / 2) {
        half_sent = hook->bytes_sent();
        half_fp32 = hook->fp32_bytes();
      }
      const int64_t start = (step * world * per_rank + rank * per_rank) % x.size(0);
      head->zero_grad();
      torch::Tensor loss = torch::nn::functional::cross_entropy(
          head->forward(x.narrow(0, start, per_rank)), y.narrow(0, start, per_rank));
      loss.backward();
      if (step >= steps - 5) {
        loss_sum += loss.item<double>();
        ++loss_count;
      }
      std::vector<torch::Tensor> flat;
      for (auto it = ps.rbegin(); it != ps.rend(); ++it) flat.push_back(it->grad().reshape(-1));
      torch::Tensor all = torch::cat(flat);
      for (int64_t b = 0, off = 0; off < all.numel(); ++b, off += cap) {
        torch::Tensor bucket = all.narrow(0, off, std::min(cap, all.numel() - off)).contiguous();
        hook->reduce(b, bucket);
        all.narrow(0, off, bucket.numel()).copy_(bucket);
      }
      torch::NoGradGuard no_grad;
      int64_t off = 0;
      for (auto it = ps.rbegin(); it != ps.rend(); ++it) {
        it->sub_(all.narrow(0, off, it->numel()).view_as(*it), 0.05);
        off += it->numel();
      }
    }
    losses[rank] = loss_sum / loss_count;
    ratios[rank] = ratio(*hook);
    later_ratios[rank] = static_cast<double>(hook->fp32_bytes() - half_fp32) /
                         static_cast<double>(hook->bytes_sent() - half_sent);
    std::vector<torch::Tensor> flat;
    for (const torch::Tensor& p : ps) flat.push_back(p.detach().reshape(-1));
    torch::Tensor all = torch::cat(flat).contiguous();
    params[rank].assign(all.data_ptr<float>(), all.data_ptr<float>() + all.numel());
  });
  result.ratio = ratios[0];
  result.later_ratio = later_ratios[0];
  result.loss = losses[0];
  result.params0 = std::move(params[0]);
  result.params1 = std::move(params[1]);
  return result;
}

TEST(CommHook, TopkOnAResNetHeadsGradientsRanksStayInStep) {
  const int steps = 30;
  const HeadRun run = train_head_two_ranks("topk", steps);
  std::printf("topk on a width-16 ResNet-18 head's gradients (%zu parameters, 1 MiB buckets, "
              "%d SGD steps, 2 ranks x 8 samples): compression ratio %.1fx (steps %d-%d: %.1fx), "
              "loss %.3f\n",
              run.params0.size(), steps, run.ratio, steps / 2 + 1, steps, run.later_ratio,
              run.loss);
  EXPECT_EQ(run.params0, run.params1);  // every rank applied the same update
  EXPECT_GE(run.later_ratio, 40.0);
  EXPECT_TRUE(std::isfinite(run.loss));
}

}  // namespace
