// How close the head's convolutions run to what these cores can compute at all, in GFLOP/s
// (the counter "GFLOP/s", summed over the threads):
//   cpu/fma_peak/avx512, /avx2    independent fp32 fused multiply-adds in registers on each of
//                                 2 threads ($RECYCLE_BENCH_THREADS): the cores' fp32 peak. The
//                                 AVX-512 row is skipped on a CPU without AVX-512F; neither is
//                                 built off x86.
//   conv/head/<shape>             one convolution of the head at the 50% split on a batch of 128,
//                                 channels last, as a training step runs it: forward, then the
//                                 backward for the weights and for the input, with LibTorch's 2
//                                 threads.
//   conv/head/all_of_a_step_r50   the 10 convolutions of one head step in turn (no input
//                                 gradient for the two that read the cached activations): what
//                                 of train_step/head_from_cache/r50 is convolution.
// A convolution's FLOPs count only the kernel taps inside its input: 3 (2 without the input's
// gradient) x 2 x N x Cout x Cin x taps(H) x taps(W), taps(H) the sum over the output rows of
// the kernel rows not on the zero padding. A dense count (K x K x Hout x Wout) counts 1.44x as
// many on the 4x4 maps, and gave the 128-channel layer a rate above the FMA peak: oneDNN skips
// work on the padding. docs/performance.md compares the two measures.
#include <benchmark/benchmark.h>

#include <torch/torch.h>

#if defined(__x86_64__) || defined(__i386__)
#define RECYCLE_X86 1
#include <immintrin.h>
#endif

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bench/micro/bench_util.h"

namespace {

using recycle::bench::bench_threads;

constexpr int64_t kBatch = 128;

void set_gflops(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops_per_iteration * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}

#ifdef RECYCLE_X86
constexpr int kFmaSteps = 4096;  // rounds of kChains FMAs per benchmark iteration
constexpr int kChains = 12;      // independent accumulators: more than latency x ports

// Read through a volatile so that the compiler cannot fold the FMA chains into constants.
volatile float g_seed = 1.0f;

// The sum of a vector register's lanes (keeps the chains' results alive).
template <typename Vector>
float lane_sum(const Vector& v) {
  float lanes[sizeof(Vector) / sizeof(float)];
  std::memcpy(lanes, &v, sizeof(lanes));
  float total = 0;
  for (float x : lanes) total += x;
  return total;
}

__attribute__((target("avx512f"))) float fma_chains_avx512() {
  __m512 acc[kChains];
  const float seed = g_seed;
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(seed + 0.001f * static_cast<float>(c));
  const __m512 a = _mm512_set1_ps(seed * 0.999999f);
  const __m512 b = _mm512_set1_ps(seed * 1e-7f);
  for (int s = 0; s < kFmaSteps; ++s) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  return lane_sum(sum);
}

__attribute__((target("avx2,fma"))) float fma_chains_avx2() {
  __m256 acc[kChains];
  const float seed = g_seed;
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(seed + 0.001f * static_cast<float>(c));
  const __m256 a = _mm256_set1_ps(seed * 0.999999f);
  const __m256 b = _mm256_set1_ps(seed * 1e-7f);
  for (int s = 0; s < kFmaSteps; ++s) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  return lane_sum(sum);
}

void BM_FmaPeakAvx512(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) {
    state.SkipWithError("this CPU has no AVX-512F");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(fma_chains_avx512());
  set_gflops(state, 2.0 * 16 * kChains * kFmaSteps);
}
BENCHMARK(BM_FmaPeakAvx512)->Name("cpu/fma_peak/avx512")->Threads(bench_threads())
    ->UseRealTime()->MinTime(1.0);

void BM_FmaPeakAvx2(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    state.SkipWithError("this CPU has no AVX2 with FMA");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(fma_chains_avx2());
  set_gflops(state, 2.0 * 8 * kChains * kFmaSteps);
}
BENCHMARK(BM_FmaPeakAvx2)->Name("cpu/fma_peak/avx2")->Threads(bench_threads())
    ->UseRealTime()->MinTime(1.0);

#endif  // RECYCLE_X86

// Of the kernel's k positions along one dimension of size `in` (stride s, padding k / 2), the
// ones inside the input, summed over the output positions.
int64_t taps_inside(int64_t in, int64_t k, int64_t s) {
  const int64_t pad = k / 2;
  const int64_t out = (in + 2 * pad - k) / s + 1;
  int64_t taps = 0;
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < k; ++i) {
      const int64_t at = o * s - pad + i;
      taps += at >= 0 && at < in ? 1 : 0;
    }
  }
  return taps;
}

// One convolution: input [kBatch, cin, hw, hw], cout filters k x k, stride s, padding k / 2,
// no bias (as in the encoder). input_grad: its backward computes the input's gradient too
// (every layer of the head but those that read the cached activations).
struct ConvLayer {
  int64_t cin, cout, hw, k, s;
  bool input_grad = true;
};

// The head at 0.5 (blocks 5-8 of the width-16 ResNet-18) on [32, 14, 14] activations, in the
// order a step runs them: block 5's two 3x3 convolutions and 1x1 shortcut (those on the cached
// input need no input gradient), block 6's two, block 7's three, block 8's two.
const std::vector<ConvLayer>& head_layers() {
  static const std::vector<ConvLayer> layers = {
      {32, 64, 14, 3, 2, false}, {64, 64, 7, 3, 1},  {32, 64, 14, 1, 2, false},
      {64, 64, 7, 3, 1},         {64, 64, 7, 3, 1},  {64, 128, 7, 3, 2},
      {128, 128, 4, 3, 1},       {64, 128, 7, 1, 2}, {128, 128, 4, 3, 1},
      {128, 128, 4, 3, 1}};
  return layers;
}

// Runs `layers` forward and backward, each on its own random input, channels last.
void BM_HeadConvs(benchmark::State& state, std::vector<ConvLayer> layers) {
  torch::set_num_threads(bench_threads());
  torch::manual_seed(0);
  const auto cl = torch::MemoryFormat::ChannelsLast;
  struct Run {
    torch::Tensor x, w, grad;
    torch::nn::functional::Conv2dFuncOptions opts;
  };
  std::vector<Run> runs;
  double flops = 0;
  for (const ConvLayer& l : layers) {
    Run r{torch::randn({kBatch, l.cin, l.hw, l.hw}).contiguous(cl).requires_grad_(l.input_grad),
          (0.1 * torch::randn({l.cout, l.cin, l.k, l.k})).contiguous(cl).requires_grad_(),
          torch::Tensor(),
          torch::nn::functional::Conv2dFuncOptions().stride(l.s).padding(l.k / 2)};
    r.grad = torch::randn(torch::nn::functional::conv2d(r.x.detach(), r.w.detach(), r.opts).sizes())
                 .contiguous(cl);
    runs.push_back(std::move(r));
    const int64_t taps = taps_inside(l.hw, l.k, l.s);
    flops += (l.input_grad ? 3 : 2) * 2.0 * static_cast<double>(kBatch * l.cout * l.cin * taps * taps);
  }
  for (auto _ : state) {
    for (Run& r : runs) {
      torch::nn::functional::conv2d(r.x, r.w, r.opts).backward(r.grad);
      if (r.x.requires_grad()) r.x.mutable_grad().reset();
      r.w.mutable_grad().reset();
    }
  }
  set_gflops(state, flops);
}
BENCHMARK_CAPTURE(BM_HeadConvs, step, head_layers())->Name("conv/head/all_of_a_step_r50")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_HeadConvs, 32to64_3x3_s2, {{32, 64, 14, 3, 2}})
    ->Name("conv/head/32to64_3x3_s2_14x14")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(1.0);
BENCHMARK_CAPTURE(BM_HeadConvs, 64to64_3x3, {{64, 64, 7, 3, 1}})->Name("conv/head/64to64_3x3_7x7")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(1.0);
BENCHMARK_CAPTURE(BM_HeadConvs, 64to128_3x3_s2, {{64, 128, 7, 3, 2}})
    ->Name("conv/head/64to128_3x3_s2_7x7")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(1.0);
BENCHMARK_CAPTURE(BM_HeadConvs, 128to128_3x3, {{128, 128, 4, 3, 1}})
    ->Name("conv/head/128to128_3x3_4x4")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(1.0);
BENCHMARK_CAPTURE(BM_HeadConvs, 32to64_1x1_s2, {{32, 64, 14, 1, 2}})
    ->Name("conv/head/32to64_1x1_s2_14x14")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(1.0);
BENCHMARK_CAPTURE(BM_HeadConvs, 64to128_1x1_s2, {{64, 128, 7, 1, 2}})
    ->Name("conv/head/64to128_1x1_s2_7x7")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(1.0);

}  // namespace
