// Small helpers shared by the micro benchmarks: failure reporting, a temporary directory
// that removes itself, deterministic random data, and the thread count of the LibTorch
// benchmarks. The keyer, codec and store benchmarks run single-threaded.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace recycle::bench {

// Benchmarks that failed (see fail()); bench_main.cc exits 1 when it is not 0.
inline std::atomic<int> g_failures{0};

// Marks the running benchmark as failed: Google Benchmark prints the message in its row and
// skips the rest of the benchmark, and the binary exits non-zero at the end.
inline void fail(benchmark::State& state, const std::string& message) {
  ++g_failures;
  state.SkipWithError(message.c_str());
}

// A fresh directory under $TMPDIR (or /tmp), made by mkdtemp and removed with everything in
// it on destruction.
class TempDir {
 public:
  explicit TempDir(const char* prefix = "recycle-micro-") {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + prefix + "XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// The threads a LibTorch benchmark runs on: 2 (as the engine's measurements on these 2-core
// machines), or $RECYCLE_BENCH_THREADS when it is set to a positive number.
inline int bench_threads() {
  const char* env = std::getenv("RECYCLE_BENCH_THREADS");
  const int n = env != nullptr ? std::atoi(env) : 0;
  return n > 0 ? n : 2;
}

// n random bytes (fixed seed).
inline std::vector<uint8_t> random_bytes(size_t n, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

// n activation-like floats: N(0,1) passed through ReLU, so about half are 0 (fixed seed).
inline std::vector<float> random_activations(size_t n, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> out(n);
  for (auto& v : out) v = std::max(0.0f, normal(rng));
  return out;
}

}  // namespace recycle::bench
