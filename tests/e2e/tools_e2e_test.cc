// End-to-end tests: the real recycle-build, recycle-train and recycle-inspect binaries on small
// slices of real Fashion-MNIST, and on tiny IDX files these tests write.
#include <gtest/gtest.h>

#include <filesystem>

#include "recycle/options.h"
#include "tests/precompute/pattern_images.h"
#include "tests/tool_runner.h"

namespace {

using nlohmann::json;
using recycle::testing::TempDir;

using recycle::testing::count_lines;
using recycle::testing::describe;
using recycle::testing::ToolRun;

using recycle::testing::patterns;
using recycle::testing::write_pattern_images;

ToolRun run(const TempDir& dir, const std::string& tool, const std::string& args) {
  return recycle::testing::run_tool(dir, tool, args);
}

using recycle::testing::have_fashion_mnist;

// The transfer task in small: pretrain on classes 0-4, cache classes 5-9 at 50%, train the
// head from the cache, and check everything the tools promise along the way.
TEST(Tools, TransferTaskEndToEnd) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string enc = dir.file("encoder.pt"), cache = dir.file("cache");

  ToolRun r = run(dir, "recycle-train",
                  "--data fashion-mnist --classes 0-4 --limit 3000 --recycle 0 --epochs 1 "
                  "--eval-split none --save-model " + enc + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["mode"], "full");
  EXPECT_EQ(r.last["train_samples"], 3000);
  ASSERT_TRUE(std::filesystem::exists(enc));

  const std::string build = "--data fashion-mnist --classes 5-9 --weights " + enc +
                            " --recycle 0.5 --cache " + cache + " --json";
  r = run(dir, "recycle-build", build + " --split train --limit 1500");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["samples"], 1500);
  EXPECT_EQ(r.last["computed"], r.last["unique"]);
  EXPECT_GT(r.last["bytes"].get<int64_t>(), 1500 * 6000);  // fp16 32x14x14 = 12.5 KB each
  const int64_t train_records = r.last["records"];

  r = run(dir, "recycle-build", build + " --split test --limit 1000");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["samples"], 1000);

  // A rerun computes and writes nothing.
  r = run(dir, "recycle-build", build + " --split train --limit 1500");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["computed"], 0);
  EXPECT_EQ(r.last["bytes"], 0);
  EXPECT_EQ(r.last["index_written"], 0);
  EXPECT_EQ(r.last["skipped"], 1500);

  // A larger limit computes only the new samples.
  r = run(dir, "recycle-build", build + " --split train --limit 1600");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_LE(r.last["computed"].get<int64_t>(), 100);
  EXPECT_GT(r.last["computed"].get<int64_t>(), 90);
  EXPECT_EQ(r.last["index_written"], 100);

  // Another codec, split point or weights is refused with one line naming it.
  r = run(dir, "recycle-build", build + " --split train --limit 1600 --codec fp32");
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("codec: the cache has fp16, this run asks for fp32"), std::string::npos)
      << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  r = run(dir, "recycle-build",
          "--data fashion-mnist --classes 5-9 --weights " + enc + " --recycle 0.75 --cache " +
              cache + " --limit 10");
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("split point"), std::string::npos) << r.err;
  // Without the --weights the cache was built from: the file is asked for (the prefix would be
  // another, initialised at random), and --rebuild is not suggested.
  r = run(dir, "recycle-build",
          "--data fashion-mnist --classes 5-9 --recycle 0.5 --cache " + cache + " --limit 10");
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("was built from --weights " + enc), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--rebuild"), std::string::npos) << r.err;

  r = run(dir, "recycle-inspect", "--cache " + cache + " --verify --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["corrupt"], 0);
  EXPECT_EQ(r.last["checked"], r.last["records"]);
  EXPECT_GT(r.last["records"].get<int64_t>(), train_records);
  EXPECT_EQ(r.last["codec"], "fp16");
  EXPECT_EQ(r.last["keyer"], "xxh3");
  EXPECT_EQ(r.last["splits"]["train"]["samples"], 1600);
  EXPECT_EQ(r.last["splits"]["test"]["complete"], true);

  const std::string head = dir.file("head.pt");
  r = run(dir, "recycle-train", "--cache " + cache + " --epochs 3 --save-head " + head + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["mode"], "cache");
  EXPECT_EQ(r.last["recycle"], 0.5);
  EXPECT_EQ(r.last["epoch_seconds"].size(), 3u);
  EXPECT_EQ(r.last["test_samples"], 1000);
  // Five classes: chance is 0.2. The head must learn.
  EXPECT_GT(r.last["test_acc"].get<double>(), 0.7) << r.out;
  EXPECT_TRUE(std::filesystem::exists(head));

  // The same seed gives the same training run.
  ToolRun again = run(dir, "recycle-train", "--cache " + cache + " --epochs 3 --json");
  ASSERT_EQ(again.code, 0) << describe(again);
  EXPECT_EQ(again.last["test_acc"], r.last["test_acc"]);
  EXPECT_EQ(again.last["epoch_loss"], r.last["epoch_loss"]);
  EXPECT_FALSE(again.last.contains("epoch_sources"));
  // --alternate-preload trains the same run, its epochs taking turns between the cache and the
  // split preloaded in memory (the same batches).
  ToolRun alternate =
      run(dir, "recycle-train", "--cache " + cache + " --epochs 3 --alternate-preload --json");
  ASSERT_EQ(alternate.code, 0) << describe(alternate);
  EXPECT_EQ(alternate.last["epoch_sources"], json({"cache", "preloaded", "preloaded"}));
  ASSERT_EQ(alternate.last["epoch_loss"].size(), 3u);
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_NEAR(alternate.last["epoch_loss"][e].get<double>(),
                r.last["epoch_loss"][e].get<double>(), 1e-6)
        << "epoch " << e + 1;
  }
  EXPECT_GT(alternate.last["memory"]["preload_bytes"].get<int64_t>(), 0);
  // --precision bf16 trains the same head in bf16 mixed precision: not the same numbers, but
  // as good a head.
  EXPECT_EQ(r.last["precision"], "fp32");
  ToolRun bf16 =
      run(dir, "recycle-train", "--cache " + cache + " --epochs 3 --precision bf16 --json");
  ASSERT_EQ(bf16.code, 0) << describe(bf16);
  EXPECT_EQ(bf16.last["precision"], "bf16");
  EXPECT_NE(bf16.last["epoch_loss"], r.last["epoch_loss"]);
  EXPECT_NEAR(bf16.last["test_acc"].get<double>(), r.last["test_acc"].get<double>(), 0.05)
      << bf16.out;

  // --memory-budget (256 MiB by default) is divided as reported, the index of both splits
  // included, and the block cache stays within its share.
  const json& memory = r.last["memory"];
  EXPECT_EQ(memory["queue_bytes"].get<int64_t>() + memory["preload_bytes"].get<int64_t>() +
                memory["index_bytes"].get<int64_t>() + memory["block_cache_bytes"].get<int64_t>(),
            int64_t{256} << 20)
      << memory;
  EXPECT_GE(memory["index_bytes"].get<int64_t>(), (1600 + 1000) * 40) << memory;
  EXPECT_GT(memory["block_cache_used_bytes"].get<int64_t>(), 0) << memory;
  EXPECT_LE(memory["block_cache_used_bytes"], memory["block_cache_bytes"]) << memory;
  // A budget the batches leave no block cache in is refused with one line of figures.
  r = run(dir, "recycle-train", "--cache " + cache + " --memory-budget 16 --batch 1024 --epochs 1");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("--memory-budget 16 MB is too small"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("for the index"), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;

  // Training checks the cache against weights it is given, and refuses other weights or
  // another split point with one line naming what differs.
  const std::string other = dir.file("other.pt");
  r = run(dir, "recycle-train",
          "--data fashion-mnist --classes 0-4 --limit 128 --recycle 0 --epochs 1 "
          "--eval-split none --save-model " + other);
  ASSERT_EQ(r.code, 0) << describe(r);
  r = run(dir, "recycle-train", "--cache " + cache + " --weights " + other + " --epochs 1");
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("prefix fingerprint (weights)"), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  r = run(dir, "recycle-train", "--cache " + cache + " --weights " + enc + " --recycle 0.75");
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("split point"), std::string::npos) << r.err;
  // --split picks the cached split to train on.
  r = run(dir, "recycle-train",
          "--cache " + cache + " --weights " + enc +
              " --recycle 0.5 --split test --eval-split none --epochs 1 --json");
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["train_samples"], 1000);

  // Freezing without recycling, from raw data, trains the same head shape; evaluated after
  // each epoch too, the last evaluation being the final one.
  r = run(dir, "recycle-train",
          "--data fashion-mnist --classes 5-9 --limit 1000 --weights " + enc +
              " --recycle 0.5 --no-cache --epochs 2 --batch 64 --eval-every-epoch --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["mode"], "frozen");
  EXPECT_GT(r.last["test_acc"].get<double>(), 0.7);
  ASSERT_EQ(r.last["epoch_test_acc"].size(), 2u) << r.last.dump();
  EXPECT_GT(r.last["epoch_test_acc"][0].get<double>(), 0.5) << r.last.dump();
  EXPECT_EQ(r.last["epoch_test_acc"][1], r.last["test_acc"]);
}

TEST(Tools, DuplicateSamplesAreComputedOnce) {
  TempDir dir;
  const int unique = 20, copies = 3, n = unique * copies;
  std::vector<int> pattern;
  for (int c = 0; c < copies; ++c) {
    for (int i = 0; i < unique; ++i) pattern.push_back(i);
  }
  write_pattern_images(dir.path().string(), pattern);
  ToolRun r = run(dir, "recycle-build",
                  "--data fashion-mnist:" + dir.path().string() + " --recycle 0.25 --width 4 "
                  "--cache " + dir.file("cache") + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["samples"], n);
  EXPECT_EQ(r.last["unique"], unique);
  EXPECT_EQ(r.last["computed"], unique);
  EXPECT_EQ(r.last["records"], unique);
}

TEST(Tools, BadFlagsGiveOneLineAndNonZeroExit) {
  TempDir dir;
  const std::string cache = "--cache " + dir.file("c");
  struct Case {
    std::string tool, args;
    int code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"recycle-build", "--data fashion-mnist --recycle 1.7 " + cache, 2, "--recycle"},
      {"recycle-build", "--data fashion-mnist --recycle 0.5 --batch 0 " + cache, 2, "--batch"},
      {"recycle-build", "--data fashion-mnist " + cache, 2, "--recycle"},
      {"recycle-build", "--data nonsense --recycle 0.5 " + cache, 2, "unknown data"},
      {"recycle-build", "--data fashion-mnist:/nonexistent --recycle 0.5 " + cache, 1,
       "/nonexistent"},
      {"recycle-build", "--data fashion-mnist --recycle 0.5 --codec int3 " + cache, 2, "--codec"},
      // The bounds are the library's (validate()), in its words; the command line has none.
      {"recycle-build", "--data fashion-mnist --recycle -0.5 " + cache, 2,
       "--recycle must be in 0..1, not -0.5"},
      {"recycle-build", "--data fashion-mnist --recycle 0.5 --augment hflip --views 300 " + cache,
       2, "--views must be in 0..256, not 300"},
      {"recycle-build", "--data fashion-mnist --recycle 0.5 --nproc 300 " + cache, 2,
       "--nproc must be in 0..256, not 300"},
      {"recycle-train", cache + " --prefetch 65", 2, "--prefetch must be in 0..64, not 65"},
      {"recycle-build", "--data fashion-mnist --recycle 0.5 --keyer md5 --limit 5 " + cache, 2,
       "unknown keyer"},
      {"recycle-train", cache, 1, "no cache at"},
      {"recycle-train", cache + " --preload --alternate-preload", 2,
       "--preload and --alternate-preload do not go together"},
      {"recycle-train", "--alternate-preload", 2, "--alternate-preload needs --cache"},
      {"recycle-train", cache + " --precision fp16", 2, "--precision"},
      {"recycle-train", cache + " --eval-every-epoch --eval-split none", 2,
       "--eval-every-epoch needs an evaluation split"},
      {"recycle-train", "", 2, "--cache"},
      {"recycle-inspect", cache, 1, "no cache at"},
      {"recycle-inspect", "", 2, "--cache"},
      // A word it does not know is named, even where a required flag is missing too.
      {"recycle-inspect", "--bogus", 2, "not expected: --bogus"},
      {"recycle-inspect", "--bogus 3", 2, "not expected: --bogus 3"},
      // A newline typed into a value is written as its escape: still one line.
      {"recycle-build", "--device 'cpu\ncpu' --data fashion-mnist --recycle 0.5 --limit 5 " +
       cache, 2, "--device cpu\\ncpu: expected cpu, cuda or cuda:N"},
  };
  for (const Case& c : cases) {
    ToolRun r = run(dir, c.tool, c.args);
    EXPECT_EQ(r.code, c.code) << c.tool << " " << c.args << "\n" << describe(r);
    EXPECT_EQ(count_lines(r.err), 1) << c.tool << " " << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.tool << " " << c.args << "\n" << r.err;
  }
  // Nothing was created by the failed runs.
  EXPECT_FALSE(std::filesystem::exists(dir.file("c")));
}

// --profile writes a Chrome trace of the second epoch only (the first warms up), with the
// trainer's step scopes and the ATen ops inside them; a path it cannot write fails first.
TEST(Tools, ProfileWritesATraceOfTheSecondEpoch) {
  TempDir dir;
  const int n = 64;
  write_pattern_images(dir.path().string(), patterns(n, 0));
  const std::string cache = dir.file("cache"), trace = dir.file("trace.json");
  ToolRun r = run(dir, "recycle-build",
                  "--data fashion-mnist:" + dir.path().string() + " --recycle 0.5 --width 4 "
                  "--cache " + cache + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);

  r = run(dir, "recycle-train",
          "--cache " + cache + " --epochs 2 --batch 16 --eval-split none --profile " + trace +
              " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  // LibTorch's legacy writer may leave a comma before the closing bracket.
  std::string text = recycle::testing::read_file(trace);
  const size_t close = text.find_last_of(']');
  ASSERT_NE(close, std::string::npos) << text.substr(0, 200);
  const size_t last = text.find_last_not_of(" \n\t", close - 1);
  if (last != std::string::npos && text[last] == ',') text.erase(last, 1);
  const json events = json::parse(text, nullptr, false);
  ASSERT_FALSE(events.is_discarded()) << text.substr(0, 200);
  const json& list = events.is_object() ? events["traceEvents"] : events;
  int forward_scopes = 0, convolutions = 0;
  for (const json& e : list) {
    if (e.value("ph", "") != "X") continue;
    const std::string name = e.value("name", "");
    forward_scopes += name == "step.forward" ? 1 : 0;
    convolutions += name.find("convolution") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(forward_scopes, n / 16);  // the 4 steps of one epoch
  EXPECT_GT(convolutions, 0);

  r = run(dir, "recycle-train",
          "--cache " + cache + " --epochs 2 --profile " + dir.file("missing/dir/trace.json"));
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--profile: cannot write"), std::string::npos) << r.err;
}

TEST(Tools, HelpPrintsUsageAndExitsZero) {
  TempDir dir;
  for (const char* tool : {"recycle-build", "recycle-train", "recycle-inspect"}) {
    ToolRun r = run(dir, tool, "--help");
    EXPECT_EQ(r.code, 0) << describe(r);
    EXPECT_NE(r.out.find("--cache"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--json"), std::string::npos) << r.out;
  }
}

// The help texts give the bounds validate() checks, made from the same constants.
TEST(Tools, HelpTextsShowTheLibrarysBounds) {
  using namespace recycle;
  TempDir dir;
  const auto range = [](auto least, auto most) {
    return std::to_string(least) + ".." + std::to_string(most);
  };
  ToolRun r = run(dir, "recycle-build", "--help");
  ASSERT_EQ(r.code, 0) << describe(r);
  for (const std::string& bound :
       {range(1, kMaxBatch), range(0, kMaxThreads), range(1, kMaxViews), range(1, kMaxWidth),
        range(1, kMaxNproc), range(1, kMaxTimeoutSeconds), std::string("0..1 ")}) {
    EXPECT_NE(r.out.find(bound), std::string::npos) << bound << "\n" << r.out;
  }
  r = run(dir, "recycle-train", "--help");
  ASSERT_EQ(r.code, 0) << describe(r);
  for (const std::string& bound :
       {range(1, kMaxEpochs), range(0, kMaxPrefetch), range(kMinMemoryBudgetMb, kMaxMemoryBudgetMb),
        range(1, kMaxWorldSize), range(1, kMaxThrottleMs), std::string("0..0.999")}) {
    EXPECT_NE(r.out.find(bound), std::string::npos) << bound << "\n" << r.out;
  }
}

}  // namespace
