// Gradient-like test data for the communication hooks' tests (tests/distributed/
// comm_hook_test.cc) and the experiments behind their defaults (bench/hook_experiments.cc).
#pragma once

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace recycle::testing {

// Gradient-like floats: segments of 1,000 elements (a "parameter" each) with scales spread over
// three decades, Student-t noise (3 degrees of freedom: heavy tails) drawn per (seed, step),
// plus a mean that persists from step to step (drawn from `bucket` only, the same on every rank).
inline std::vector<float> gradient_like(int64_t n, uint32_t bucket, uint32_t seed, uint32_t step) {
  std::mt19937 fixed(1000 + bucket);
  std::mt19937 noise(seed * 7919u + step * 104729u + bucket);
  std::uniform_real_distribution<float> decades(-3.0f, 0.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::chi_squared_distribution<float> chi2(3.0f);
  std::vector<float> g(static_cast<size_t>(n));
  float scale = 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 1000 == 0) scale = std::pow(10.0f, decades(fixed));
    const float mean = 0.3f * normal(fixed);
    const float t = normal(noise) / std::sqrt(chi2(noise) / 3.0f);
    g[i] = scale * (mean + t);
  }
  return g;
}

inline torch::Tensor to_tensor(const std::vector<float>& v) {
  return torch::from_blob(const_cast<float*>(v.data()), {static_cast<int64_t>(v.size())},
                          torch::kFloat32)
      .clone();
}

}  // namespace recycle::testing
