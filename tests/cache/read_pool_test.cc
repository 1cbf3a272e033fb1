// Tests for cache/read_pool.h: fork-join over a few threads, from many callers at once, and in
// a forked child (which has none of the pool's threads).
#include "cache/read_pool.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace {

TEST(ReadPool, RunsEveryTaskOnceAndReturnsWhenAllHave) {
  recycle::ReadPool pool(4);
  EXPECT_EQ(pool.threads(), 4);
  for (int n : {0, 1, 3, 4, 37}) {
    std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
    std::set<std::thread::id> threads;
    std::mutex mu;
    pool.run(n, [&](int i) {
      runs[static_cast<size_t>(i)]++;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a read's wait
      std::lock_guard<std::mutex> lock(mu);
      threads.insert(std::this_thread::get_id());
    });
    for (int i = 0; i < n; ++i) EXPECT_EQ(runs[static_cast<size_t>(i)].load(), 1) << n << " " << i;
    EXPECT_LE(threads.size(), 4u);
    // 37 tasks of 2 ms: the calling thread alone would have run them all; it did not.
    if (n == 37) {
      EXPECT_GT(threads.size(), 1u);
    }
  }
}

TEST(ReadPool, CallersAtOnceShareItsThreads) {
  recycle::ReadPool pool(3);
  std::atomic<int> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 6; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 50; ++round) {
        std::atomic<int> mine{0};
        pool.run(9, [&](int) {
          mine++;
          total++;
        });
        EXPECT_EQ(mine.load(), 9);  // run() returned after every task of its own
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 6 * 50 * 9);
}

TEST(ReadPool, AForkedChildRunsTheTasksOnItsOwnThread) {
  auto pool = std::make_unique<recycle::ReadPool>(4);
  pool->run(8, [](int) {});  // the threads have started
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child has only this thread: run() must not wait for the parent's.
    const std::thread::id me = std::this_thread::get_id();
    int here = 0;
    pool->run(8, [&](int) { here += std::this_thread::get_id() == me; });
    pool.reset();  // must not wait for (or join) the parent's threads
    _exit(here == 8 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
