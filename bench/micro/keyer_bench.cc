// Micro benchmarks of the xxh3 keyer (XXH3-128 over dtype, shape and bytes) against memcpy of
// the same bytes: one Fashion-MNIST image (784 bytes), 1 MiB contiguous, and 1 MiB seen through
// a transposed (non-contiguous) view, which the hasher gathers into row-major order first.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "bench/micro/bench_util.h"
#include "keyers/xxh3_keyer.h"
#include "recycle/content_hasher.h"
#include "recycle/keyer.h"

namespace {

constexpr int64_t kImageBytes = 28 * 28;  // one Fashion-MNIST image, uint8
constexpr int64_t kMiB = 1 << 20;

// A square uint8 [side, side] view for `bytes` (784 -> [28, 28], 1 MiB -> [1024, 1024]).
recycle::TensorView uint8_view(const std::vector<uint8_t>& data, int64_t side, bool transposed) {
  recycle::TensorView v;
  v.dtype = "uint8";
  v.shape = {side, side};
  v.strides = transposed ? std::vector<int64_t>{1, side} : std::vector<int64_t>{side, 1};
  v.data = data.data();
  v.element_size = 1;
  return v;
}

int64_t side_for(int64_t bytes) { return bytes == kImageBytes ? 28 : 1024; }

void run_keyer(benchmark::State& state, const recycle::TensorView& view, int64_t bytes) {
  recycle::Xxh3Keyer keyer;
  recycle::KeyInput in;
  in.tensor = &view;
  for (auto _ : state) {
    recycle::Key k = keyer.key(in);
    benchmark::DoNotOptimize(k);
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  state.SetItemsProcessed(state.iterations());
}

// XXH3-128 keyer over a contiguous uint8 view of state.range(0) bytes.
void BM_Xxh3Keyer_Contiguous(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const auto data = recycle::bench::random_bytes(static_cast<size_t>(bytes));
  const recycle::TensorView view = uint8_view(data, side_for(bytes), false);
  run_keyer(state, view, bytes);
}
BENCHMARK(BM_Xxh3Keyer_Contiguous)->Name("keyer/xxh3/contiguous")
    ->Arg(kImageBytes)->Arg(kMiB)->MinTime(0.2);

// The same keyer over the transposed view of a uint8 [1024, 1024] array (strides {1, 1024}):
// the hasher gathers element by element into a buffer, then hashes.
void BM_Xxh3Keyer_Transposed_U8(benchmark::State& state) {
  const auto data = recycle::bench::random_bytes(kMiB);
  const recycle::TensorView view = uint8_view(data, 1024, true);
  run_keyer(state, view, kMiB);
}
BENCHMARK(BM_Xxh3Keyer_Transposed_U8)->Name("keyer/xxh3/transposed_u8")
    ->Arg(kMiB)->MinTime(0.2);

// The transposed view of a float32 [512, 512] array (also 1 MiB): 4-byte elements.
void BM_Xxh3Keyer_Transposed_F32(benchmark::State& state) {
  const auto data = recycle::bench::random_bytes(kMiB);
  recycle::TensorView view;
  view.dtype = "float32";
  view.shape = {512, 512};
  view.strides = {1, 512};
  view.data = data.data();
  view.element_size = 4;
  run_keyer(state, view, kMiB);
}
BENCHMARK(BM_Xxh3Keyer_Transposed_F32)->Name("keyer/xxh3/transposed_f32")
    ->Arg(kMiB)->MinTime(0.2);

// Reference: memcpy of the same number of bytes (source and destination stay in cache for
// 784 bytes; 1 MiB fits in L2/L3 on most machines).
void BM_Memcpy(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const auto src = recycle::bench::random_bytes(static_cast<size_t>(bytes));
  std::vector<uint8_t> dst(static_cast<size_t>(bytes));
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), static_cast<size_t>(bytes));
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(dst.data());
  state.SetBytesProcessed(state.iterations() * bytes);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Memcpy)->Name("keyer/memcpy")
    ->Arg(kImageBytes)->Arg(kMiB)->MinTime(0.2);

}  // namespace
