// Micro benchmarks of one SGD training step (zero_grad, forward, cross_entropy, backward,
// step) on a batch of 128, width-16 ResNet-18 (the default encoder), 5 classes, 2 LibTorch threads
// (override with RECYCLE_BENCH_THREADS=N), the trained modules and their input channels last
// (recycle-train's default --memory-format):
//   train_step/head_from_cache   the head at the 50% split (4 of 8 blocks frozen) on cached
//                                activations [128, 32, 14, 14]: what recycle-train does per step
//   train_step/frozen_prefix     the frozen prefix recomputed under NoGradGuard, then the head
//                                step, on images [128, 1, 28, 28] (recycle-train --no-cache)
//   train_step/full_model        full fine-tuning of all 8 blocks on [128, 1, 28, 28]
// Items/s are samples/s; bytes/s count the float input of the step. Real time.
#include <benchmark/benchmark.h>

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "bench/micro/bench_util.h"
#include "engine/models/block_model.h"
#include "engine/models/encoder_registry.h"
#include "engine/models/memory_format.h"
#include "engine/models/split_model.h"

namespace {

constexpr int64_t kBatch = 128;
constexpr int64_t kClasses = 5;
void setup_torch() {
  torch::set_num_threads(recycle::bench::bench_threads());
  torch::manual_seed(0);
}

torch::optim::SGD make_sgd(const std::vector<torch::Tensor>& params) {
  return torch::optim::SGD(params, torch::optim::SGDOptions(0.05).momentum(0.9));
}

constexpr c10::MemoryFormat kFormat = c10::MemoryFormat::ChannelsLast;

// Random values of `shape` in kFormat.
torch::Tensor random_input(const std::vector<int64_t>& shape) {
  return recycle::in_memory_format(torch::randn(shape), kFormat);
}

void finish(benchmark::State& state, const torch::Tensor& x) {
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.SetBytesProcessed(state.iterations() * x.numel() * static_cast<int64_t>(sizeof(float)));
}

void BM_HeadFromCache(benchmark::State& state) {
  setup_torch();
  recycle::BlockModel model = recycle::make_encoder(recycle::default_encoder_name(), kClasses);
  recycle::SplitModel split = recycle::split_block_model(model, 4);
  recycle::set_memory_format(*split.head, kFormat);
  auto opt = make_sgd(split.head->parameters());
  const torch::Tensor x = random_input({kBatch, 32, 14, 14});
  const torch::Tensor y = torch::randint(0, kClasses, {kBatch}, torch::kInt64);
  for (auto _ : state) {
    opt.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(split.head->forward(x), y);
    loss.backward();
    opt.step();
  }
  finish(state, x);
}
BENCHMARK(BM_HeadFromCache)->Name("train_step/head_from_cache/r50")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(2.0);

void BM_FrozenPrefix(benchmark::State& state) {
  setup_torch();
  recycle::BlockModel model = recycle::make_encoder(recycle::default_encoder_name(), kClasses);
  recycle::SplitModel split = recycle::split_block_model(model, 4);
  recycle::set_memory_format(*split.prefix, kFormat);
  recycle::set_memory_format(*split.head, kFormat);
  auto opt = make_sgd(split.head->parameters());
  const torch::Tensor x = random_input({kBatch, 1, 28, 28});
  const torch::Tensor y = torch::randint(0, kClasses, {kBatch}, torch::kInt64);
  for (auto _ : state) {
    torch::Tensor a;
    {
      torch::NoGradGuard no_grad;
      a = split.prefix->forward(x);
    }
    opt.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(split.head->forward(a), y);
    loss.backward();
    opt.step();
  }
  finish(state, x);
}
BENCHMARK(BM_FrozenPrefix)->Name("train_step/frozen_prefix/r50")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(2.0);

void BM_FullModel(benchmark::State& state) {
  setup_torch();
  recycle::BlockModel model = recycle::make_encoder(recycle::default_encoder_name(), kClasses);
  recycle::BlockStack stack = model.as_stack();
  stack->train();
  recycle::set_memory_format(*stack, kFormat);
  auto opt = make_sgd(stack->parameters());
  const torch::Tensor x = random_input({kBatch, 1, 28, 28});
  const torch::Tensor y = torch::randint(0, kClasses, {kBatch}, torch::kInt64);
  for (auto _ : state) {
    opt.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(stack->forward(x), y);
    loss.backward();
    opt.step();
  }
  finish(state, x);
}
BENCHMARK(BM_FullModel)->Name("train_step/full_model")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(2.0);

}  // namespace
