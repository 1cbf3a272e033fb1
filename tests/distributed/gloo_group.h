// Runs a function as every rank of an in-process Gloo group: one thread per rank, each with its
// own Gloo process group (make_gloo_group) over 127.0.0.1, all sharing one HashStore. For tests of
// what goes over a process group without starting processes.
#pragma once

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "engine/distributed/process_group.h"

namespace recycle::testing {

// Calls body(rank, group) on `world` threads at once and rethrows the first exception.
inline void run_gloo_group(
    int world, const std::function<void(int, c10::intrusive_ptr<c10d::ProcessGroup>)>& body) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank, make_gloo_group(store, rank, world, std::chrono::seconds(30), "127.0.0.1"));
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
