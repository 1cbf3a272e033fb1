// Seconds since a steady_clock time point, and a call timed into a running total: how the
// engine's reports time their stages.
#pragma once

#include <chrono>

namespace recycle {

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Calls f(), adds its wall time to *total (also when it throws), returns what f returns.
template <typename F>
decltype(auto) timed(double* total, F&& f) {
  struct Add {
    double* total;
    std::chrono::steady_clock::time_point start;
    ~Add() { *total += seconds_since(start); }
  } add{total, std::chrono::steady_clock::now()};
  return f();
}

}  // namespace recycle
