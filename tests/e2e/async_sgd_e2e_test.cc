// Asynchronous data-parallel training (--sync async) with the real tools: recycle-train
// --nproc on small caches of Fashion-MNIST; a worker killed mid-training, a straggler, sharded
// servers with compressed pushes and bounded staleness, and the flags' refusals.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "tests/tool_runner.h"

namespace recycle::testing {
namespace {

// A cache of T-shirts and trousers (classes 0-1) at --recycle 0.5: `limit` training samples and
// a test split of 400.
void build_cache(const TempDir& dir, const std::string& cache, int64_t limit) {
  for (const std::string& split : {std::string("train"), std::string("test")}) {
    const ToolRun r = run_tool(
        dir, "recycle-build",
        "--data fashion-mnist --split " + split + " --classes 0-1 --limit " +
            std::to_string(split == "train" ? limit : 400) +
            " --width 8 --recycle 0.5 --seed 1 --cache " + cache);
    ASSERT_EQ(r.code, 0) << describe(r);
  }
}

TEST(AsyncSgd, TwoWorkersTrainTheHeadAsWellAsAllreduce) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  build_cache(dir, cache, 600);
  const std::string common = "--cache " + cache + " --epochs 3 --batch 20 --seed 2 --nproc 2 --json ";
  const ToolRun sync = run_tool(dir, "recycle-train", common + "--sync allreduce");
  ASSERT_EQ(sync.code, 0) << describe(sync);
  const ToolRun async = run_tool(dir, "recycle-train", common + "--sync async");
  ASSERT_EQ(async.code, 0) << describe(async);
  const nlohmann::json& a = async.last;
  EXPECT_EQ(a["sync"], "async:1:1");
  EXPECT_EQ(a["world_size"], 2);
  // Every epoch trained every sample, whoever trained it.
  EXPECT_EQ(a["async"]["epoch_samples"], nlohmann::json::array({600, 600, 600})) << a.dump();
  EXPECT_EQ(a["async"]["lost_workers"], nlohmann::json::array()) << a.dump();
  // Rank 0's worker pushed once and fetched once a step, fp32 both ways.
  EXPECT_EQ(a["async"]["pushes"], a["steps"]);
  EXPECT_EQ(a["async"]["fetches"].get<int64_t>(), a["steps"].get<int64_t>() + 1);  // + the last
  EXPECT_GT(a["async"]["push_bytes_per_step"].get<double>(), 0);
  EXPECT_GE(a["async"]["server_pushes"].get<int64_t>(), a["async"]["pushes"].get<int64_t>());
  // Shirts against trousers is easy: both end near the top, async within a few points.
  const double sync_acc = sync.last["test_acc"].get<double>();
  const double async_acc = a["test_acc"].get<double>();
  EXPECT_GT(sync_acc, 0.85) << describe(sync);
  EXPECT_GT(async_acc, sync_acc - 0.05) << describe(async);
}

// The step rank R's heartbeat published last in the FileStore at `store` (-1 before its first).
// LibTorch 1.13's FileStore appends "key, value" pairs, each string after its 4-byte length.
int64_t heartbeat_step(const std::string& store, int rank) {
  const std::string bytes = read_file(store);
  const std::string key = "recycle/hb/" + std::to_string(rank);
  const size_t at = bytes.rfind(key);
  if (at == std::string::npos || at + key.size() + 4 > bytes.size()) return -1;
  uint32_t length = 0;
  std::memcpy(&length, bytes.data() + at + key.size(), 4);
  if (length > 64 || at + key.size() + 4 + length > bytes.size()) return -1;
  std::istringstream value(bytes.substr(at + key.size() + 4, length));
  int64_t beats = -1, step = -1;
  value >> beats >> step;
  return step;
}

// The store of the one job a launcher started with TMPDIR=`tmp` ("" until it exists).
std::string job_store(const std::string& tmp) {
  for (const auto& entry : std::filesystem::directory_iterator(tmp)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("recycle-job-", 0) == 0 && std::filesystem::exists(entry.path() / "store")) {
      return (entry.path() / "store").string();
    }
  }
  return "";
}

TEST(AsyncSgd, AKilledWorkerOfThreeLeavesItsShareToTheOthersAndTheJobSucceeds) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  build_cache(dir, cache, 400);
  const std::string tmp = dir.file("tmp");
  std::filesystem::create_directory(tmp);
  // Rank 0 slowed down (5 ms a step) so that the job outlasts the kill on a fast machine.
  const char* old_tmp = std::getenv("TMPDIR");
  const std::string saved = old_tmp ? old_tmp : "";
  setenv("TMPDIR", tmp.c_str(), 1);
  const pid_t launcher = spawn_tool(
      "recycle-train",
      {"--cache", cache, "--epochs", "40", "--batch", "10", "--seed", "3", "--nproc", "3",
       "--sync", "async", "--throttle", "0:5", "--timeout", "20", "--json"},
      dir.file("out.txt"), dir.file("err.txt"));
  if (old_tmp) setenv("TMPDIR", saved.c_str(), 1); else unsetenv("TMPDIR");
  // Rank 2 is killed once it has trained 5 steps.
  pid_t victim = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string store = job_store(tmp);
    if (!store.empty() && heartbeat_step(store, 2) >= 5) {
      victim = worker_of_rank(launcher, 2);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(victim, 0) << read_file(dir.file("err.txt"));
  kill(victim, SIGKILL);
  const int code = wait_tool(launcher);
  const std::string err = read_file(dir.file("err.txt"));
  ASSERT_EQ(code, 0) << err;
  EXPECT_NE(err.find("rank 2 of 3 (pid " + std::to_string(victim) +
                     ") was killed by signal 9 (Killed); the job goes on without it"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("lost worker rank 2 of 3"), std::string::npos) << err;
  std::string line, last;
  std::istringstream lines(read_file(dir.file("out.txt")));
  while (std::getline(lines, line)) {
    if (!line.empty()) last = line;
  }
  const nlohmann::json report = nlohmann::json::parse(last);
  EXPECT_EQ(report["async"]["lost_workers"], nlohmann::json::array({2})) << report.dump();
  const std::vector<int64_t> samples = report["async"]["epoch_samples"];
  ASSERT_EQ(samples.size(), 40u);
  for (int64_t n : samples) EXPECT_EQ(n, 400) << report.dump();
  EXPECT_GT(report["test_acc"].get<double>(), 0.85) << report.dump();
  bool noted = false;
  for (const auto& note : report["notes"]) noted |= note.get<std::string>().find("lost worker rank 2") == 0;
  EXPECT_TRUE(noted) << report.dump();
}

TEST(AsyncSgd, AStragglerTakesFewerChunksInsteadOfHoldingTheOthersBack) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  build_cache(dir, cache, 400);
  // Rank 1 sleeps 100 ms a step; rank 0 trains what it does not.
  const ToolRun r = run_tool(dir, "recycle-train",
                             "--cache " + cache + " --epochs 2 --batch 10 --nproc 2 --sync async "
                             "--throttle 1:100 --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  const int64_t mine = r.last["async"]["samples"];
  EXPECT_GT(mine, 2 * 400 * 7 / 10) << r.last.dump();
  EXPECT_EQ(r.last["async"]["epoch_samples"], nlohmann::json::array({400, 400}));
}

TEST(AsyncSgd, ShardedServersWithTopkPushesAndBoundedStalenessTrain) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  build_cache(dir, cache, 400);
  // Buckets of 64 KiB, so that both servers hold some; fetch every 8 steps, but never more than
  // 0 versions stale: a push by anyone makes the next exchange a fetch.
  const ToolRun r = run_tool(dir, "recycle-train",
                             "--cache " + cache + " --epochs 2 --batch 20 --nproc 3 "
                             "--sync async:2:8 --servers 2 --max-staleness 0 --bucket-mb 0.0625 "
                             "--grad-compression topk --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  const nlohmann::json& a = r.last["async"];
  EXPECT_EQ(r.last["sync"], "async:2:8");
  EXPECT_EQ(a["servers"], 2);
  EXPECT_EQ(a["max_staleness"], 0);
  EXPECT_GT(a["stale_fetches"].get<int64_t>(), 0) << r.last.dump();
  EXPECT_GT(r.last["buckets"].get<int64_t>(), 1) << r.last.dump();
  // Pushes of AdaComp packets against fp32: far fewer bytes.
  EXPECT_LT(a["push_bytes_per_step"].get<double>() * 5,
            r.last["fp32_bytes_per_step"].get<double>() - a["fetch_bytes_per_step"].get<double>())
      << r.last.dump();
  EXPECT_EQ(a["epoch_samples"], nlohmann::json::array({400, 400}));
  EXPECT_GT(r.last["test_acc"].get<double>(), 0.8) << r.last.dump();
}

TEST(AsyncSgd, BadAsyncFlagsAreUsageErrors) {
  TempDir dir;
  for (const std::string& args :
       {std::string("--cache x --nproc 2 --sync async:0"), std::string("--cache x --nproc 2 --sync async:1:x"),
        std::string("--cache x --nproc 2 --servers 2"), std::string("--cache x --nproc 2 --max-staleness 3"),
        std::string("--cache x --sync async"), std::string("--cache x --nproc 2 --sync async --servers 3"),
        std::string("--cache x --nproc 2 --sync async --max-staleness -2"),
        std::string("--cache x --nproc 2 --throttle 2:10"), std::string("--cache x --nproc 2 --throttle 1"),
        std::string("--data fashion-mnist --nproc 2 --sync async --freeze linear:0.25:0.75 --levels lv"),
        std::string("--cache x --nproc 2 --sync average:2 --grad-compression topk")}) {
    const ToolRun r = run_tool(dir, "recycle-train", args);
    EXPECT_EQ(r.code, 2) << args << "\n" << describe(r);
    EXPECT_EQ(count_lines(r.err), 1) << args << "\n" << describe(r);
  }
}

}  // namespace
}  // namespace recycle::testing
