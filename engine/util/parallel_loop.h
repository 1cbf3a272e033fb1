#pragma once

// An OpenMP loop whose bodies may throw. An exception may not leave an OpenMP region (the
// process ends with std::terminate), so each body's is caught inside the region, the bodies
// not started yet are skipped, and the first exception is rethrown on the calling thread
// once the loop ends. No LibTorch here.

#include <atomic>
#include <cstdint>
#include <exception>

namespace recycle {

// Runs body(i) for every i in [0, n) on OpenMP's threads, statically scheduled.
template <class Body>
void parallel_loop(int64_t n, const Body& body) {
  std::exception_ptr error;
  std::atomic<bool> failed{false};
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    if (failed.load(std::memory_order_relaxed)) continue;
    try {
      body(i);
    } catch (...) {
#pragma omp critical(recycle_parallel_loop)
      if (!error) error = std::current_exception();
      failed.store(true, std::memory_order_relaxed);
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace recycle
