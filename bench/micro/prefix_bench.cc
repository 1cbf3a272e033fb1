// Micro benchmarks of the frozen prefix's forward as recycle-build runs it: width-16 ResNet-18
// (the default encoder), the 50% split (4 of 8 blocks), a batch of 256 images [256, 1, 28, 28],
// 2 LibTorch threads (override with RECYCLE_BENCH_THREADS=N):
//   prefix/plain/r50                 the prefix's modules in eval mode under NoGradGuard (what
//                                    recycle-build ran before the inference prefix)
//   prefix/folded_contiguous/r50     InferencePrefix (batch norms folded, InferenceMode), NCHW
//   prefix/folded_channels_last/r50  the same in channels-last
//   prefix/folded_mkldnn/r50         the same in oneDNN's blocked layout (recycle-build's default)
// Items/s are samples/s. Real time.
#include <benchmark/benchmark.h>

#include <torch/torch.h>

#include <cstdint>

#include "bench/micro/bench_util.h"
#include "engine/models/block_model.h"
#include "engine/models/encoder_registry.h"
#include "engine/models/inference_prefix.h"
#include "engine/models/split_model.h"

namespace {

constexpr int64_t kBatch = 256;
constexpr int64_t kPrefixBlocks = 4;

void setup() {
  torch::set_num_threads(recycle::bench::bench_threads());
  torch::manual_seed(0);
}

void BM_PlainPrefix(benchmark::State& state) {
  setup();
  recycle::BlockModel model = recycle::make_encoder(recycle::default_encoder_name(), 10);
  recycle::SplitModel split = recycle::split_block_model(model, kPrefixBlocks);
  const torch::Tensor x = torch::randn({kBatch, 1, 28, 28});
  for (auto _ : state) {
    torch::NoGradGuard no_grad;
    benchmark::DoNotOptimize(split.prefix->forward(x).contiguous());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_PlainPrefix)->Name("prefix/plain/r50")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(2.0);

void BM_FoldedPrefix(benchmark::State& state, recycle::PrefixLayout layout) {
  setup();
  recycle::BlockModel model = recycle::make_encoder(recycle::default_encoder_name(), 10);
  recycle::SplitModel split = recycle::split_block_model(model, kPrefixBlocks);
  const recycle::InferencePrefix prefix(model, kPrefixBlocks, layout);
  const torch::Tensor x = torch::randn({kBatch, 1, 28, 28});
  for (auto _ : state) benchmark::DoNotOptimize(prefix.forward(x));
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK_CAPTURE(BM_FoldedPrefix, contiguous, recycle::PrefixLayout::kContiguous)
    ->Name("prefix/folded_contiguous/r50")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_FoldedPrefix, channels_last, recycle::PrefixLayout::kChannelsLast)
    ->Name("prefix/folded_channels_last/r50")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_FoldedPrefix, mkldnn, recycle::PrefixLayout::kMkldnn)
    ->Name("prefix/folded_mkldnn/r50")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(2.0);

}  // namespace
