// End-to-end: the real recycle-build, recycle-train and recycle-inspect on an image folder the
// test writes from Fashion-MNIST: a PNG export trains to the accuracy of the IDX split it came
// from, and an RGB JPEG export works with the default (1-channel) model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "engine/data/dataset.h"
#include "tests/data/image_files.h"
#include "tests/tool_runner.h"

namespace {

namespace fs = std::filesystem;
using recycle::testing::describe;
using recycle::testing::TempDir;
using recycle::testing::ToolRun;

// Fashion-MNIST's `split` (the first `limit` samples) as root/<split>/<label>/<position>.<ext>,
// PNG gray or JPEG RGB (the gray value in R, G and B).
void export_split(const std::string& root, const std::string& split, int64_t limit, bool jpeg) {
  recycle::DatasetOptions o;
  o.spec = "fashion-mnist";
  o.split = split;
  o.limit = limit;
  const recycle::Dataset d = recycle::load_dataset(o);
  for (size_t i = 0; i < d.size(); ++i) {
    const fs::path cls = fs::path(root) / split / std::to_string(d.labels[i]);
    fs::create_directories(cls);
    char name[32];
    std::snprintf(name, sizeof name, "%05zu.%s", i, jpeg ? "jpg" : "png");
    const uint8_t* p = d.item_pixels(i);
    std::vector<uint8_t> gray(p, p + d.item_bytes());
    if (!jpeg) {
      recycle::testing::write_gray_png((cls / name).string(), 28, 28, gray);
      continue;
    }
    std::vector<uint8_t> rgb;
    for (uint8_t v : gray) rgb.insert(rgb.end(), {v, v, v});
    recycle::testing::write_file((cls / name).string(),
                                 recycle::testing::jpeg_bytes(28, 28, TJPF_RGB, rgb));
  }
}

// Builds train and test of `data` at 50% into cache, trains the head 3 epochs; test_acc.
double build_and_train(const TempDir& dir, const std::string& data, const std::string& cache,
                       const std::string& limits_train, const std::string& limits_test) {
  const std::string build = "--data " + data + " --recycle 0.5 --cache " + cache + " --json";
  ToolRun r =
      recycle::testing::run_tool(dir, "recycle-build", build + " --split train" + limits_train);
  EXPECT_EQ(r.code, 0) << describe(r);
  r = recycle::testing::run_tool(dir, "recycle-build", build + " --split test" + limits_test);
  EXPECT_EQ(r.code, 0) << describe(r);
  r = recycle::testing::run_tool(
      dir, "recycle-train", "--cache " + cache + " --epochs 3 --seed 1 --eval-split test --json");
  EXPECT_EQ(r.code, 0) << describe(r);
  return r.last.value("test_acc", -1.0);
}

TEST(ImageFolderTools, PngExportTrainsLikeTheIdxSplitAndJpegRgbWorksWithOneChannel) {
  if (!recycle::testing::have_fashion_mnist()) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  TempDir dir;
  const std::string png = dir.file("png"), jpg = dir.file("jpg");
  export_split(png, "train", 2000, false);
  export_split(png, "test", 500, false);
  const double idx_acc = build_and_train(dir, "fashion-mnist", dir.file("idx-cache"),
                                         " --limit 2000", " --limit 500");
  const double png_acc = build_and_train(dir, "imagefolder:" + png, dir.file("png-cache"), "", "");
  EXPECT_GT(idx_acc, 0.5);
  EXPECT_NEAR(png_acc, idx_acc, 0.07) << "PNG " << png_acc << ", IDX " << idx_acc;

  // The cache says how its inputs were made, and verifies clean.
  ToolRun r = recycle::testing::run_tool(dir, "recycle-inspect",
                                         "--cache " + dir.file("png-cache") + " --verify --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["corrupt"], 0);

  export_split(jpg, "train", 600, true);
  export_split(jpg, "test", 200, true);
  const double jpg_acc = build_and_train(dir, "imagefolder:" + jpg, dir.file("jpg-cache"), "", "");
  EXPECT_GT(jpg_acc, 0.4);  // gray from RGB JPEG, 1 channel: learns (chance is 0.1)
  std::cout << "test_acc: IDX " << idx_acc << ", PNG " << png_acc << ", JPEG RGB->gray " << jpg_acc
            << std::endl;

  // Another transform on the same cache is refused as stale, naming the preprocessing.
  r = recycle::testing::run_tool(dir, "recycle-build",
                                 "--data imagefolder:" + jpg + " --split train --recycle 0.5 "
                                 "--transform gray,resize=28 --cache " + dir.file("jpg-cache"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("preprocessing"), std::string::npos) << describe(r);
}

}  // namespace
