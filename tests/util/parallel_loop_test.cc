// parallel_loop: every index once, nothing for an empty range, and a body's exception
// rethrown on the calling thread (an exception leaving an OpenMP region would end the process).
#include "engine/util/parallel_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

TEST(ParallelLoop, RunsEveryIndexOnce) {
  std::vector<std::atomic<int>> runs(1000);
  recycle::parallel_loop(1000, [&](int64_t i) { runs[static_cast<size_t>(i)]++; });
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].load(), 1) << i;
  int calls = 0;
  recycle::parallel_loop(0, [&](int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ParallelLoop, RethrowsABodysExceptionOnTheCallingThread) {
  for (int64_t bad : {0, 37, 999}) {
    try {
      recycle::parallel_loop(1000, [&](int64_t i) {
        if (i == bad) throw std::invalid_argument("sample " + std::to_string(i) + " is bad");
      });
      FAIL() << "no exception for " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), "sample " + std::to_string(bad) + " is bad");
    }
  }
}

}  // namespace
