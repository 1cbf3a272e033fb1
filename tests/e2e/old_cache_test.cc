// A cache built before the house issue's changes (tests/fixtures/cache-ba00a7b, see the
// README there) is still read, trained from and recognised by the current tools.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/tool_runner.h"

namespace fs = std::filesystem;
using nlohmann::json;
using recycle::testing::TempDir;

namespace {

// A copy of the fixture, so that nothing the tools do can change the one in the tree.
std::string copy_fixture(const TempDir& dir) {
  const std::string cache = dir.file("cache");
  fs::copy(std::string(recycle::testing::kSourceDir) + "/tests/fixtures/cache-ba00a7b", cache,
           fs::copy_options::recursive);
  return cache;
}

}  // namespace

TEST(OldCache, VerifiesWithItsIdentity) {
  TempDir dir;
  const std::string cache = copy_fixture(dir);
  const auto r =
      recycle::testing::run_tool(dir, "recycle-inspect", "--cache " + cache + " --verify --json");
  ASSERT_EQ(r.code, 0) << recycle::testing::describe(r);
  const json& j = r.last;
  EXPECT_EQ(j.at("model"), "resnet18:width=4,in_channels=1");
  EXPECT_EQ(j.at("fingerprint"), "59ff9cf6af1b0f8d942a6aa9e9a93963");
  EXPECT_EQ(j.at("split_at"), "layer3.1");
  EXPECT_EQ(j.at("codec"), "fp16");
  EXPECT_EQ(j.at("records"), 32);
  EXPECT_EQ(j.at("checked"), 32);
  EXPECT_EQ(j.at("corrupt"), 0);
  EXPECT_EQ(j.at("record_shapes"), json::parse("[[16,7,7]]"));
  // Its manifest predates SplitInfo::classes: read from the splits' data descriptions.
  EXPECT_EQ(j.at("splits").at("train").at("classes"), "5-9");
  EXPECT_EQ(j.at("splits").at("test").at("classes"), "5-9");
}

// Its stored head is a TorchScript archive (which loading runs): training refuses it in one
// line saying how to convert it; once converted, the same losses and accuracy as the code that
// made the cache printed.
TEST(OldCache, TrainsAsBeforeOnceItsHeadIsConverted) {
  TempDir dir;
  const std::string cache = copy_fixture(dir);
  const std::string train = "--cache " + cache + " --epochs 2 --threads 1 --seed 1 --batch 8 --json";
  auto r = recycle::testing::run_tool(dir, "recycle-train", train);
  EXPECT_EQ(r.code, 1) << recycle::testing::describe(r);
  EXPECT_EQ(recycle::testing::count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("recycle-inspect --cache " + cache + " --convert-old-head"),
            std::string::npos) << r.err;
  r = recycle::testing::run_tool(dir, "recycle-inspect",
                                 "--cache " + cache + " --convert-old-head --verify --json");
  ASSERT_EQ(r.code, 0) << recycle::testing::describe(r);
  EXPECT_EQ(r.last.at("fingerprint"), "59ff9cf6af1b0f8d942a6aa9e9a93963");
  r = recycle::testing::run_tool(dir, "recycle-train", train);
  ASSERT_EQ(r.code, 0) << recycle::testing::describe(r);
  const json& j = r.last;
  ASSERT_EQ(j.at("epoch_loss").size(), 2u);
  EXPECT_NEAR(j.at("epoch_loss")[0].get<double>(), 1.6229054927825928, 1e-5);
  EXPECT_NEAR(j.at("epoch_loss")[1].get<double>(), 1.4159079790115356, 1e-5);
  EXPECT_DOUBLE_EQ(j.at("test_acc").get<double>(), 0.1875);
  EXPECT_EQ(j.at("test_samples"), 16);
}

// The current build recognises the cache as its own: same model spec, prefix fingerprint,
// keyer, codec, preprocessing and keys, so a rerun computes and writes nothing.
TEST(OldCache, RebuildComputesNothing) {
  if (!recycle::testing::have_fashion_mnist()) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  TempDir dir;
  const std::string cache = copy_fixture(dir);
  const auto r = recycle::testing::run_tool(
      dir, "recycle-build",
      "--data fashion-mnist --split train --classes 5-9 --limit 16 --width 4 --recycle 0.75 "
      "--codec fp16 --threads 1 --json --cache " + cache);
  ASSERT_EQ(r.code, 0) << recycle::testing::describe(r);
  const json& j = r.last;
  EXPECT_EQ(j.at("computed"), 0);
  EXPECT_EQ(j.at("index_written"), 0);
  EXPECT_EQ(j.at("records"), 16);        // the train split's
  EXPECT_EQ(j.at("cache_records"), 32);  // train's and test's
}
