// recycle-build's stages on imagefolder:DIR: a PNG export of an IDX split builds the records
// and keys of the IDX split (the default transform gives the IDX path's tensors), the
// transform is part of the cache's identity, and files skipped by --on-bad-file skip leave the
// index without them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <set>
#include <utility>

#include "engine/data/dataset.h"
#include "engine/models/encoder_registry.h"
#include "engine/models/model_setup.h"
#include "engine/models/weights_io.h"
#include "engine/precompute/build_pipeline.h"
#include "engine/precompute/build_stages.h"
#include "engine/precompute/chunk_encoder.h"
#include "engine/precompute/split_inputs.h"
#include "recycle/errors.h"
#include "tests/data/image_files.h"
#include "tests/data/npy_files.h"
#include "tests/precompute/cache_contents.h"
#include "tests/precompute/pattern_images.h"

namespace {

namespace fs = std::filesystem;
using recycle::BuildOptions;
using recycle::testing::read_cache;
using recycle::testing::TempDir;

BuildOptions build_options(const std::string& data, const std::string& cache) {
  BuildOptions o;
  o.data.spec = data;
  o.model.width = 4;
  o.recycle = 0.25;
  o.cache_dir = cache;
  o.batch = 7;
  o.progress = false;
  return o;
}

// The IDX split of dir as PNG files: dir/png/c<label>/<position>.png.
std::string export_png(const TempDir& dir) {
  recycle::DatasetOptions o;
  o.spec = "fashion-mnist:" + dir.path().string();
  const recycle::Dataset d = recycle::load_dataset(o);
  const fs::path root = dir.path() / "png";
  for (size_t i = 0; i < d.size(); ++i) {
    const fs::path cls = root / ("c" + std::to_string(d.labels[i]));
    fs::create_directories(cls);
    char name[32];
    std::snprintf(name, sizeof name, "%05zu.png", i);
    const uint8_t* p = d.item_pixels(i);
    recycle::testing::write_gray_png((cls / name).string(), 28, 28,
                                     std::vector<uint8_t>(p, p + d.item_bytes()));
  }
  return root.string();
}

std::set<std::pair<std::string, int64_t>> index_set(const recycle::testing::CacheContents& c) {
  std::set<std::pair<std::string, int64_t>> out;
  for (const recycle::IndexEntry& e : c.index) out.insert({e.key.to_hex(), e.label});
  return out;
}

TEST(ImageFolderBuild, PngExportOfAnIdxSplitBuildsItsKeysAndRecords) {
  TempDir dir;
  recycle::testing::write_pattern_images(dir.path().string(), recycle::testing::patterns(20, 4));
  const std::string png = export_png(dir);
  recycle::run_build(build_options("fashion-mnist:" + dir.path().string(), dir.file("idx")));
  const recycle::BuildReport r =
      recycle::run_build(build_options("imagefolder:" + png, dir.file("png-cache")));
  EXPECT_EQ(r.samples, 24);
  EXPECT_EQ(r.computed, 20);
  const auto a = read_cache(dir.file("idx"));
  const auto b = read_cache(dir.file("png-cache"));
  EXPECT_EQ(index_set(a), index_set(b));  // the same (key, label) pairs, in folder order
  EXPECT_EQ(a.records, b.records);        // bit for bit
  EXPECT_EQ(a.manifest.preprocess, "pixels/255,mean=0.2860,std=0.3530");
  EXPECT_EQ(b.manifest.preprocess, "files:gray;pixels/255,mean=0.2860,std=0.3530");
  EXPECT_EQ(b.manifest.input_shape, (std::vector<int64_t>{1, 28, 28}));
}

// npy:DIR of uint8 goes the IDX path's way: same keys, records and preprocessing.
// Runs a build's stages with `change` between keying the samples and computing them: the race
// of a file rewritten while recycle-build runs, made repeatable. Returns the build's error.
std::string build_with_a_change_after_keying(const BuildOptions& o,
                                             const std::function<void()>& change) {
  try {
    recycle::SplitBuild b(o);
    b.key_samples();
    change();
    b.open();
    b.begin();
    recycle::BuildChunk chunk;
    while (b.next_chunk(&chunk)) {
      b.compute(&chunk);
      b.write_chunk(&chunk);
    }
    b.finish();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(ImageFolderBuild, ASampleChangedAfterItWasKeyedStopsTheBuildAndARerunStoresWhatItKeys) {
  TempDir dir;
  recycle::testing::write_pattern_images(dir.path().string(), recycle::testing::patterns(15, 0));
  const std::string png = export_png(dir);
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(png)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 2u);
  const fs::path victim = files.front(), other = files.back();
  const std::string original = dir.file("original.png");
  fs::copy_file(victim, original);
  const BuildOptions o = build_options("imagefolder:" + png, dir.file("cache"));
  const std::string error = build_with_a_change_after_keying(o, [&] {
    fs::copy_file(other, victim, fs::copy_options::overwrite_existing);
  });
  EXPECT_NE(error.find("changed while the build ran"), std::string::npos) << error;
  EXPECT_NE(error.find(victim.lexically_relative(png).generic_string()), std::string::npos)
      << error;
  // Swapped back, as in the report that found it: the rerun's cache is a clean build's, record
  // for record (no activation of the other image under the original's key).
  fs::copy_file(original, victim, fs::copy_options::overwrite_existing);
  recycle::run_build(o);
  recycle::run_build(build_options("imagefolder:" + png, dir.file("clean")));
  const auto got = read_cache(dir.file("cache")), clean = read_cache(dir.file("clean"));
  EXPECT_EQ(got.index, clean.index);
  EXPECT_EQ(got.records, clean.records);
}

TEST(ImageFolderBuild, AnNpyRowChangedAfterItWasKeyedStopsTheBuild) {
  TempDir dir;
  const int64_t n = 10;
  std::vector<uint8_t> x(static_cast<size_t>(n * 28 * 28));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>(i * 13 + i / 784);
  const std::vector<int64_t> y = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1};
  fs::create_directories(dir.path() / "npy");
  const std::string path = dir.file("npy/train_x.npy");
  recycle::testing::write_file(
      path, recycle::testing::npy_bytes("|u1", {n, 1, 28, 28}, x.data(), x.size()));
  recycle::testing::write_file(dir.file("npy/train_y.npy"),
                               recycle::testing::npy_bytes("<i8", {n}, y.data(), n * 8));
  const std::string error = build_with_a_change_after_keying(
      build_options("npy:" + dir.file("npy"), dir.file("cache")), [&] {
        std::vector<uint8_t> changed = x;
        std::fill(changed.begin() + 3 * 784, changed.begin() + 4 * 784, uint8_t{7});  // row 3
        recycle::testing::write_file(
            path,
            recycle::testing::npy_bytes("|u1", {n, 1, 28, 28}, changed.data(), changed.size()));
      });
  EXPECT_NE(error.find("sample train/3 changed while the build ran"), std::string::npos) << error;
}

TEST(ImageFolderBuild, Uint8NpyOfAnIdxSplitBuildsItsCache) {
  TempDir dir;
  recycle::testing::write_pattern_images(dir.path().string(), recycle::testing::patterns(15, 3));
  recycle::DatasetOptions o;
  o.spec = "fashion-mnist:" + dir.path().string();
  const recycle::Dataset d = recycle::load_dataset(o);
  fs::create_directories(dir.path() / "npy");
  const int64_t n = static_cast<int64_t>(d.size());
  recycle::testing::write_file(dir.file("npy/train_x.npy"),
                               recycle::testing::npy_bytes("|u1", {n, 1, 28, 28}, d.pixels.data(),
                                                           d.pixels.size()));
  recycle::testing::write_file(dir.file("npy/train_y.npy"),
                               recycle::testing::npy_bytes("<i8", {n}, d.labels.data(), n * 8));
  recycle::run_build(build_options("fashion-mnist:" + dir.path().string(), dir.file("idx")));
  recycle::run_build(build_options("npy:" + dir.file("npy"), dir.file("npy-cache")));
  const auto x = read_cache(dir.file("idx"));
  const auto y = read_cache(dir.file("npy-cache"));
  EXPECT_EQ(x.index, y.index);
  EXPECT_EQ(x.records, y.records);
  EXPECT_EQ(x.manifest.preprocess, y.manifest.preprocess);
  // float32 inputs build too, keyed as float32: other keys.
  fs::create_directories(dir.path() / "npyf");
  std::vector<float> f(d.pixels.begin(), d.pixels.end());
  recycle::testing::write_file(
      dir.file("npyf/train_x.npy"),
      recycle::testing::npy_bytes("<f4", {n, 1, 28, 28}, f.data(), f.size() * 4));
  recycle::testing::write_file(dir.file("npyf/train_y.npy"),
                               recycle::testing::npy_bytes("<i8", {n}, d.labels.data(), n * 8));
  const recycle::BuildReport r =
      recycle::run_build(build_options("npy:" + dir.file("npyf"), dir.file("float-cache")));
  EXPECT_EQ(r.computed, 15);
  const auto z = read_cache(dir.file("float-cache"));
  EXPECT_EQ(z.manifest.preprocess, "float32 as stored");
  ASSERT_EQ(z.index.size(), x.index.size());
  EXPECT_NE(z.index[0].key, x.index[0].key);
}

TEST(ImageFolderBuild, AnotherTransformIsStaleAndTheSameOneRebuildsNothing) {
  TempDir dir;
  recycle::testing::write_pattern_images(dir.path().string(), recycle::testing::patterns(12, 0));
  const std::string png = export_png(dir);
  BuildOptions o = build_options("imagefolder:" + png, dir.file("cache"));
  o.data.transform = "resize=28";
  recycle::run_build(o);
  EXPECT_EQ(recycle::run_build(o).computed, 0);
  BuildOptions other = o;
  other.data.transform = "";  // the same pixels (resize=28 of 28x28 is the identity), other spec
  EXPECT_THROW(recycle::run_build(other), recycle::StaleCacheError);
  other.data.transform = "resize=28,normalize=0.5/0.5";
  EXPECT_THROW(recycle::run_build(other), recycle::StaleCacheError);
  EXPECT_EQ(read_cache(dir.file("cache")).index.size(), 12u);  // nothing lost
}

TEST(ImageFolderBuild, TheDefaultTransformTakesTheWeightsInputChannels) {
  // Gray PNGs and an encoder whose weights read RGB: the default transform repeats the gray
  // in three channels (the data alone would give one, which the weights refuse).
  TempDir dir;
  recycle::testing::write_pattern_images(dir.path().string(), recycle::testing::patterns(6, 0));
  const std::string png = export_png(dir);
  const std::string weights = dir.file("rgb.pt");
  recycle::save_block_model(recycle::make_encoder("resnet18:width=4,in_channels=3", 10), weights);
  BuildOptions o = build_options("imagefolder:" + png, dir.file("cache"));
  o.model.width = 0;
  o.model.weights = weights;
  const recycle::DatasetOptions d = recycle::with_encoder_input(o.data, o.model);
  EXPECT_EQ(d.encoder_input, (std::vector<int64_t>{3, 0, 0}));
  EXPECT_EQ(recycle::run_build(o).computed, 6);
  const recycle::testing::CacheContents c = read_cache(dir.file("cache"));
  EXPECT_EQ(c.manifest.input_shape, (std::vector<int64_t>{3, 28, 28}));
  // The same weights with gray asked for are refused before anything is computed.
  BuildOptions gray = o;
  gray.cache_dir = dir.file("gray");
  gray.data.transform = "gray";
  EXPECT_THROW(recycle::run_build(gray), std::runtime_error);
  EXPECT_FALSE(fs::exists(dir.file("gray")));  // refused before the cache was made
}

TEST(ImageFolderBuild, SkippedFilesAreLeftOutOfTheIndex) {
  TempDir dir;
  recycle::testing::write_pattern_images(dir.path().string(), recycle::testing::patterns(10, 0));
  const std::string png = export_png(dir);
  recycle::testing::write_file(png + "/c3/00003.png", "broken");
  BuildOptions o = build_options("imagefolder:" + png, dir.file("cache"));
  const std::string e = [&] {
    try {
      recycle::run_build(o);
    } catch (const std::exception& x) {
      return std::string(x.what());
    }
    return std::string();
  }();
  EXPECT_NE(e.find("c3/00003.png: is not a PNG or JPEG image"), std::string::npos) << e;
  o.data.on_bad_file = recycle::BadFilePolicy::kSkip;
  ::testing::internal::CaptureStderr();
  const recycle::BuildReport r = recycle::run_build(o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("skipped 1 file(s)"), std::string::npos) << err;
  // Class c3 held that one file only: it stays a class of the split, said to have no sample.
  EXPECT_NE(err.find("warning: " + png + ": class 'c3' lost all its 1 file(s)"), std::string::npos)
      << err;
  EXPECT_EQ(r.files_left_out, 1);
  EXPECT_NE(r.to_json().find("\"files_left_out\":1"), std::string::npos) << r.to_json();
  EXPECT_EQ(r.samples, 9);
  const auto c = read_cache(dir.file("cache"));
  EXPECT_EQ(c.index.size(), 9u);
  EXPECT_EQ(c.manifest.splits.at("train").samples, 9);
}

// A sharded build's rank keys its part of the split only (SplitInputs::key_positions): of a
// folder, only those files are read, and their keys are the ones key_all gives.
TEST(ImageFolderBuild, KeyingSomeSamplesReadsOnlyTheirFiles) {
  TempDir dir;
  const std::vector<int> pattern = recycle::testing::patterns(10, 0);  // file i: c<i>/0000i.png
  recycle::testing::write_pattern_images(dir.path().string(), pattern);
  recycle::testing::write_pattern_png_folder(dir.file("png"), pattern);
  recycle::testing::write_file(dir.file("png") + "/c3/00003.png", "broken");
  recycle::DatasetOptions idx, png;
  idx.spec = "fashion-mnist:" + dir.path().string();
  png.spec = "imagefolder:" + dir.file("png");
  const std::vector<recycle::Key> every = recycle::SplitInputs(idx, "", "", 0).key_all();
  recycle::SplitInputs folder(png, "", "", 0);
  const recycle::SampleKeys some = folder.key_positions({0, 2, 4, 9});  // never reads 00003.png
  ASSERT_EQ(some.keys.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(some.keys[i], every[some.positions[i]]) << i;
  EXPECT_TRUE(some.skipped.empty());
  try {
    recycle::SplitInputs(png, "", "", 0).key_positions({1, 3});
    ADD_FAILURE() << "the broken file was not read";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("c3/00003.png"), std::string::npos) << e.what();
  }
}

}  // namespace
