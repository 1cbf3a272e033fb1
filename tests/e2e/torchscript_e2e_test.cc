// recycle-build and recycle-train with --model torchscript:FILE, on a scripted net this test
// builds and saves (tests/models/scripted_net.h) and tiny IDX files: build, rerun, train from
// the cache, pretrain and reuse the weights, a changed file refused, and activations that are
// not finite refused in one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

#include "tests/precompute/pattern_images.h"
#include "tests/models/scripted_net.h"
#include "tests/tool_runner.h"

namespace {

using recycle::testing::describe;
using recycle::testing::TempDir;
using recycle::testing::ToolRun;

ToolRun run(const TempDir& dir, const std::string& tool, const std::string& args) {
  return recycle::testing::run_tool(dir, tool, args);
}

void save_net(const std::string& path, uint64_t seed, int64_t classes = 10) {
  torch::manual_seed(seed);
  recycle::testing::scripted_net(1, classes).save(path);
}

TEST(TorchScriptTools, BuildTrainAndAChangedFileRefused) {
  TempDir dir;
  recycle::testing::write_pattern_images(dir.path().string(), recycle::testing::patterns(40, 8));
  const std::string net = dir.file("net.ts"), cache = dir.file("cache");
  save_net(net, 1);
  const std::string data = "--data fashion-mnist:" + dir.path().string() + " --threads 1 ";
  const std::string build =
      data + "--model torchscript:" + net + " --recycle 0.5 --cache " + cache + " --json";
  ToolRun r = run(dir, "recycle-build", build);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["samples"], 48);
  EXPECT_EQ(r.last["computed"], 40);
  r = run(dir, "recycle-inspect", "--cache " + cache + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  const std::string model = r.last["model"];
  EXPECT_EQ(model.rfind("torchscript:" + net + ",xxh3=", 0), 0u) << model;
  EXPECT_NE(model.find(",in_channels=1,in_height=28,in_width=28"), std::string::npos) << model;
  EXPECT_EQ(r.last["split_at"], "stage2");
  r = run(dir, "recycle-build", build);  // a rerun computes nothing
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["computed"], 0);
  // The cache names its program; the tools do not open it: the user gives it.
  r = run(dir, "recycle-train", "--cache " + cache + " --epochs 2 --eval-split none");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_EQ(recycle::testing::count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("was made from the program " + net + " (torchscript:FILE); the tools open "
                       "no file that data names: give --model torchscript:FILE"),
            std::string::npos) << r.err;
  const std::string train = "--cache " + cache + " --model torchscript:" + net + " ";
  r = run(dir, "recycle-train", train + "--epochs 2 --eval-split none --threads 1 --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["train_samples"], 48);
  const nlohmann::json fp32_loss = r.last["epoch_loss"];
  // Another program is refused, whatever the cache names.
  const std::string other = dir.file("other.ts");
  save_net(other, 7);
  r = run(dir, "recycle-train", "--cache " + cache + " --model torchscript:" + other +
                                " --epochs 1 --eval-split none");
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("(give the file it was made from)"), std::string::npos) << r.err;
  // A scripted head trains in bf16 mixed precision too: autocast reaches the operators
  // TorchScript runs, so the losses are not fp32's.
  r = run(dir, "recycle-train", train + "--epochs 2 --eval-split none --threads 1 "
                                "--precision bf16 --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["precision"], "bf16");
  EXPECT_NE(r.last["epoch_loss"], fp32_loss);

  // Pretrain the whole scripted model, then cache with its weights (a new cache).
  const std::string enc = dir.file("enc.pt");
  r = run(dir, "recycle-train", data + "--model torchscript:" + net + " --recycle 0 --epochs 1 "
                                "--eval-split none --save-model " + enc + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  r = run(dir, "recycle-build", data + "--model torchscript:" + net + " --weights " + enc +
                                " --split-at stage3 --cache " + dir.file("cache2") + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  // Building into the first cache with those weights: another prefix, refused.
  r = run(dir, "recycle-build", data + "--model torchscript:" + net + " --weights " + enc +
                                " --recycle 0.5 --cache " + cache);
  EXPECT_NE(r.code, 0) << describe(r);
  EXPECT_NE(r.err.find("fingerprint"), std::string::npos) << r.err;

  // The transfer task's shape: a 5-class file pretrained on classes 0-4 (its own classifier
  // kept), cached for classes 5-9 (a new classifier of as many outputs), trained from the cache.
  const std::string net5 = dir.file("net5.ts"), enc5 = dir.file("enc5.pt");
  save_net(net5, 3, 5);
  r = run(dir, "recycle-train", data + "--classes 0-4 --model torchscript:" + net5 +
                                " --recycle 0 --epochs 1 --eval-split none --save-model " + enc5);
  ASSERT_EQ(r.code, 0) << describe(r);
  r = run(dir, "recycle-build", data + "--classes 5-9 --model torchscript:" + net5 + " --weights " +
                                enc5 + " --recycle 0.25 --cache " + dir.file("cache5"));
  ASSERT_EQ(r.code, 0) << describe(r);
  r = run(dir, "recycle-train", "--cache " + dir.file("cache5") + " --model torchscript:" + net5 +
                                " --epochs 1 --eval-split none --threads 1 --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["train_samples"], 23);  // classes 5-9 among the 48 samples

  // The same path with other contents: the cache and the weights file are refused.
  save_net(net, 2);
  r = run(dir, "recycle-train", train + "--epochs 1 --eval-split none");
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("was made from torchscript:FILE with xxh3"), std::string::npos) << r.err;
  r = run(dir, "recycle-build", data + "--model torchscript:" + net + " --weights " + enc +
                                " --recycle 0.5 --cache " + dir.file("cache3"));
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("weights " + enc + " was made from torchscript:FILE with xxh3"),
            std::string::npos) << r.err;
  r = run(dir, "recycle-build", build);  // a new digest: another model spec
  EXPECT_NE(r.code, 0) << describe(r);
  EXPECT_NE(r.err.find("model"), std::string::npos) << r.err;
}

// Activations that are not finite, cached with --codec int8 or fp32 (no codec stores them; fp32
// stored them, and verify called the cache clean, before issue 54): the codec's error, thrown
// inside the build's parallel encode loop, reaches the user as one line naming the sample and
// the prefix's output, with exit status 2 (not as std::terminate's abort), and a rerun says the
// same. The gate
// keeps the model's load-time probe (values in [-1, 1]) finite and turns the normalised images
// (up to 1.97) into NaN. A model that is not finite on the probe is refused when it loads.
TEST(TorchScriptTools, ActivationsThatAreNotFiniteAreRefusedWithOneLine) {
  TempDir dir;
  recycle::testing::write_pattern_images(dir.path().string(), recycle::testing::patterns(12, 1));
  const std::string gated = dir.file("gated.ts"), nan = dir.file("nan.ts");
  torch::manual_seed(7);
  recycle::testing::scripted_net(1, 10, true, "x * torch.sqrt(1.5 - torch.amax(x))").save(gated);
  torch::jit::Module m = recycle::testing::scripted_net(1, 10);
  {
    torch::NoGradGuard no_grad;
    for (const auto& p : m.named_parameters(/*recurse=*/true)) {
      p.value.fill_(std::numeric_limits<float>::quiet_NaN());
    }
  }
  m.save(nan);
  const std::string data = "--data fashion-mnist:" + dir.path().string() + " --threads 2 ";
  for (const std::string codec : {"int8", "fp32"}) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      const ToolRun r = run(dir, "recycle-build", data + "--model torchscript:" + gated +
                                                      " --recycle 0.5 --codec " + codec +
                                                      " --cache " + dir.file("cache-" + codec));
      EXPECT_EQ(r.code, 2) << describe(r);
      EXPECT_EQ(recycle::testing::count_lines(r.err), 1) << r.err;
      EXPECT_NE(r.err.find("sample "), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(codec + " codec: value "), std::string::npos) << r.err;
      if (codec == "int8") EXPECT_NE(r.err.find("(channel "), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(" is NaN; no codec stores values that are not finite: the prefix's "
                           "output is not finite"),
                std::string::npos)
          << r.err;
      EXPECT_EQ(r.err.find("terminate"), std::string::npos) << r.err;
    }
  }
  const ToolRun r = run(dir, "recycle-build", data + "--model torchscript:" + nan +
                                                  " --recycle 0.5 --cache " + dir.file("cache2"));
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("are not finite"), std::string::npos) << r.err;
}

// Activations beyond fp16's range, from a scripted net whose first conv's weights are scaled
// by 1e5 (the repro): --codec fp16 refuses them with one line naming the sample and the
// largest value, where it stored infinities (verify called the cache clean and training failed
// at step 1 with a NaN loss); bf16 keeps fp32's range and builds.
TEST(TorchScriptTools, Fp16RefusesActivationsBeyondItsRangeWithOneLine) {
  TempDir dir;
  recycle::testing::write_pattern_images(dir.path().string(), recycle::testing::patterns(12, 1));
  const std::string big = dir.file("big.ts");
  torch::manual_seed(7);
  torch::jit::Module m = recycle::testing::scripted_net(1, 10);
  {
    torch::NoGradGuard no_grad;
    for (const auto& p : m.named_parameters(/*recurse=*/true)) {
      if (p.name == "conv1.weight") p.value.mul_(1e5);
    }
  }
  m.save(big);
  const std::string data = "--data fashion-mnist:" + dir.path().string() + " --threads 2 ";
  ToolRun r = run(dir, "recycle-build",
                  data + "--model torchscript:" + big + " --recycle 0.5 --codec fp16 --cache " +
                      dir.file("fp16"));
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("sample "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(position "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("fp16 codec: the largest value, "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("use --codec bf16 or fp32"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate"), std::string::npos) << r.err;
  r = run(dir, "recycle-build", data + "--model torchscript:" + big +
                                    " --recycle 0.5 --codec bf16 --cache " + dir.file("bf16"));
  EXPECT_EQ(r.code, 0) << describe(r);
}

// --model torchscript:FILE,xxh3=<a stale digest> is a usage error of one line (it escaped the
// command line's parse as an uncaught exception); a device as the model file is refused before
// anything reads it (/dev/zero was read until memory ran out).
TEST(TorchScriptTools, AStaleDigestAndADeviceAreRefusedWithOneLine) {
  TempDir dir;
  recycle::testing::write_pattern_images(dir.path().string(), recycle::testing::patterns(12, 1));
  const std::string net = dir.file("net.ts");
  save_net(net, 1);
  const std::string data = "--data fashion-mnist:" + dir.path().string() + " --threads 1 ";
  ToolRun r = run(dir, "recycle-build", data + "--model 'torchscript:" + net +
                                            ",xxh3=00000000000000000000000000000000' "
                                            "--recycle 0.5 --cache " + dir.file("cache"));
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("changed since this spec was made"), std::string::npos) << r.err;
  EXPECT_EQ(recycle::testing::count_lines(r.err), 1) << r.err;
  r = run(dir, "recycle-build", data + "--model torchscript:/dev/zero --recycle 0.5 --cache " +
                                    dir.file("cache"));
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("model file /dev/zero: is a device, not a regular file"), std::string::npos)
      << r.err;
  EXPECT_EQ(recycle::testing::count_lines(r.err), 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("cache")));
}

// A scripted model that does not run on the data (3 input channels, 1-channel images): one
// line naming what TorchScript said; --verbose prints its traceback too.
TEST(TorchScriptTools, AModelThatDoesNotRunIsOneLineAndVerboseShowsTheTraceback) {
  TempDir dir;
  recycle::testing::write_pattern_images(dir.path().string(), recycle::testing::patterns(12, 1));
  const std::string net = dir.file("rgb.ts");
  torch::manual_seed(3);
  recycle::testing::scripted_net(3, 10).save(net);
  const std::string args = "--data fashion-mnist:" + dir.path().string() +
                           " --threads 1 --model torchscript:" + net +
                           " --recycle 0.5 --cache " + dir.file("cache");
  ToolRun r = run(dir, "recycle-build", args);
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("does not run on a batch of 1x28x28 inputs: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("channels"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(--verbose shows more)"), std::string::npos) << r.err;
  EXPECT_EQ(recycle::testing::count_lines(r.err), 1) << r.err;
  r = run(dir, "recycle-build", args + " --verbose");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_GT(recycle::testing::count_lines(r.err), 3) << r.err;
  EXPECT_NE(r.err.find("Traceback"), std::string::npos) << r.err;
}

}  // namespace
