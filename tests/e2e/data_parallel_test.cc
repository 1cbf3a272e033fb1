// Data-parallel training with the real tools: recycle-train --nproc and --rank/--world-size/
// --master, on a small cache of Fashion-MNIST.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/torch.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <thread>

#include "engine/models/tensor_file.h"
#include "tests/tool_runner.h"

namespace recycle::testing {
namespace {

// A cache of 200 training samples of two classes at --recycle 1 (the head is the classifier
// alone: no batch statistics) and, optionally, another of 240.
void build_cache(const TempDir& dir, const std::string& cache, int64_t limit) {
  const ToolRun r = run_tool(dir, "recycle-build",
                             "--data fashion-mnist --split train --classes 0-1 --limit " +
                                 std::to_string(limit) + " --width 8 --recycle 1 --cache " + cache);
  ASSERT_EQ(r.code, 0) << describe(r);
}

// Every tensor of a saved head, by its dotted name (a tensor file: engine/models/tensor_file.h).
std::map<std::string, torch::Tensor> load_head(const std::string& path) {
  return recycle::load_tensor_file(path, "head " + path).tensors;
}

double max_difference(const std::map<std::string, torch::Tensor>& a,
                      const std::map<std::string, torch::Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (const auto& [key, t] : a) {
    EXPECT_TRUE(b.count(key)) << key;
    if (!b.count(key)) continue;
    worst = std::max(worst, (t - b.at(key)).abs().max().item<double>());
  }
  return worst;
}

// Waits until the launcher has `n` workers.
bool wait_for_workers(pid_t launcher, size_t n, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (children_of(launcher).size() == n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(DataParallel, TwoRanksOfBatchBGiveTheParametersOfOneRankOfBatch2B) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  build_cache(dir, cache, 200);
  const std::string common = "--cache " + cache + " --epochs 1 --seed 3 --eval-split none --json ";
  // 200 samples: 10 steps of 20 alone, 10 steps of 10 on each of 2 ranks.
  const ToolRun one =
      run_tool(dir, "recycle-train", common + "--batch 20 --save-head " + dir.file("one.pt"));
  ASSERT_EQ(one.code, 0) << describe(one);
  const ToolRun two = run_tool(dir, "recycle-train",
                               common + "--batch 10 --nproc 2 --save-head " + dir.file("two.pt"));
  ASSERT_EQ(two.code, 0) << describe(two);
  EXPECT_EQ(one.last["steps"], 10);
  EXPECT_EQ(two.last["steps"], 10);
  EXPECT_EQ(two.last["world_size"], 2);
  EXPECT_EQ(two.last["grad_compression"], "none");
  EXPECT_GT(two.last["bytes_per_step"].get<double>(), 0);
  const auto head_one = load_head(dir.file("one.pt"));
  const auto head_two = load_head(dir.file("two.pt"));
  ASSERT_FALSE(head_one.empty());
  EXPECT_LT(max_difference(head_one, head_two), 1e-5);

  // Parameter averaging after every step is gradient averaging for plain SGD (no momentum, no
  // weight decay: the step is linear in the gradient).
  const std::string plain = "--momentum 0 --weight-decay 0 ";
  const ToolRun sgd = run_tool(dir, "recycle-train",
                               common + plain + "--batch 20 --save-head " + dir.file("sgd.pt"));
  ASSERT_EQ(sgd.code, 0) << describe(sgd);
  const ToolRun avg = run_tool(
      dir, "recycle-train",
      common + plain + "--batch 10 --nproc 2 --sync average:1 --save-head " + dir.file("avg.pt"));
  ASSERT_EQ(avg.code, 0) << describe(avg);
  EXPECT_EQ(avg.last["sync"], "average:1");
  EXPECT_LT(max_difference(load_head(dir.file("sgd.pt")), load_head(dir.file("avg.pt"))), 1e-5);

  // The comparison can fail: 2 ranks of 20 (40 per step, 5 steps) end elsewhere.
  const ToolRun other = run_tool(
      dir, "recycle-train", common + "--batch 20 --nproc 2 --save-head " + dir.file("other.pt"));
  ASSERT_EQ(other.code, 0) << describe(other);
  EXPECT_EQ(other.last["steps"], 5);
  EXPECT_GT(max_difference(head_one, load_head(dir.file("other.pt"))), 1e-4);
}

// `recycle-train --nproc 2` for ever (100,000 epochs) on a small cache, its stderr in
// `err`; killed with its workers if a test ends before it does.
class EndlessJob {
 public:
  EndlessJob(const TempDir& dir, int timeout_seconds) : err_(dir.file("launcher.err")) {
    const std::string cache = dir.file("cache");
    build_cache(dir, cache, 200);
    launcher_ = spawn_tool("recycle-train",
                           {"--cache", cache, "--epochs", "100000", "--batch", "10", "--eval-split",
                            "none", "--nproc", "2", "--timeout", std::to_string(timeout_seconds)},
                           "/dev/null", err_);
  }
  ~EndlessJob() {
    if (launcher_ <= 0 || waited_) return;
    for (pid_t pid : children_of(launcher_)) kill(pid, SIGKILL);
    kill(launcher_, SIGKILL);
    wait_tool(launcher_);
  }
  // Rank 1's pid once both workers run and had `settle` to start training (0 if they never came).
  pid_t rank1_after(std::chrono::seconds settle) {
    if (!wait_for_workers(launcher_, 2, std::chrono::seconds(60))) return 0;
    std::this_thread::sleep_for(settle);  // mid-training (or, on a slow machine, still joining)
    return worker_of_rank(launcher_, 1);
  }
  int wait() {
    waited_ = true;
    return wait_tool(launcher_);
  }
  pid_t launcher() const { return launcher_; }
  std::string stderr_text() const { return read_file(err_); }

 private:
  std::string err_;
  pid_t launcher_ = -1;
  bool waited_ = false;
};

TEST(DataParallel, AKilledWorkerEndsTheJobNamingItsRank) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  EndlessJob job(dir, 10);
  const pid_t victim = job.rank1_after(std::chrono::seconds(3));
  ASSERT_GT(victim, 0);
  const auto killed = std::chrono::steady_clock::now();
  kill(victim, SIGKILL);
  const int code = job.wait();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  const std::string text = job.stderr_text();
  EXPECT_NE(code, 0) << text;
  EXPECT_LT(seconds, 10 + 5) << text;  // within the timeout (plus the heartbeat check)
  // The launcher names the dead worker; rank 0 names the rank it lost and exits non-zero.
  EXPECT_NE(text.find("rank 1 of 2 (pid " + std::to_string(victim) + ") was killed by signal 9"),
            std::string::npos) << text;
  EXPECT_TRUE(std::regex_search(
      text, std::regex("recycle-train: error: (lost rank 1 of 2|rank\\(s\\) 1 of 2 never joined)")))
      << text;
  EXPECT_NE(text.find("recycle-train: rank 0 exited with code 1"), std::string::npos) << text;
  EXPECT_TRUE(children_of(job.launcher()).empty());
}

TEST(DataParallel, AHungWorkerEndsTheJobWithinTheTimeoutNamingItsRank) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  EndlessJob job(dir, 4);
  const pid_t victim = job.rank1_after(std::chrono::seconds(3));
  ASSERT_GT(victim, 0);
  const auto stopped = std::chrono::steady_clock::now();
  kill(victim, SIGSTOP);  // alive but silent: its peers' collectives wait for it
  const int code = job.wait();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  const std::string text = job.stderr_text();
  EXPECT_NE(code, 0) << text;
  // Rank 0 gives up after the 4 s timeout and the heartbeat check; the launcher then gives the
  // stopped worker the timeout plus 10 s before it kills it.
  EXPECT_LT(seconds, 4 + 5 + 4 + 10 + 5) << text;
  EXPECT_TRUE(std::regex_search(
      text, std::regex("recycle-train: error: (lost rank 1 of 2|rank\\(s\\) 1 of 2 never joined)")))
      << text;
  EXPECT_NE(text.find("killed rank(s) 1 that did not stop in time"), std::string::npos) << text;
}

TEST(DataParallel, RanksStartedByHandRefuseCachesThatDiffer) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  build_cache(dir, dir.file("a"), 200);
  build_cache(dir, dir.file("b"), 240);
  const auto token = recycle::testing::test_job_token();
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::string master = "127.0.0.1:" + std::to_string(recycle::testing::free_tcp_port());
    auto args = [&](int rank, const std::string& cache) {
      return std::vector<std::string>{"--cache", cache, "--epochs", "1", "--eval-split", "none",
                                      "--rank", std::to_string(rank), "--world-size", "2",
                                      "--master", master, "--timeout", "20", "--threads", "1"};
    };
    const pid_t r0 =
        spawn_tool("recycle-train", args(0, dir.file("a")), "/dev/null", dir.file("r0.err"));
    const pid_t r1 =
        spawn_tool("recycle-train", args(1, dir.file("b")), "/dev/null", dir.file("r1.err"));
    const int c0 = wait_tool(r0), c1 = wait_tool(r1);
    const std::string e0 = read_file(dir.file("r0.err")), e1 = read_file(dir.file("r1.err"));
    if (e0.find("already in use") != std::string::npos) continue;  // the port was taken
    EXPECT_EQ(c0, 1) << e0;
    EXPECT_EQ(c1, 1) << e1;
    for (const std::string& e : {e0, e1}) {
      EXPECT_NE(e.find("the ranks disagree on the cache identity: rank 0 has"), std::string::npos)
          << e;
      EXPECT_NE(e.find("rank(s) 1 have"), std::string::npos) << e;
      EXPECT_EQ(count_lines(e), 1) << e;
    }
    return;
  }
  FAIL() << "no free port in 3 attempts";
}

TEST(DataParallel, BadDataParallelFlagsAreUsageErrors) {
  TempDir dir;
  for (const std::string& args :
       {std::string("--cache x --nproc 2 --rank 0 --world-size 2 --master 127.0.0.1:1"),
        std::string("--cache x --world-size 2"), std::string("--cache x --nproc 0"),
        std::string("--cache x --grad-compression zip"), std::string("--cache x --sync average:0"),
        std::string("--cache x --rank 2 --world-size 2 --master 127.0.0.1:1"),
        std::string("--cache x --rank 0 --world-size 2 --master nowhere")}) {
    const ToolRun r = run_tool(dir, "recycle-train", args);
    EXPECT_EQ(r.code, 2) << args << "\n" << describe(r);
    EXPECT_EQ(count_lines(r.err), 1) << args << "\n" << describe(r);
  }
}

}  // namespace
}  // namespace recycle::testing
