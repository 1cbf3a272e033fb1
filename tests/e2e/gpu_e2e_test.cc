// The tools on a GPU (--device cuda): a cache built on the GPU holds the CPU's records within the
// codec's rounding under the same identity (a rerun on the other device computes nothing), and
// trains and predicts on either device. Skipped where no GPU is usable (every CI machine here);
// scripts/device_check.sh runs them on a GPU machine.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <sstream>
#include <string>
#include <vector>

#include "recycle/reader.h"
#include "tests/precompute/pattern_images.h"
#include "tests/tool_runner.h"

namespace {

using recycle::testing::describe;
using recycle::testing::TempDir;
using recycle::testing::ToolRun;

ToolRun run(const TempDir& dir, const std::string& tool, const std::string& args) {
  return recycle::testing::run_tool(dir, tool, args);
}

// Every record of a split, [n, ...], in the order it was built.
torch::Tensor all_records(const std::string& cache, const std::string& split) {
  recycle::ReaderOptions o;
  o.cache_dir = cache;
  o.split = split;
  recycle::SplitReader reader(o);
  std::vector<int64_t> positions(static_cast<size_t>(reader.size()));
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int64_t>(i);
  std::vector<at::Tensor> tensors;
  at::Tensor labels;
  reader.read(positions.data(), reader.size(), &tensors, &labels);
  return tensors.at(0);
}

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU is usable here";
    recycle::testing::write_pattern_images(dir_.path().string(),
                                           recycle::testing::patterns(64, 0));
    data_ = "--data fashion-mnist:" + dir_.path().string() + " --recycle 0.5 --seed 3 ";
  }
  TempDir dir_;
  std::string data_;
};

TEST_F(Gpu, ACacheBuiltOnTheGpuHoldsTheCpusRecordsUnderTheSameIdentity) {
  const std::string cpu = dir_.file("cpu"), gpu = dir_.file("gpu");
  ToolRun r =
      run(dir_, "recycle-build", data_ + "--codec fp32 --device cpu --cache " + cpu + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  r = run(dir_, "recycle-build", data_ + "--codec fp32 --device cuda --cache " + gpu + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["computed"], 64);
  const torch::Tensor a = all_records(cpu, "train"), b = all_records(gpu, "train");
  ASSERT_EQ(a.sizes(), b.sizes());
  // cuDNN's convolutions (TF32 where LibTorch allows it) against oneDNN's: close, not equal.
  const double rel = (a - b).abs().max().item<double>() / a.abs().max().item<double>();
  EXPECT_LT(rel, 1e-2) << "relative difference " << rel;
  // The device is not part of the identity: each device's rerun over the other's cache
  // computes nothing.
  r = run(dir_, "recycle-build", data_ + "--codec fp32 --device cuda --cache " + cpu + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["computed"], 0);
  r = run(dir_, "recycle-build", data_ + "--codec fp32 --device cpu --cache " + gpu + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["computed"], 0);
}

// Column `col` (0-based) of every row of a CSV file without quoted commas, header dropped.
std::vector<std::string> csv_column(const std::string& text, size_t col) {
  std::vector<std::string> out;
  std::istringstream lines(text);
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string field;
    for (size_t i = 0; i <= col && std::getline(fields, field, ','); ++i) {
    }
    out.push_back(field);
  }
  return out;
}

TEST_F(Gpu, AModelTrainsOnTheGpuAndItsHeadTrainsAndPredictsOnEitherDeviceAlike) {
  // Full training from the data on the GPU gives the encoder; the cache is built on the GPU.
  const std::string encoder = dir_.file("encoder.pt"), cache = dir_.file("cache");
  ToolRun r = run(dir_, "recycle-train",
                  "--data fashion-mnist:" + dir_.path().string() +
                      " --recycle 0 --device cuda --epochs 1 "
                      "--eval-split none "
                      "--save-model " +
                      encoder + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  r = run(dir_, "recycle-build",
          data_ + "--weights " + encoder + " --device cuda --cache " + cache);
  ASSERT_EQ(r.code, 0) << describe(r);
  std::vector<double> losses;
  for (const std::string device : {"cpu", "cuda"}) {
    r = run(dir_, "recycle-train", "--cache " + cache + " --device " + device +
                                       " --epochs 2 --batch 16 --eval-split none --seed 3 "
                                       "--save-head " + dir_.file("head-" + device + ".pt") +
                                       " --json");
    ASSERT_EQ(r.code, 0) << describe(r);
    losses.push_back(r.last["epoch_loss"].back().get<double>());
  }
  // The same seeded run: the same order and start, arithmetic that differs in rounding.
  EXPECT_NEAR(losses[0], losses[1], 0.05 * std::abs(losses[0]) + 1e-3);
  // recycle-predict on either device, with the head trained on the GPU: the same classes.
  std::vector<std::vector<std::string>> predicted;
  for (const std::string device : {"cpu", "cuda"}) {
    const std::string out = dir_.file("pred-" + device + ".csv");
    r = run(dir_, "recycle-predict",
            "--cache " + cache + " --head " + dir_.file("head-cuda.pt") + " --weights " + encoder +
                " --data fashion-mnist:" + dir_.path().string() + " --split train --device " +
                device + " --out " + out);
    ASSERT_EQ(r.code, 0) << describe(r);
    predicted.push_back(csv_column(recycle::testing::read_file(out), 3));  // pred
  }
  ASSERT_EQ(predicted[0].size(), 64u);
  EXPECT_EQ(predicted[0], predicted[1]);
}

}  // namespace
