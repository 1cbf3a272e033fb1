// Runs a function as every rank of an in-process Gloo group: one thread per rank, each with its
// own c10d::ProcessGroupGloo over 127.0.0.1, all sharing one HashStore. For tests of what goes
// over a process group without starting processes.
#pragma once

#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO  // ProcessGroupGloo.hpp declares nothing without it
#endif
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace recycle::testing {

// Calls body(rank, group) on `world` threads at once and rethrows the first exception.
inline void run_gloo_group(int world,
                           const std::function<void(int, c10::intrusive_ptr<c10d::ProcessGroup>)>& body) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(30));
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
        auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
        body(rank, group);
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace recycle::testing
