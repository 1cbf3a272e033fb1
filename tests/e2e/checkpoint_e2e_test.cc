// recycle-train --checkpoint with the real tool: a head training killed mid-run resumes to the
// head a run never stopped ends with (at an epoch's end, and in the middle of an epoch with
// --checkpoint-every), two ranks resume a finished checkpoint, and a checkpoint
// of another job, a damaged one or a head file are refused with one line and left as they were.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/tool_runner.h"

namespace recycle::testing {
namespace {

// A cache of T-shirts and trousers at --recycle 0.5: 600 training samples, 200 test ones.
void build_cache(const TempDir& dir, const std::string& cache) {
  for (const std::string& split : {std::string("train"), std::string("test")}) {
    const ToolRun r = run_tool(dir, "recycle-build",
                               "--data fashion-mnist --split " + split + " --classes 0-1 --limit " +
                                   (split == "train" ? "600" : "200") +
                                   " --width 8 --recycle 0.5 --seed 1 --cache " + cache);
    ASSERT_EQ(r.code, 0) << describe(r);
  }
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

TEST(Checkpoint, AKilledHeadTrainingResumesToTheHeadOfARunNeverStopped) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache"), ck = dir.file("head.ckpt");
  build_cache(dir, cache);
  const std::string job = "--cache " + cache + " --epochs 8 --batch 20 --seed 3 --threads 1 --json";
  const ToolRun whole = run_tool(dir, "recycle-train", job);
  ASSERT_EQ(whole.code, 0) << describe(whole);

  // Killed as soon as its first checkpoint is there (after epoch 1 or a little later).
  const pid_t pid = spawn_tool("recycle-train", words(job + " --checkpoint " + ck));
  int code = 0;
  while (true) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      break;
    }
    if (std::filesystem::exists(ck)) {
      kill(pid, SIGKILL);
      code = wait_tool(pid);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(code == -SIGKILL || code == 0) << code;

  const ToolRun resumed = run_tool(dir, "recycle-train", job + " --checkpoint " + ck);
  ASSERT_EQ(resumed.code, 0) << describe(resumed);
  const int64_t done = resumed.last["resumed_epochs"];
  std::cout << "killed after " << done << " of 8 epochs\n";
  EXPECT_GE(done, 1);
  EXPECT_EQ(done + resumed.last["epochs"].get<int64_t>(), 8);
  if (done < 8) EXPECT_NE(resumed.err.find("resumed from --checkpoint"), std::string::npos);
  // The same epochs, step for step: the same losses and the same head at the end.
  const std::vector<double> all = whole.last["epoch_loss"], tail = resumed.last["epoch_loss"];
  EXPECT_EQ(tail, std::vector<double>(all.begin() + done, all.end())) << describe(resumed);
  EXPECT_EQ(resumed.last["test_acc"], whole.last["test_acc"]) << describe(resumed);
}

TEST(Checkpoint, AHeadTrainingKilledMidEpochResumesWithTheBatchesItHadLeft) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache"), ck = dir.file("head.ckpt");
  build_cache(dir, cache);
  // 30 steps an epoch; a checkpoint every 7 steps falls inside epochs.
  const std::string job = "--cache " + cache + " --epochs 4 --batch 20 --seed 5 --threads 1 --json";
  const ToolRun whole = run_tool(dir, "recycle-train", job + " --save-head " + dir.file("a.pt"));
  ASSERT_EQ(whole.code, 0) << describe(whole);

  // Killed as soon as its first checkpoint is there (step 7, or a little later).
  const std::string resumable = job + " --checkpoint " + ck + " --checkpoint-every 7";
  const pid_t pid = spawn_tool("recycle-train", words(resumable));
  while (!std::filesystem::exists(ck)) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) FAIL() << "it ended before its first checkpoint";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(pid, SIGKILL);
  wait_tool(pid);

  const ToolRun resumed = run_tool(dir, "recycle-train", resumable + " --save-head " +
                                                             dir.file("b.pt"));
  ASSERT_EQ(resumed.code, 0) << describe(resumed);
  const int64_t epochs = resumed.last["resumed_epochs"], batches = resumed.last["resumed_batches"];
  std::cout << "killed in epoch " << epochs + 1 << " after its batch " << batches << "\n";
  ASSERT_EQ((epochs * 30 + batches) % 7, 0) << describe(resumed);
  if (batches > 0) {
    EXPECT_NE(resumed.err.find("after its batch " + std::to_string(batches)), std::string::npos)
        << describe(resumed);
  }
  EXPECT_EQ(epochs + resumed.last["epochs"].get<int64_t>(), 4) << describe(resumed);
  // The same steps: the interrupted epoch's loss over all its samples, the same head.
  const std::vector<double> all = whole.last["epoch_loss"], tail = resumed.last["epoch_loss"];
  EXPECT_EQ(tail, std::vector<double>(all.begin() + epochs, all.end())) << describe(resumed);
  EXPECT_EQ(resumed.last["test_acc"], whole.last["test_acc"]) << describe(resumed);
  EXPECT_TRUE(read_file(dir.file("a.pt")) == read_file(dir.file("b.pt")))
      << "the heads differ";
}

TEST(Checkpoint, TwoRanksResumeAFinishedRunAndAnotherJobsCheckpointIsRefused) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache"), ck = dir.file("dp.ckpt");
  build_cache(dir, cache);
  const std::string job =
      "--cache " + cache + " --epochs 2 --batch 20 --nproc 2 --json --checkpoint ";
  const ToolRun first = run_tool(dir, "recycle-train", job + ck);
  ASSERT_EQ(first.code, 0) << describe(first);
  EXPECT_EQ(first.last["resumed_epochs"], 0);
  const ToolRun again = run_tool(dir, "recycle-train", job + ck);
  ASSERT_EQ(again.code, 0) << describe(again);
  EXPECT_EQ(again.last["resumed_epochs"], 2);
  EXPECT_EQ(again.last["epochs"], 0);
  EXPECT_EQ(again.last["test_acc"], first.last["test_acc"]);

  const std::string bytes = read_file(ck);
  const ToolRun other = run_tool(dir, "recycle-train", job + ck + " --lr 0.2");
  EXPECT_EQ(other.code, 1) << describe(other);
  EXPECT_NE(other.err.find("another job (--lr: 0.05 in the checkpoint, 0.2 in this run)"),
            std::string::npos)
      << describe(other);
  // Alone, against the two ranks' checkpoint: one line.
  const ToolRun alone = run_tool(dir, "recycle-train",
                                 "--cache " + cache + " --epochs 2 --batch 20 --checkpoint " + ck);
  EXPECT_EQ(alone.code, 1) << describe(alone);
  EXPECT_EQ(count_lines(alone.err), 1) << describe(alone);
  EXPECT_NE(alone.err.find("world: 2 in the checkpoint, 1 in this run"), std::string::npos)
      << describe(alone);
  EXPECT_EQ(read_file(ck), bytes) << "a refused checkpoint is left as it was";

  // A damaged file and a head file are not checkpoints; neither is touched.
  const std::string damaged = dir.file("damaged.ckpt"), head = dir.file("head.pt");
  write_file(damaged, bytes.substr(0, bytes.size() / 2));
  const ToolRun r1 = run_tool(dir, "recycle-train", "--cache " + cache + " --epochs 2 --batch 20 "
                              "--checkpoint " + damaged);
  EXPECT_EQ(r1.code, 1) << describe(r1);
  EXPECT_EQ(count_lines(r1.err), 1) << describe(r1);
  EXPECT_EQ(read_file(damaged), bytes.substr(0, bytes.size() / 2));
  ASSERT_EQ(
      run_tool(dir, "recycle-train", "--cache " + cache + " --epochs 1 --save-head " + head).code,
      0);
  const std::string head_bytes = read_file(head);
  const ToolRun r2 =
      run_tool(dir, "recycle-train", "--cache " + cache + " --epochs 1 --checkpoint " + head);
  EXPECT_EQ(r2.code, 1) << describe(r2);
  EXPECT_NE(r2.err.find("a head file, not a checkpoint"), std::string::npos) << describe(r2);
  EXPECT_EQ(read_file(head), head_bytes);

  // What it does not apply to is a usage error.
  for (const std::string& args :
       {std::string("--data fashion-mnist --checkpoint ") + ck,
        "--cache " + cache + " --freeze auto --levels l --checkpoint " + ck,
        "--cache " + cache + " --checkpoint-every 5",
        "--cache " + cache + " --nproc 2 --sync async --checkpoint-every 5 --checkpoint " + ck}) {
    const ToolRun r = run_tool(dir, "recycle-train", args);
    EXPECT_EQ(r.code, 2) << args << "\n" << describe(r);
    EXPECT_EQ(count_lines(r.err), 1) << args << "\n" << describe(r);
  }
}

TEST(Checkpoint, AnAsynchronousJobKilledMidRunGoesOnFromItsLastCompleteEpoch) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache"), ck = dir.file("async.ckpt");
  build_cache(dir, cache);
  const std::string job =
      "--cache " + cache + " --epochs 6 --batch 20 --nproc 2 --sync async --json";
  // The launcher and its workers killed as soon as the first checkpoint is there.
  const pid_t launcher = spawn_tool("recycle-train", words(job + " --checkpoint " + ck));
  while (!std::filesystem::exists(ck)) {
    int status = 0;
    if (waitpid(launcher, &status, WNOHANG) == launcher) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const std::vector<pid_t> workers = children_of(launcher);
  kill(launcher, SIGKILL);
  for (pid_t w : workers) kill(w, SIGKILL);
  wait_tool(launcher);
  ASSERT_TRUE(std::filesystem::exists(ck));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the workers' ends

  const ToolRun resumed = run_tool(dir, "recycle-train", job + " --checkpoint " + ck);
  ASSERT_EQ(resumed.code, 0) << describe(resumed);
  const int64_t done = resumed.last["resumed_epochs"];
  std::cout << "async: killed after " << done << " of 6 epochs\n";
  EXPECT_GE(done, 1);
  const int64_t left = 6 - done;
  EXPECT_EQ(resumed.last["epochs"], left);
  // Every epoch left trained every sample, from the checkpoint's head: its first epoch's loss
  // is below a fresh run's first (asynchronous runs do not repeat step for step).
  EXPECT_EQ(resumed.last["async"]["epoch_samples"], nlohmann::json(std::vector<int64_t>(left, 600)))
      << describe(resumed);
  EXPECT_GT(resumed.last["test_acc"].get<double>(), 0.85) << describe(resumed);
  if (left > 0) {
    const ToolRun fresh = run_tool(dir, "recycle-train", job);
    ASSERT_EQ(fresh.code, 0) << describe(fresh);
    EXPECT_LT(resumed.last["epoch_loss"][0].get<double>(),
              fresh.last["epoch_loss"][0].get<double>())
        << describe(resumed) << describe(fresh);
  }
}

}  // namespace
}  // namespace recycle::testing
