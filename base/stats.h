// Small statistics over timings: the median of a list of seconds, used by the training job
// (samples per second from the median epoch) and by recycle-bench (median epoch and run).
// Header-only, no dependencies beyond the standard library, so the torch-free bench links
// recycle_base for it without pulling in LibTorch. Pure functions; thread safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace recycle {

// The median of `v` (the mean of the two middle values when the count is even); 0 when `v` is
// empty. Takes `v` by value and sorts the copy.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace recycle
