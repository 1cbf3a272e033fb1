// recycle-train --freeze end to end (docs/progressive.md): a run that starts on raw data builds
// its first level from raw data and derives the next from it, reports every freeze in --json,
// a rerun reuses the levels, a run can start from a cache, and bad flags give one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/models/scripted_net.h"
#include "tests/tool_runner.h"

namespace {

using recycle::testing::describe;
using recycle::testing::TempDir;
using recycle::testing::ToolRun;
using recycle::testing::write_idx;

ToolRun run(const TempDir& dir, const std::string& tool, const std::string& args) {
  return recycle::testing::run_tool(dir, tool, args);
}

// train (n) and t10k (n / 2) IDX files in dir: 4 classes of noisy stripes, learnable in a few
// epochs; every image differs from every other (train and test included).
void write_stripes(const std::string& dir, int n) {
  for (const auto& [prefix, count] : {std::pair<std::string, int>{"train", n}, {"t10k", n / 2}}) {
    std::vector<uint8_t> images, labels;
    for (int i = 0; i < count; ++i) {
      const int label = i % 4;
      const uint32_t sample = static_cast<uint32_t>(i + (prefix == "train" ? 0 : n) + 1);
      for (int y = 0; y < 28; ++y) {
        for (int x = 0; x < 28; ++x) {
          const int stripe =
              label < 2 ? (y / (2 + 2 * label)) % 2 : (x / (2 + 2 * (label - 2))) % 2;
          const uint32_t noise =
              (sample * 2654435761u) ^ (static_cast<uint32_t>(y * 28 + x) * 40503u);
          images.push_back(static_cast<uint8_t>(stripe * 180 + (noise >> 7) % 60));
        }
      }
      labels.push_back(static_cast<uint8_t>(label));
    }
    write_idx(dir + "/" + prefix + "-images-idx3-ubyte.gz", {count, 28, 28}, images);
    write_idx(dir + "/" + prefix + "-labels-idx1-ubyte.gz", {count}, labels);
  }
}

TEST(ProgressiveTools, RawStartFreezesLinearlyReportsFreezesAndRerunReusesLevels) {
  TempDir dir;
  write_stripes(dir.path().string(), 192);
  const std::string levels = dir.file("levels");
  // linear:0:0.5 over 3 epochs and 8 blocks: 1 block after epoch 1 (8 * 0.5 / 3), 2 after
  // epoch 2 (8 * 0.5 * 2 / 3).
  const std::string args = "--data fashion-mnist:" + dir.path().string() +
                           " --model resnet18 --width 4 --recycle 0 --epochs 3 --batch 32 "
                           "--threads 1 --freeze linear:0:0.5 --levels " + levels +
                           " --level-codec fp32 --json";
  ToolRun r = run(dir, "recycle-train", args);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["mode"], "progressive");
  EXPECT_EQ(r.last["freeze"], "linear:0:0.5");
  EXPECT_DOUBLE_EQ(r.last["recycle"].get<double>(), 0.25);
  const auto& freezes = r.last["freezes"];
  ASSERT_EQ(freezes.size(), 2u) << r.out;
  EXPECT_EQ(freezes[0]["epoch"], 2);
  EXPECT_EQ(freezes[0]["rule"], "linear:0:0.5");
  EXPECT_EQ(freezes[0]["from_blocks"], 0);
  EXPECT_EQ(freezes[0]["to_blocks"], 1);
  EXPECT_EQ(freezes[0]["level"]["source"], "raw");
  EXPECT_EQ(freezes[0]["level"]["samples"], 192);  // the training split alone
  EXPECT_EQ(freezes[1]["epoch"], 3);
  EXPECT_EQ(freezes[1]["to_blocks"], 2);
  EXPECT_EQ(freezes[1]["level"]["source"], freezes[0]["level"]["dir"]);
  EXPECT_LT(freezes[1]["trainable_after"].get<int64_t>(),
            freezes[0]["trainable_before"].get<int64_t>());
  const std::vector<std::string> sources = r.last["epoch_sources"];
  EXPECT_EQ(sources, (std::vector<std::string>{"raw", freezes[0]["level"]["dir"],
                                               freezes[1]["level"]["dir"]}));
  EXPECT_EQ(r.last["test_samples"], 96);
  EXPECT_GT(r.last["test_acc"].get<double>(), 0.25);  // better than chance on 4 classes

  // Each level is a whole cache that recycle-inspect reads.
  ToolRun inspect = run(dir, "recycle-inspect",
                        "--cache " + freezes[1]["level"]["dir"].get<std::string>() + " --json");
  ASSERT_EQ(inspect.code, 0) << describe(inspect);
  EXPECT_EQ(inspect.last["splits"]["train"]["samples"], 192);

  // The same run again: the same weights freeze, so both levels are found and reused.
  ToolRun again = run(dir, "recycle-train", args);
  ASSERT_EQ(again.code, 0) << describe(again);
  ASSERT_EQ(again.last["freezes"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(again.last["freezes"][i]["level"]["dir"], freezes[i]["level"]["dir"]);
    EXPECT_TRUE(again.last["freezes"][i]["level"]["reused"].get<bool>());
    EXPECT_EQ(again.last["freezes"][i]["level"]["computed"], 0);
  }
}

TEST(ProgressiveTools, StartsFromACacheAndDerivesFromIt) {
  TempDir dir;
  write_stripes(dir.path().string(), 128);
  const std::string data = "--data fashion-mnist:" + dir.path().string();
  const std::string cache = dir.file("cache");
  for (const char* split : {"train", "test"}) {
    ToolRun b = run(dir, "recycle-build", data + " --width 4 --recycle 0.25 --cache " + cache +
                                              " --split " + split + " --json");
    ASSERT_EQ(b.code, 0) << describe(b);
  }
  // linear:0:0.75 over 2 epochs and 8 blocks: 3 frozen after the first (the cache has 2).
  ToolRun r = run(dir, "recycle-train", "--cache " + cache + " --epochs 2 --batch 32 --threads 1 "
                                        "--freeze linear:0:0.75 --levels " + dir.file("levels") +
                                        " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  const auto& freezes = r.last["freezes"];
  ASSERT_EQ(freezes.size(), 1u) << r.out;
  EXPECT_EQ(freezes[0]["from_blocks"], 2);
  EXPECT_EQ(freezes[0]["to_blocks"], 3);
  EXPECT_EQ(freezes[0]["level"]["source"], cache);
  EXPECT_EQ(freezes[0]["level"]["computed"], 128);  // the training split alone
  EXPECT_EQ(r.last["test_samples"], 64);
}

// A level derived from another records what it was made from, not its base's weights file
// (whose prefix is not the level's): recycle-predict asks for the model the run saved, and
// serves the level with it and the head the run saved, as it serves any cache.
TEST(ProgressiveTools, ALevelIsServedWithTheModelAndHeadTheRunSaved) {
  TempDir dir;
  write_stripes(dir.path().string(), 128);
  const std::string data = "--data fashion-mnist:" + dir.path().string();
  const std::string model = dir.file("model.pt"), head = dir.file("head.pt");
  // Level 1 is built from raw data, level 2 derived from level 1 (as in the test above).
  ToolRun r = run(dir, "recycle-train", data + " --model resnet18 --width 4 --recycle 0 --epochs 3 "
                                        "--batch 32 --threads 1 --freeze linear:0:0.5 --levels " +
                                        dir.file("levels") + " --level-codec fp32 --save-model " +
                                        model + " --save-head " + head + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  ASSERT_EQ(r.last["freezes"].size(), 2u) << r.out;
  const std::string base = r.last["freezes"][0]["level"]["dir"];
  const std::string level = r.last["freezes"][1]["level"]["dir"];
  ASSERT_EQ(r.last["freezes"][1]["level"]["source"], base);
  const std::string predict = "--cache " + level + " --head " + head + " " + data +
                              " --split test --out " + dir.file("p.csv") + " --json";
  ToolRun p = run(dir, "recycle-predict", predict);
  EXPECT_EQ(p.code, 2) << describe(p);
  EXPECT_EQ(recycle::testing::count_lines(p.err), 1) << p.err;
  EXPECT_NE(p.err.find("is a progressive level, derived from " + base), std::string::npos)
      << p.err;
  EXPECT_NE(p.err.find("(--save-model FILE)"), std::string::npos) << p.err;
  p = run(dir, "recycle-predict", predict + " --weights " + model);
  ASSERT_EQ(p.code, 0) << describe(p);
  // The level holds the training split alone: the test split's records come from the weights
  // given, the model the run evaluated at its end.
  EXPECT_EQ(p.last["hits"], 0);
  EXPECT_DOUBLE_EQ(p.last["accuracy"].get<double>(), r.last["test_acc"].get<double>());
  ToolRun served =
      run(dir, "recycle-predict",
          "--cache " + level + " --head " + head + " " + data + " --split train --out " +
              dir.file("t.csv") + " --weights " + model + " --json");
  ASSERT_EQ(served.code, 0) << describe(served);
  EXPECT_EQ(served.last["hits"], 128);
  // Other weights make another prefix: refused as another setup.
  const std::string other = dir.file("other.pt");
  ASSERT_EQ(run(dir, "recycle-train", data + " --width 4 --recycle 0 --epochs 1 --threads 1 "
                                      "--eval-split none --save-model " + other).code, 0);
  p = run(dir, "recycle-predict", predict + " --weights " + other);
  EXPECT_EQ(p.code, 1) << describe(p);
  EXPECT_NE(p.err.find("prefix fingerprint"), std::string::npos) << p.err;
}

// recycle-train --freeze --nproc 2: each rank makes the levels of its own shard, the ranks freeze
// at the same epochs as one process, each freeze leaves fewer parameters to reduce (bytes per
// step fall, 4 bytes a trainable element with fp32 allreduce), and the accuracy is close to one
// process's. Not equal: one process of batch 32 shuffles the whole split and normalises each
// batch of 32; two ranks of batch 16 each shuffle their fixed half and normalise batches of 16,
// so the gradients differ. On this learnable data both reach high accuracy: the tolerance is 5
// of the 96 test images.
TEST(ProgressiveTools, DataParallelFreezesAtTheSameEpochsAndSendsLessAfterEachFreeze) {
  TempDir dir;
  write_stripes(dir.path().string(), 192);
  const std::string common = "--data fashion-mnist:" + dir.path().string() +
                             " --model resnet18 --width 4 --recycle 0 --epochs 3 --seed 5 "
                             "--freeze linear:0:0.5 --level-codec fp32 --json ";
  ToolRun one = run(dir, "recycle-train", common + "--batch 32 --threads 1 --levels " +
                                              dir.file("one"));
  ASSERT_EQ(one.code, 0) << describe(one);
  ToolRun two = run(dir, "recycle-train", common + "--batch 16 --nproc 2 --threads 2 --levels " +
                                              dir.file("two"));
  ASSERT_EQ(two.code, 0) << describe(two);
  EXPECT_EQ(two.last["world_size"], 2);
  EXPECT_EQ(two.last["steps"], one.last["steps"]);  // 3 epochs of 6 steps
  const auto& f1 = one.last["freezes"];
  const auto& f2 = two.last["freezes"];
  ASSERT_EQ(f1.size(), 2u) << one.out;
  ASSERT_EQ(f2.size(), 2u) << two.out;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(f2[i]["epoch"], f1[i]["epoch"]);
    EXPECT_EQ(f2[i]["to_blocks"], f1[i]["to_blocks"]);
    EXPECT_EQ(f2[i]["trainable_after"], f1[i]["trainable_after"]);
  }
  // Rank 0's levels hold its shard: half of the training split.
  EXPECT_EQ(f2[0]["level"]["source"], "raw");
  EXPECT_EQ(f2[0]["level"]["samples"], 96);
  EXPECT_EQ(f2[1]["level"]["source"], f2[0]["level"]["dir"]);
  EXPECT_NE(f2[1]["level"]["dir"].get<std::string>().find(dir.file("two") + "/shard-0-of-2/"),
            std::string::npos);
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("two") + "/shard-1-of-2"));
  // One phase per trainable set, each sending less than the one before.
  const auto& phases = two.last["comm_phases"];
  ASSERT_EQ(phases.size(), 3u) << two.out;
  const std::vector<int64_t> trainable = {f2[0]["trainable_before"].get<int64_t>(),
                                          f2[0]["trainable_after"].get<int64_t>(),
                                          f2[1]["trainable_after"].get<int64_t>()};
  for (int p = 0; p < 3; ++p) {
    EXPECT_EQ(phases[p]["first_epoch"], p + 1);
    EXPECT_EQ(phases[p]["steps"], 6);
    EXPECT_EQ(phases[p]["trainable"], trainable[p]);
    EXPECT_DOUBLE_EQ(phases[p]["bytes_per_step"].get<double>(), 4.0 * trainable[p]);
    if (p > 0) {
      EXPECT_LT(phases[p]["bytes_per_step"].get<double>(),
                phases[p - 1]["bytes_per_step"].get<double>());
    }
  }
  // Every rank evaluated its half of the test split; the counts are summed.
  EXPECT_EQ(two.last["test_samples"], 96);
  EXPECT_EQ(one.last["test_samples"], 96);
  EXPECT_NEAR(two.last["test_acc"].get<double>(), one.last["test_acc"].get<double>(), 5.0 / 96)
      << one.out << "\n" << two.out;
}

// The prefix block counts of the levels in a shard's directory (level-<blocks>-<block>-<hash>).
std::vector<int> level_blocks(const std::string& shard_dir) {
  std::vector<int> out;
  for (const auto& e : std::filesystem::directory_iterator(shard_dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("level-", 0) == 0) out.push_back(std::stoi(name.substr(6)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// auto under --nproc 2: the gradient norms the rule reads are measured after the allreduce and
// rank 0's decision is broadcast, so both ranks freeze the same blocks at the same epochs: their
// shards' level directories name the same prefix depths. auto:1 (a relative change below 1: the
// block's mean gradient norm did not double) freezes at the epoch boundaries after a block has
// two epochs of norms: after epochs 2 and 3 on this data and seed.
TEST(ProgressiveTools, DataParallelAutoFreezesTheSameBlocksOnEveryRank) {
  TempDir dir;
  write_stripes(dir.path().string(), 128);
  const std::string levels = dir.file("levels");
  ToolRun r = run(dir, "recycle-train", "--data fashion-mnist:" + dir.path().string() +
                                            " --width 4 --recycle 0 --epochs 4 --batch 16 "
                                            "--freeze auto:1 --levels " + levels +
                                            " --nproc 2 --threads 2 --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  const auto& freezes = r.last["freezes"];
  ASSERT_EQ(freezes.size(), 2u) << r.out;
  EXPECT_EQ(freezes[0]["epoch"], 3);
  EXPECT_EQ(freezes[1]["epoch"], 4);
  EXPECT_EQ(freezes[0]["rule"], "auto:1");
  EXPECT_EQ(level_blocks(levels + "/shard-0-of-2"), (std::vector<int>{1, 2}));
  EXPECT_EQ(level_blocks(levels + "/shard-1-of-2"), (std::vector<int>{1, 2}));
  ASSERT_EQ(r.last["comm_phases"].size(), 3u) << r.out;
  EXPECT_EQ(r.last["comm_phases"][1]["first_epoch"], 3);
  EXPECT_EQ(r.last["comm_phases"][2]["first_epoch"], 4);
}

TEST(ProgressiveTools, BadFreezeFlagsGiveOneLineAndNonZeroExit) {
  TempDir dir;
  write_stripes(dir.path().string(), 16);
  const std::string data = "--data fashion-mnist:" + dir.path().string() + " --width 4 ";
  for (const std::string& args :
       {data + "--recycle 0 --freeze sometimes --levels " + dir.file("l"),
        data + "--recycle 0 --freeze linear:0:0.5",
        data + "--recycle 0 --levels " + dir.file("l"),
        data + "--recycle 0.5 --no-cache --freeze auto --levels " + dir.file("l"),
        "--cache " + dir.file("c") + " --freeze auto --levels " + dir.file("l") + " --nproc 2"}) {
    const ToolRun r = run(dir, "recycle-train", args);
    EXPECT_NE(r.code, 0) << args << "\n" << describe(r);
    EXPECT_EQ(recycle::testing::count_lines(r.err), 1) << args << "\n" << describe(r);
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("l")));
}

// A scripted model freezes progressively too: the first level is built with the model's file
// named in full (its spec was cut at its first ':' and named no file). A .weights-PID.pt that a
// run killed outright left in the levels folder is removed; the run leaves none of its own.
TEST(ProgressiveTools, AScriptedModelFreezesAndNoWeightsFileIsLeft) {
  TempDir dir;
  write_stripes(dir.path().string(), 64);
  const std::string net = dir.file("net.ts"), levels = dir.file("levels");
  torch::manual_seed(5);
  recycle::testing::scripted_net(1, 4).save(net);
  std::filesystem::create_directories(levels);
  const pid_t dead = fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) _exit(0);
  ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
  const std::string orphan = levels + "/.weights-" + std::to_string(dead) + ".pt";
  recycle::testing::write_file(orphan, "left by a killed run");
  const ToolRun r = run(dir, "recycle-train",
                        "--data fashion-mnist:" + dir.path().string() + " --model torchscript:" +
                            net + " --recycle 0 --epochs 2 --batch 32 --threads 1 "
                            "--freeze linear:0:0.5 --levels " + levels + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  ASSERT_EQ(r.last["freezes"].size(), 1u) << r.out;
  EXPECT_EQ(r.last["freezes"][0]["level"]["source"], "raw");
  EXPECT_EQ(r.last["freezes"][0]["level"]["samples"], 64);
  for (const auto& e : std::filesystem::directory_iterator(levels)) {
    EXPECT_NE(e.path().filename().string().rfind(".weights-", 0), 0u) << e.path();
  }
}

}  // namespace
