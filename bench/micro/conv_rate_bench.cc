// How close the head's convolutions run to what these cores can compute at all, in GFLOP/s
// (the counter "GFLOP/s", summed over the threads):
//   cpu/fma_peak/avx512, /avx2    independent fp32 fused multiply-adds in registers on each of
//                                 2 threads ($RECYCLE_BENCH_THREADS): the cores' fp32 peak. The
//                                 AVX-512 row is skipped on a CPU without AVX-512F.
//   conv/head/<shape>             one convolution of the head at the 50% split on a batch of 128,
//                                 channels last, as a training step runs it: forward, then the
//                                 backward for the weights and for the input, with LibTorch's 2
//                                 threads. FLOPs are 3 x 2 x N x Cout x Hout x Wout x Cin x K x K.
// docs/performance.md compares the two.
#include <benchmark/benchmark.h>

#include <immintrin.h>
#include <torch/torch.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

constexpr int64_t kBatch = 128;
constexpr int kDefaultThreads = 2;
constexpr int kFmaSteps = 4096;  // rounds of kChains FMAs per benchmark iteration
constexpr int kChains = 12;      // independent accumulators: more than latency x ports

// Read through a volatile so that the compiler cannot fold the FMA chains into constants.
volatile float g_seed = 1.0f;

int bench_threads() {
  const char* env = std::getenv("RECYCLE_BENCH_THREADS");
  const int n = env != nullptr ? std::atoi(env) : 0;
  return n > 0 ? n : kDefaultThreads;
}

void set_gflops(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops_per_iteration * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}

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

// One of the head's convolutions: input [kBatch, cin, hw, hw], cout filters k x k, stride s,
// padding k / 2, no bias (as in the encoder), channels last.
void BM_HeadConv(benchmark::State& state, int64_t cin, int64_t cout, int64_t hw, int64_t k,
                 int64_t s) {
  torch::set_num_threads(bench_threads());
  torch::manual_seed(0);
  const auto cl = torch::MemoryFormat::ChannelsLast;
  torch::Tensor x = torch::randn({kBatch, cin, hw, hw}).contiguous(cl).requires_grad_();
  torch::Tensor w = (0.1 * torch::randn({cout, cin, k, k})).contiguous(cl).requires_grad_();
  const auto opts = torch::nn::functional::Conv2dFuncOptions().stride(s).padding(k / 2);
  torch::Tensor probe = torch::nn::functional::conv2d(x.detach(), w.detach(), opts);
  const torch::Tensor grad = torch::randn(probe.sizes()).contiguous(cl);
  for (auto _ : state) {
    torch::Tensor y = torch::nn::functional::conv2d(x, w, opts);
    y.backward(grad);
    x.mutable_grad().reset();
    w.mutable_grad().reset();
  }
  const double macs = static_cast<double>(kBatch * cout * probe.size(2) * probe.size(3) * cin * k * k);
  set_gflops(state, 3 * 2 * macs);
}
// The head at 0.5 (blocks 5-8 of the width-16 ResNet-18) on [32, 14, 14] activations: each
// block's two 3x3 convolutions, and the 1x1 shortcut of blocks 5 and 7.
BENCHMARK_CAPTURE(BM_HeadConv, 32to64_3x3_s2, 32, 64, 14, 3, 2)->Name("conv/head/32to64_3x3_s2_14x14")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(1.0);
BENCHMARK_CAPTURE(BM_HeadConv, 64to64_3x3, 64, 64, 7, 3, 1)->Name("conv/head/64to64_3x3_7x7")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(1.0);
BENCHMARK_CAPTURE(BM_HeadConv, 64to128_3x3_s2, 64, 128, 7, 3, 2)->Name("conv/head/64to128_3x3_s2_7x7")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(1.0);
BENCHMARK_CAPTURE(BM_HeadConv, 128to128_3x3, 128, 128, 4, 3, 1)->Name("conv/head/128to128_3x3_4x4")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(1.0);
BENCHMARK_CAPTURE(BM_HeadConv, 32to64_1x1_s2, 32, 64, 14, 1, 2)->Name("conv/head/32to64_1x1_s2_14x14")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(1.0);
BENCHMARK_CAPTURE(BM_HeadConv, 64to128_1x1_s2, 64, 128, 7, 1, 2)->Name("conv/head/64to128_1x1_s2_7x7")
    ->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(0.3)->MinTime(1.0);

}  // namespace
