// Concurrency: two builds on one cache, a build beside training, --rebuild beside training and
// beside a build. Whoever cannot go on exits 1 with one line naming the lock; nobody trains
// on part of a split; no cache is damaged; nothing is left beside the cache.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "cache/cache_dir.h"
#include "tests/tool_runner.h"

namespace {

namespace fs = std::filesystem;
using recycle::testing::describe;
using recycle::testing::have_fashion_mnist;
using recycle::testing::read_file;
using recycle::testing::spawn_tool;
using recycle::testing::TempDir;
using recycle::testing::ToolRun;
using recycle::testing::wait_tool;

std::vector<std::string> build_args(const std::string& cache, const std::string& split, int limit) {
  return {"--data", "fashion-mnist", "--split", split, "--limit", std::to_string(limit),
          "--width", "4", "--recycle", "0.5", "--cache", cache};
}

struct Background {
  pid_t pid;
  std::string out, err;
};

Background start(const TempDir& dir, const std::string& tool, const std::vector<std::string>& args,
                 const std::string& tag) {
  Background b{0, dir.file(tag + ".out"), dir.file(tag + ".err")};
  b.pid = spawn_tool(tool, args, b.out, b.err);
  return b;
}

bool running(pid_t pid) { return kill(pid, 0) == 0 && waitpid(pid, nullptr, WNOHANG) == 0; }

// A loser's one line names the writer lock.
void expect_lost_to_the_lock(int code, const std::string& err, const std::string& what) {
  EXPECT_EQ(code, 1) << what << ": " << err;
  EXPECT_EQ(recycle::testing::count_lines(err), 1) << what << ": " << err;
  EXPECT_NE(err.find("writer lock"), std::string::npos) << what << ": " << err;
}

void expect_whole(const TempDir& dir, const std::string& cache, const std::string& split,
                  int samples) {
  const ToolRun v =
      recycle::testing::run_tool(dir, "recycle-inspect", "--cache " + cache + " --verify --json");
  ASSERT_EQ(v.code, 0) << describe(v);
  EXPECT_EQ(v.last["corrupt"], 0);
  EXPECT_EQ(v.last["splits"][split]["samples"], samples) << describe(v);
  EXPECT_EQ(v.last["splits"][split]["complete"], true) << describe(v);
  for (const auto& e : fs::directory_iterator(fs::path(cache).parent_path())) {
    EXPECT_EQ(e.path().filename().string().find("recycle-creating"), std::string::npos) << e.path();
  }
}

TEST(Concurrency, TwoBuildsOnOneNewCache) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  int lost = 0;
  for (int trial = 0; trial < 6; ++trial) {
    const std::string cache = dir.file("cache" + std::to_string(trial));
    Background a = start(dir, "recycle-build", build_args(cache, "test", 300), "a");
    Background b = start(dir, "recycle-build", build_args(cache, "test", 300), "b");
    for (Background* x : {&a, &b}) {
      const int code = wait_tool(x->pid);
      if (code != 0) {
        expect_lost_to_the_lock(code, read_file(x->err), "trial " + std::to_string(trial));
        ++lost;
      }
    }
    expect_whole(dir, cache, "test", 300);
  }
  std::cout << "two builds at once: 6 trials, " << lost << " lost to the lock\n";
}

TEST(Concurrency, BuildBesideTraining) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  ASSERT_EQ(wait_tool(spawn_tool("recycle-build", build_args(cache, "test", 200))), 0);
  Background build = start(dir, "recycle-build", build_args(cache, "train", 4000), "build");
  int complete_reads = 0, refused = 0, rounds = 0;
  while (running(build.pid) || rounds == 0) {
    ++rounds;
    // The complete split trains in full while the build writes another.
    ToolRun t = recycle::testing::run_tool(
        dir, "recycle-train",
        "--cache " + cache + " --split test --eval-split none --epochs 1 --json");
    ASSERT_EQ(t.code, 0) << describe(t);
    EXPECT_EQ(t.last["train_samples"], 200);
    ++complete_reads;
    // The split being built is refused, naming the lock, or (once done) read in full.
    t = recycle::testing::run_tool(
        dir, "recycle-train",
        "--cache " + cache + " --split train --eval-split none --epochs 1 --json");
    if (t.code == 0) {
      EXPECT_EQ(t.last["train_samples"], 4000) << describe(t);
    } else {
      expect_lost_to_the_lock(t.code, t.err, "train beside build");
      ++refused;
    }
  }
  EXPECT_EQ(wait_tool(build.pid), 0) << read_file(build.err);
  expect_whole(dir, cache, "train", 4000);
  expect_whole(dir, cache, "test", 200);
  std::cout << "build beside training: " << complete_reads << " trainings on the complete split, "
            << refused << " refused on the split being built\n";
}

TEST(Concurrency, RebuildBesideTrainingAndBesideABuild) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  ASSERT_EQ(wait_tool(spawn_tool("recycle-build", build_args(cache, "test", 1000))), 0);

  // --rebuild while training reads the cache: training keeps the view it opened.
  std::vector<std::string> train = {"--cache", cache, "--split", "test", "--eval-split", "none",
                                    "--epochs", "3", "--json"};
  Background t = start(dir, "recycle-train", train, "train");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<std::string> rebuild = build_args(cache, "test", 1000);
  rebuild.push_back("--rebuild");
  const int rebuilt = wait_tool(spawn_tool("recycle-build", rebuild));
  EXPECT_EQ(rebuilt, 0);
  const int trained = wait_tool(t.pid);
  if (trained == 0) {
    EXPECT_NE(read_file(t.out).find("\"train_samples\":1000"), std::string::npos)
        << read_file(t.out);
  } else {
    expect_lost_to_the_lock(trained, read_file(t.err), "train beside rebuild");
  }
  expect_whole(dir, cache, "test", 1000);

  // --rebuild while a build writes: the rebuild loses and deletes nothing.
  Background build = start(dir, "recycle-build", build_args(cache, "train", 20000), "build");
  for (int i = 0; i < 6000 && recycle::writer_pid(cache) == 0 && running(build.pid); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const ToolRun r = recycle::testing::run_tool(
      dir, "recycle-build", "--data fashion-mnist --split test --limit 1000 --width 4 "
                            "--recycle 0.5 --rebuild --cache " + cache);
  const bool build_was_running = running(build.pid);
  EXPECT_EQ(wait_tool(build.pid), 0) << read_file(build.err);
  if (build_was_running) {
    expect_lost_to_the_lock(r.code, r.err, "rebuild beside build");
    expect_whole(dir, cache, "train", 20000);
  } else {
    std::cout << "the build finished before the rebuild came; the rebuild ran: exit " << r.code
              << "\n";
  }
  expect_whole(dir, cache, "test", 1000);
}

}  // namespace
