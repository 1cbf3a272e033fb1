// Features that broke in combination, with the real tools: a test split holding
// fewer classes than the training split, the memory budget of a small evaluation split, output
// paths checked before training, data-parallel flags without data-parallel training, and the
// report printed by rank 0 alone.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/tool_runner.h"

namespace {

using recycle::testing::count_lines;
using recycle::testing::describe;
using recycle::testing::have_fashion_mnist;
using recycle::testing::read_file;
using recycle::testing::TempDir;
using recycle::testing::ToolRun;
using recycle::testing::write_file;

const std::string kTextModel =
    "--threads 1 --model transformer:d_model=16,layers=2,heads=2,ff=32,max_tokens=32";

ToolRun run(const TempDir& dir, const std::string& tool, const std::string& args) {
  return recycle::testing::run_tool(dir, tool, args);
}

// `n` lines of the classes named, in turn: "NAME<TAB>words of NAME, line I".
std::string lines_of(const std::vector<std::string>& classes, int n, int salt) {
  std::string tsv;
  for (int i = 0; i < n; ++i) {
    const std::string& c = classes[i % classes.size()];
    tsv += c + "\twords of " + c + ", line " + std::to_string(i * 13 + salt) + "\n";
  }
  return tsv;
}

// Classes come from the training split: a test split without an example of one is built into
// the training split's cache and evaluated in raw training, with class names and with integer
// labels (where the missing class is the last, so the test split alone has fewer ids). A test
// split with a class the training split lacks is still refused.
TEST(Combinations, ATestSplitMayHoldFewerClassesThanTheTrainingSplit) {
  TempDir dir;
  for (const bool names : {true, false}) {
    const std::string sub = dir.file(names ? "names" : "ids");
    std::filesystem::create_directories(sub);
    const std::vector<std::string> all = names ? std::vector<std::string>{"ant", "bee", "cat"}
                                               : std::vector<std::string>{"0", "1", "2"};
    const std::vector<std::string> fewer = names ? std::vector<std::string>{"ant", "cat"}
                                                 : std::vector<std::string>{"0", "1"};
    write_file(sub + "/train.tsv", lines_of(all, 30, 0));
    write_file(sub + "/test.tsv", lines_of(fewer, 10, 7));
    const std::string data = "--data tsv:" + sub + " " + kTextModel + " --recycle 0.5";
    const std::string cache = " --cache " + sub + "/cache --json";
    ToolRun r = run(dir, "recycle-build", data + " --split train" + cache);
    ASSERT_EQ(r.code, 0) << describe(r);
    r = run(dir, "recycle-build", data + " --split test" + cache);
    ASSERT_EQ(r.code, 0) << describe(r);
    EXPECT_EQ(r.last["samples"], 10);
    r = run(dir, "recycle-inspect", "--cache " + sub + "/cache --json");
    ASSERT_EQ(r.code, 0) << describe(r);
    EXPECT_EQ(r.last["classes"], nlohmann::json(all)) << r.out;
    r = run(dir, "recycle-train", "--cache " + sub + "/cache --epochs 1 --threads 1 --json");
    ASSERT_EQ(r.code, 0) << describe(r);
    EXPECT_EQ(r.last["test_samples"], 10);
    r = run(dir, "recycle-train",
            "--data tsv:" + sub + " " + kTextModel + " --recycle 0 --epochs 1 --json");
    ASSERT_EQ(r.code, 0) << describe(r);
    EXPECT_EQ(r.last["test_samples"], 10);
  }
  // A class the training split does not have: one line, nothing built.
  const std::string sub = dir.file("other");
  std::filesystem::create_directories(sub);
  write_file(sub + "/train.tsv", lines_of({"ant", "bee"}, 20, 0));
  write_file(sub + "/test.tsv", lines_of({"ant", "dog"}, 6, 3));
  ToolRun r = run(dir, "recycle-train",
                  "--data tsv:" + sub + " " + kTextModel + " --recycle 0 --epochs 1");
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("split test holds class 'dog' that split train does not"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
}

// The memory budget counts the evaluation's batch as the evaluated split's samples at most:
// 6 test samples of large records fit where a batch of 256 would not.
TEST(Combinations, TheMemoryBudgetCountsASmallEvaluationSplitAsItIs) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string build = "--data fashion-mnist --width 64 --recycle 0.25 --threads 1 --cache " +
                            dir.file("cache");
  ToolRun r = run(dir, "recycle-build", build + " --split train --limit 16");
  ASSERT_EQ(r.code, 0) << describe(r);
  r = run(dir, "recycle-build", build + " --split test --limit 6");
  ASSERT_EQ(r.code, 0) << describe(r);
  r = run(dir, "recycle-train", "--cache " + dir.file("cache") +
                                    " --memory-budget 16 --batch 2 --prefetch 0 --epochs 1 "
                                    "--threads 1 --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["test_samples"], 6);
  EXPECT_GE(r.last["memory"]["block_cache_bytes"].get<int64_t>(), int64_t{8} << 20) << r.out;
}

// --save-head and --save-model whose folder is missing, or empty paths, are refused before
// any training (no epoch is printed), with one line.
TEST(Combinations, OutputPathsAreCheckedBeforeTraining) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string raw = "--data fashion-mnist --limit 64 --width 4 --recycle 0 --epochs 1 "
                          "--eval-split none --threads 1 ";
  for (const std::string& args :
       {raw + "--save-model " + dir.file("missing/enc.pt"),
        raw + "--save-head " + dir.file("missing/head.pt"), raw + "--save-head ''",
        raw + "--save-model ''", raw + "--save-model " + dir.path().string()}) {
    const ToolRun r = run(dir, "recycle-train", args);
    EXPECT_EQ(r.code, 2) << args << "\n" << describe(r);
    EXPECT_EQ(r.out.find("epoch"), std::string::npos) << args << "\n" << describe(r);
    EXPECT_EQ(count_lines(r.err), 1) << args << "\n" << describe(r);
  }
  const ToolRun r = run(dir, "recycle-train", raw + "--save-model " + dir.file("missing/enc.pt"));
  EXPECT_NE(r.err.find("--save-model " + dir.file("missing/enc.pt") + ": folder " +
                       dir.file("missing") + " does not exist"),
            std::string::npos)
      << r.err;
}

// Flags that only data-parallel training reads are refused without it, as bad usage.
TEST(Combinations, DataParallelFlagsWithoutDataParallelAreRefused) {
  TempDir dir;
  for (const std::string& flag :
       {std::string("--grad-compression fp16"), std::string("--sync allreduce"),
        std::string("--sync average:2"), std::string("--bucket-mb 4")}) {
    const ToolRun r = run(dir, "recycle-train", "--cache " + dir.file("c") + " " + flag);
    EXPECT_EQ(r.code, 2) << flag << "\n" << describe(r);
    EXPECT_NE(r.err.find("applies to data-parallel training only"), std::string::npos) << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << flag << "\n" << describe(r);
  }
}

// Ranks started by hand: rank 0 prints the report (and --json), rank 1 prints nothing.
TEST(Combinations, RanksOtherThanZeroPrintNoReport) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  ToolRun b = run(dir, "recycle-build",
                  "--data fashion-mnist --split train --classes 0-1 --limit 200 --width 8 "
                  "--recycle 1 --cache " + dir.file("cache"));
  ASSERT_EQ(b.code, 0) << describe(b);
  const auto token = recycle::testing::test_job_token();
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::string master = "127.0.0.1:" + std::to_string(recycle::testing::free_tcp_port());
    auto args = [&](int rank) {
      return std::vector<std::string>{"--cache", dir.file("cache"), "--epochs", "1",
                                      "--eval-split", "none", "--rank", std::to_string(rank),
                                      "--world-size", "2", "--master", master, "--timeout", "30",
                                      "--threads", "1", "--json"};
    };
    const pid_t r0 = recycle::testing::spawn_tool("recycle-train", args(0), dir.file("r0.out"),
                                                  dir.file("r0.err"));
    const pid_t r1 = recycle::testing::spawn_tool("recycle-train", args(1), dir.file("r1.out"),
                                                  dir.file("r1.err"));
    const int c0 = recycle::testing::wait_tool(r0), c1 = recycle::testing::wait_tool(r1);
    const std::string e0 = read_file(dir.file("r0.err"));
    if (e0.find("Address already in use") != std::string::npos) continue;  // the port was taken
    ASSERT_EQ(c0, 0) << e0;
    ASSERT_EQ(c1, 0) << read_file(dir.file("r1.err"));
    EXPECT_NE(read_file(dir.file("r0.out")).find("training (recycle 1)"), std::string::npos);
    EXPECT_EQ(read_file(dir.file("r1.out")), "");
    return;
  }
  FAIL() << "no free port in 3 attempts";
}

}  // namespace
