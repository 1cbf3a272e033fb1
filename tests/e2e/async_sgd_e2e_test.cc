// Asynchronous data-parallel training (--sync async) with the real tools: recycle-train
// --nproc on small caches of Fashion-MNIST; a worker killed mid-training, a straggler, sharded
// servers with compressed pushes and bounded staleness, and the flags' refusals.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
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
  const std::string common =
      "--cache " + cache + " --epochs 3 --batch 20 --seed 2 --nproc 2 --json ";
  const ToolRun sync =
      run_tool(dir, "recycle-train", common + "--sync allreduce --eval-every-epoch");
  ASSERT_EQ(sync.code, 0) << describe(sync);
  ASSERT_EQ(sync.last["epoch_test_acc"].size(), 3u) << sync.last.dump();
  EXPECT_EQ(sync.last["epoch_test_acc"][2], sync.last["test_acc"]);
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
  // Both workers' totals: rank 0 reaches its shard by a call, rank 1's exchanges cross the link
  // (a fp32 push and a fp32 fetch of the head each step).
  const nlohmann::json& workers = a["async"]["workers"];
  ASSERT_EQ(workers.size(), 2u) << a.dump();
  EXPECT_EQ(workers[0]["rank"], 0);
  EXPECT_EQ(workers[0]["link_bytes"], 0);
  EXPECT_EQ(workers[1]["rank"], 1);
  EXPECT_EQ(workers[0]["samples"].get<int64_t>() + workers[1]["samples"].get<int64_t>(), 1800);
  EXPECT_EQ(workers[1]["link_bytes"].get<double>(),
            workers[1]["steps"].get<double>() * 2 * a["async"]["push_bytes_per_step"].get<double>())
      << a.dump();
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

// `recycle-train --nproc 3 --sync async` on a cache of 400 samples for 40 epochs, in the
// background, its store in a directory of its own (to watch the ranks' steps), its stdout and
// stderr in files. Killed with its workers if a test ends before it does.
class AsyncJob {
 public:
  AsyncJob(const TempDir& dir, const std::string& cache, const std::string& timeout)
      : dir_(dir), tmp_(dir.file("tmp")) {
    std::filesystem::create_directory(tmp_);
    const char* old_tmp = std::getenv("TMPDIR");
    const std::string saved = old_tmp ? old_tmp : "";
    setenv("TMPDIR", tmp_.c_str(), 1);
    // Rank 0 slowed down (5 ms a step) so that the job outlasts what a test does to it.
    launcher_ = spawn_tool(
        "recycle-train",
        {"--cache", cache, "--epochs", "40", "--batch", "10", "--seed", "3", "--nproc", "3",
         "--sync", "async", "--throttle", "0:5", "--timeout", timeout, "--json"},
        dir.file("out.txt"), dir.file("err.txt"));
    if (old_tmp) setenv("TMPDIR", saved.c_str(), 1); else unsetenv("TMPDIR");
  }
  ~AsyncJob() {
    if (launcher_ <= 0 || waited_) return;
    for (pid_t pid : children_of(launcher_)) kill(pid, SIGKILL);
    kill(launcher_, SIGKILL);
    wait_tool(launcher_);
  }
  // The pid of `rank` once it has trained `steps` steps (-1 if it did not within 2 minutes).
  pid_t rank_after_steps(int rank, int64_t steps) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string store = job_store(tmp_);
      if (!store.empty() && heartbeat_step(store, rank) >= steps) {
        return worker_of_rank(launcher_, rank);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  // Waits until stderr has `text` (false after 2 minutes).
  bool wait_for_stderr(const std::string& text) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
      if (err().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  int wait() {
    waited_ = true;
    return wait_tool(launcher_);
  }
  std::string err() const { return read_file(dir_.file("err.txt")); }
  // The last stdout line, parsed (null when it is not JSON).
  nlohmann::json report() const {
    std::string line, last;
    std::istringstream lines(read_file(dir_.file("out.txt")));
    while (std::getline(lines, line)) {
      if (!line.empty()) last = line;
    }
    return nlohmann::json::parse(last, nullptr, /*allow_exceptions=*/false);
  }

 private:
  const TempDir& dir_;
  std::string tmp_;
  pid_t launcher_ = -1;
  bool waited_ = false;
};

// What a job that lost rank 2 reports: exit 0, the loss named, every epoch whole.
void expect_survived_losing_rank2(AsyncJob& job, int code) {
  const std::string err = job.err();
  ASSERT_EQ(code, 0) << err;
  EXPECT_NE(err.find("lost worker rank 2 of 3"), std::string::npos) << err;
  const nlohmann::json report = job.report();
  EXPECT_EQ(report["async"]["lost_workers"], nlohmann::json::array({2})) << report.dump() << err;
  const std::vector<int64_t> samples = report["async"]["epoch_samples"];
  ASSERT_EQ(samples.size(), 40u);
  for (int64_t n : samples) EXPECT_EQ(n, 400) << report.dump();
  EXPECT_GT(report["test_acc"].get<double>(), 0.85) << report.dump();
  bool noted = false;
  for (const auto& note : report["notes"]) {
    noted |= note.get<std::string>().find("lost worker rank 2") == 0;
  }
  EXPECT_TRUE(noted) << report.dump();
}

// A cache of 400 samples for an AsyncJob.
class AsyncSgdFault : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    build_cache(dir, cache, 400);
  }
  TempDir dir;
  const std::string cache = dir.file("cache");
};

TEST_F(AsyncSgdFault, AKilledWorkerOfThreeLeavesItsShareToTheOthersAndTheJobSucceeds) {
  AsyncJob job(dir, cache, "20");
  const pid_t victim = job.rank_after_steps(2, 5);
  ASSERT_GT(victim, 0) << job.err();
  kill(victim, SIGKILL);
  const int code = job.wait();
  expect_survived_losing_rank2(job, code);
  EXPECT_NE(job.err().find("rank 2 of 3 (pid " + std::to_string(victim) +
                           ") was killed by signal 9 (Killed); the job goes on without it"),
            std::string::npos)
      << job.err();
}

TEST_F(AsyncSgdFault, AWorkerSilentForTheTimeoutIsDroppedAndEndsWhenItWakes) {
  AsyncJob job(dir, cache, "4");
  const pid_t victim = job.rank_after_steps(2, 5);
  ASSERT_GT(victim, 0) << job.err();
  kill(victim, SIGSTOP);  // alive, silent: its server gives up on it after the 4 s timeout
  ASSERT_TRUE(job.wait_for_stderr("lost worker rank 2 of 3")) << job.err();
  kill(victim, SIGCONT);  // it wakes to a server that no longer answers it, and stops
  const int code = job.wait();
  expect_survived_losing_rank2(job, code);
  EXPECT_NE(job.err().find("[rank 2] recycle-train: error: this worker (rank 2) was dropped from "
                           "the job: it was silent for more than --timeout 4 s"),
            std::string::npos)
      << job.err();
}

TEST_F(AsyncSgdFault, AKilledServerEndsTheJobWithOneLineOnEveryRank) {
  AsyncJob job(dir, cache, "20");
  const pid_t victim = job.rank_after_steps(0, 5);
  ASSERT_GT(victim, 0) << job.err();
  kill(victim, SIGKILL);
  const int code = job.wait();
  const std::string err = job.err();
  EXPECT_EQ(code, 1) << err;
  EXPECT_NE(err.find("rank 0 of 3 (pid " + std::to_string(victim) + ") was killed by signal 9"),
            std::string::npos) << err;
  for (const std::string rank : {"1", "2"}) {
    EXPECT_TRUE(std::regex_search(
        err, std::regex("\\[rank " + rank + "\\] recycle-train: error: lost rank 0(, [12])? of 3 .*"
                        "the parameter server on rank 0")))
        << err;
  }
}

TEST(AsyncSgd, AStragglerTakesFewerChunksInsteadOfHoldingTheOthersBack) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  build_cache(dir, cache, 400);
  // Batches of 5: chunks of 40 samples, 20 of them in 2 epochs. Rank 1 sleeps 200 ms a step,
  // far longer than a step of this small head takes even on a loaded machine; rank 0 trains
  // what rank 1 does not get to. Alike, each would train half.
  const ToolRun r = run_tool(dir, "recycle-train",
                             "--cache " + cache + " --epochs 2 --batch 5 --nproc 2 --sync async "
                             "--throttle 1:200 --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  const int64_t mine = r.last["async"]["samples"];
  EXPECT_GT(mine, 2 * 400 * 6 / 10) << r.last.dump();
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
                             "--cache " + cache + " --epochs 3 --batch 20 --nproc 3 "
                             "--sync async:2:8 --servers 2 --max-staleness 0 --bucket-mb 0.0625 "
                             "--grad-compression topk --eval-every-epoch --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  const nlohmann::json& a = r.last["async"];
  // Evaluated as each epoch completed (the servers' parameters then), the last at the end.
  ASSERT_EQ(r.last["epoch_test_acc"].size(), 3u) << r.last.dump();
  EXPECT_EQ(r.last["epoch_test_acc"][2], r.last["test_acc"]);
  for (const auto& acc : r.last["epoch_test_acc"]) {
    EXPECT_GT(acc.get<double>(), 0.3) << r.last.dump();
  }
  EXPECT_EQ(r.last["sync"], "async:2:8");
  EXPECT_EQ(a["servers"], 2);
  EXPECT_EQ(a["max_staleness"], 0);
  EXPECT_GT(a["stale_fetches"].get<int64_t>(), 0) << r.last.dump();
  EXPECT_GT(r.last["buckets"].get<int64_t>(), 1) << r.last.dump();
  // Pushes of AdaComp packets against fp32: far fewer bytes.
  EXPECT_LT(a["push_bytes_per_step"].get<double>() * 5,
            r.last["fp32_bytes_per_step"].get<double>() - a["fetch_bytes_per_step"].get<double>())
      << r.last.dump();
  EXPECT_EQ(a["epoch_samples"], nlohmann::json::array({400, 400, 400}));
  // Ranks 1 and 2 fetch from both servers, and rank 0 from server 1: top-k changes against the
  // copy each has, far fewer bytes over the links than fp32 shards.
  ASSERT_EQ(a["workers"].size(), 3u) << r.last.dump();
  EXPECT_LT(a["link_bytes_per_step"].get<double>() * 5, r.last["fp32_bytes_per_step"].get<double>())
      << r.last.dump();
  // About 30 pushes, while AdaComp's residues still fill: well above chance (0.5), not more.
  EXPECT_GT(r.last["test_acc"].get<double>(), 0.6) << r.last.dump();
}

TEST(AsyncSgd, BadAsyncFlagsAreUsageErrors) {
  TempDir dir;
  for (const std::string& args :
       {std::string("--cache x --nproc 2 --sync async:0"),
        std::string("--cache x --nproc 2 --sync async:1:x"),
        std::string("--cache x --nproc 2 --servers 2"),
        std::string("--cache x --nproc 2 --max-staleness 3"), std::string("--cache x --sync async"),
        std::string("--cache x --nproc 2 --sync async --servers 3"),
        std::string("--cache x --nproc 2 --sync async --max-staleness -2"),
        std::string("--cache x --nproc 2 --throttle 2:10"),
        std::string("--cache x --nproc 2 --throttle 1"),
        std::string(
            "--data fashion-mnist --nproc 2 --sync async --freeze linear:0.25:0.75 --levels lv"),
        std::string("--cache x --nproc 2 --sync average:2 --grad-compression topk")}) {
    const ToolRun r = run_tool(dir, "recycle-train", args);
    EXPECT_EQ(r.code, 2) << args << "\n" << describe(r);
    EXPECT_EQ(count_lines(r.err), 1) << args << "\n" << describe(r);
  }
}

}  // namespace
}  // namespace recycle::testing
