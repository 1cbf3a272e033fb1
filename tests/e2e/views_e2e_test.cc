// Caches of augmented views through the real tools: recycle-build --augment --views K killed
// with SIGKILL resumes to the bytes of an uninterrupted build; two processes (--nproc 2) build
// the views of one; recycle-inspect verifies them and reports the split's views; recycle-train
// trains from them and says how many views it drew from.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "tests/precompute/cache_contents.h"
#include "tests/tool_runner.h"

namespace {

using recycle::testing::describe;
using recycle::testing::read_cache;
using recycle::testing::have_fashion_mnist;
using recycle::testing::TempDir;
using recycle::testing::ToolRun;

constexpr const char* kViews = " --augment hflip,crop=2,rotate=10 --views 3";

std::vector<std::string> words(const std::string& args) {
  std::vector<std::string> out;
  std::istringstream in(args);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

std::string build_args(const std::string& cache, int limit, const std::string& split = "train") {
  return "--data fashion-mnist --split " + split + " --classes 0-1 --limit " +
         std::to_string(limit) +
         " --model resnet18 --width 8 --recycle 0.5 --batch 48 --threads 1 --json --cache " + cache;
}

TEST(ViewsTools, AKilledBuildOfViewsResumesToTheBytesOfOneUninterrupted) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string whole = dir.file("whole"), killed = dir.file("killed");
  const ToolRun one = recycle::testing::run_tool(dir, "recycle-build",
                                                 build_args(whole, 6000) + kViews);
  ASSERT_EQ(one.code, 0) << describe(one);
  EXPECT_EQ(one.last.value("views", 0), 3);
  const int64_t records = one.last.value("records", int64_t{0});
  EXPECT_EQ(records, one.last.value("unique", int64_t{0}) * 3);
  // Killed at a few moments of its work (a build of these 18,000 records took 5.2 s with one
  // thread beside another busy process on 2 cores); each rerun goes on from what the kill left
  // (records written since the last memtable flush are lost and computed again).
  int killed_midway = 0;
  for (int round = 0; round < 3; ++round) {
    const pid_t pid = recycle::testing::spawn_tool("recycle-build",
                                                   words(build_args(killed, 6000) + kViews));
    std::this_thread::sleep_for(std::chrono::milliseconds(1000 + 1000 * round));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    killed_midway += WIFSIGNALED(status) ? 1 : 0;
  }
  const ToolRun rest = recycle::testing::run_tool(dir, "recycle-build",
                                                  build_args(killed, 6000) + kViews);
  ASSERT_EQ(rest.code, 0) << describe(rest);
  std::cout << "views kill test: " << killed_midway << " of 3 builds killed midway; the rerun "
            << "computed " << rest.last.value("computed", -1) << " of " << records << " records"
            << std::endl;
  const auto a = read_cache(whole), b = read_cache(killed);
  EXPECT_EQ(a.records.size(), static_cast<size_t>(records));
  EXPECT_TRUE(a.records == b.records) << "record bytes differ";
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(a.manifest.to_json_string(), b.manifest.to_json_string());
}

TEST(ViewsTools, TwoProcessesBuildTheViewsOfOneAndTheyVerifyAndTrain) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string one = dir.file("one"), two = dir.file("two");
  ASSERT_EQ(recycle::testing::run_tool(dir, "recycle-build", build_args(one, 150) + kViews).code,
            0);
  const ToolRun d = recycle::testing::run_tool(dir, "recycle-build",
                                               build_args(two, 150) + kViews + " --nproc 2");
  ASSERT_EQ(d.code, 0) << describe(d);
  EXPECT_EQ(d.last.value("ranks", 0), 2);
  const auto a = read_cache(one), b = read_cache(two);
  EXPECT_EQ(a.records.size(), 450u);
  EXPECT_TRUE(a.records == b.records) << "record bytes differ";
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(a.manifest.to_json_string(), b.manifest.to_json_string());

  // A plain test split beside the views, then verify and train.
  ASSERT_EQ(recycle::testing::run_tool(dir, "recycle-build", build_args(two, 60, "test")).code, 0);
  const ToolRun v =
      recycle::testing::run_tool(dir, "recycle-inspect", "--cache " + two + " --verify");
  ASSERT_EQ(v.code, 0) << describe(v);
  EXPECT_NE(v.out.find("3 views of hflip,crop=2,rotate=10"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("510 records checked, 0 corrupt"), std::string::npos) << v.out;
  const ToolRun t = recycle::testing::run_tool(dir, "recycle-train",
                                               "--cache " + two + " --epochs 3 --threads 1 --json");
  ASSERT_EQ(t.code, 0) << describe(t);
  EXPECT_EQ(t.last.value("views", 0), 3);
  EXPECT_EQ(t.last.value("test_samples", 0), 60);  // evaluated on the plain test split
  for (const auto& loss : t.last["epoch_loss"]) EXPECT_TRUE(std::isfinite(loss.get<double>()));
  // Another view count on the same split: refused as stale, exit 1, nothing lost.
  const ToolRun stale = recycle::testing::run_tool(
      dir, "recycle-build", build_args(two, 150) + " --augment hflip,crop=2,rotate=10 --views 4");
  EXPECT_EQ(stale.code, 1) << describe(stale);
  EXPECT_NE(stale.err.find("the cache has 3 views"), std::string::npos) << stale.err;
  EXPECT_EQ(recycle::testing::count_lines(stale.err), 1) << stale.err;
  EXPECT_EQ(read_cache(two).records.size(), 510u);
  // Online augmentation from raw data trains too.
  const ToolRun online = recycle::testing::run_tool(
      dir, "recycle-train",
      "--data fashion-mnist --classes 0-1 --limit 150 --model resnet18 --width 8 --recycle 0.5 "
      "--no-cache --augment hflip,crop=2 --epochs 2 --threads 1 --eval-split none --json");
  ASSERT_EQ(online.code, 0) << describe(online);
  const ToolRun bad = recycle::testing::run_tool(
      dir, "recycle-train", "--cache " + two + " --augment hflip --epochs 1");
  EXPECT_EQ(bad.code, 2) << describe(bad);
}

}  // namespace
