// Caches of augmented views (recycle-build --augment SPEC --views K), in process on a small
// synthetic IDX data set with a width-4 ResNet-18: K records per distinct sample under their
// view keys, a rerun that computes nothing, a build stopped midway that resumes to the same
// bytes, another spec or count refused with nothing lost, a plain test split beside a split of
// views, verify, and training that reads view v of a sample at index p + size * v.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/activation_store.h"
#include "engine/precompute/build_pipeline.h"
#include "engine/precompute/build_stages.h"
#include "engine/precompute/chunk_encoder.h"
#include "engine/train/batch_sources.h"
#include "keyers/view_key.h"
#include "recycle/cache.h"
#include "recycle/errors.h"
#include "recycle/train.h"
#include "tests/precompute/cache_contents.h"
#include "tests/precompute/pattern_images.h"
#include "tests/tool_runner.h"

namespace {

using recycle::BuildOptions;
using recycle::testing::CacheContents;
using recycle::testing::read_cache;
using recycle::testing::TempDir;

constexpr const char* kSpec = "hflip,crop=3,jitter=0.3";

BuildOptions views_options(const TempDir& dir, const std::string& cache, int64_t views = 3) {
  BuildOptions o;
  o.data.spec = "fashion-mnist:" + dir.path().string();
  o.model.width = 4;
  o.recycle = 0.25;
  o.cache_dir = cache;
  o.batch = 8;
  o.progress = false;
  o.augment = kSpec;
  o.views = views;
  return o;
}

// The test split: the same patterns written as t10k-* files.
void write_test_split(const TempDir& dir, int n) {
  std::vector<uint8_t> images, labels;
  for (int p = 0; p < n; ++p) {
    for (int q = 0; q < 28 * 28; ++q) {
      images.push_back(static_cast<uint8_t>((p * 37 + q * 11) % 251));
    }
    labels.push_back(static_cast<uint8_t>(p % 10));
  }
  recycle::testing::write_idx(dir.file("t10k-images-idx3-ubyte.gz"), {n, 28, 28}, images);
  recycle::testing::write_idx(dir.file("t10k-labels-idx1-ubyte.gz"), {n}, labels);
}

TEST(ViewsBuild, StoresKViewsOfEveryDistinctSampleUnderItsViewKeys) {
  TempDir dir;
  recycle::testing::write_pattern_images(dir.path().string(), recycle::testing::patterns(10, 3));
  const std::string cache = dir.file("cache");
  const recycle::BuildReport r = recycle::run_build(views_options(dir, cache));
  EXPECT_EQ(r.samples, 13);
  EXPECT_EQ(r.unique, 10);
  EXPECT_EQ(r.views, 3);
  EXPECT_EQ(r.computed, 30);  // duplicates share their views
  EXPECT_EQ(r.skipped, 13 * 3 - 30);
  EXPECT_EQ(r.records, 30);
  const CacheContents c = read_cache(cache);
  const recycle::SplitInfo& info = c.manifest.splits.at("train");
  EXPECT_EQ(info.views, 3);
  EXPECT_EQ(info.augment, kSpec);
  ASSERT_EQ(c.index.size(), 13u);
  std::set<std::string> expected;
  for (const recycle::IndexEntry& e : c.index) {
    EXPECT_EQ(c.records.count(e.key.to_hex()), 0u) << "a plain record beside the views";
    std::set<std::string> of_sample;
    for (int64_t v = 0; v < 3; ++v) {
      const std::string k = recycle::view_key(e.key, kSpec, v).to_hex();
      ASSERT_EQ(c.records.count(k), 1u) << "view " << v;
      expected.insert(k);
      of_sample.insert(c.records.at(k));
    }
    EXPECT_EQ(of_sample.size(), 3u);  // three different views
  }
  EXPECT_EQ(expected.size(), c.records.size());

  // verify agrees: every record referenced, none missing.
  const recycle::InspectReport v = recycle::inspect_cache(cache, /*verify=*/true);
  EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems.front());
  EXPECT_EQ(v.checked, 30);
  EXPECT_EQ(v.corrupt, 0);
  EXPECT_EQ(v.orphans, 0);
  EXPECT_NE(v.to_text().find("3 views of " + std::string(kSpec)), std::string::npos);

  // A rerun computes and writes nothing.
  const recycle::BuildReport again = recycle::run_build(views_options(dir, cache));
  EXPECT_EQ(again.computed, 0);
  EXPECT_EQ(again.index_written, 0);
  EXPECT_EQ(read_cache(cache).records, c.records);
}

TEST(ViewsBuild, AnotherSpecOrCountIsStaleAndNothingIsLost) {
  TempDir dir;
  recycle::testing::write_pattern_images(dir.path().string(), recycle::testing::patterns(8, 0));
  const std::string cache = dir.file("cache");
  recycle::run_build(views_options(dir, cache));
  const CacheContents before = read_cache(cache);
  BuildOptions more = views_options(dir, cache, 4);
  try {
    recycle::run_build(more);
    FAIL() << "4 views accepted on a cache of 3";
  } catch (const recycle::StaleCacheError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cache " + cache + " was built for another setup: split train: the cache has 3 "
              "views of '" + kSpec + "', this run asks for 4 views of '" + kSpec +
              "' (use another --cache, or --rebuild to start over)");
  }
  BuildOptions other = views_options(dir, cache);
  other.augment = "hflip";
  EXPECT_THROW(recycle::run_build(other), recycle::StaleCacheError);
  BuildOptions plain = views_options(dir, cache);
  plain.augment.clear();
  plain.views = 0;
  EXPECT_THROW(recycle::run_build(plain), recycle::StaleCacheError);
  const CacheContents after = read_cache(cache);
  EXPECT_EQ(after.records, before.records);
  EXPECT_EQ(after.manifest.to_json_string(), before.manifest.to_json_string());

  // Bad options are refused before anything is opened.
  BuildOptions no_spec = views_options(dir, dir.file("x"));
  no_spec.augment.clear();
  EXPECT_THROW(recycle::run_build(no_spec), std::invalid_argument);
  BuildOptions bad_op = views_options(dir, dir.file("x"));
  bad_op.augment = "hflip,blur=3";
  EXPECT_THROW(recycle::run_build(bad_op), std::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(dir.file("x")));
}

TEST(ViewsBuild, StoppedMidwayAndResumedEqualsBuildInOneGo) {
  TempDir dir;
  recycle::testing::write_pattern_images(dir.path().string(), recycle::testing::patterns(20, 4));
  const std::string whole = dir.file("whole"), resumed = dir.file("resumed");
  recycle::run_build(views_options(dir, whole));
  {
    recycle::SplitBuild s(views_options(dir, resumed));
    s.open();
    s.begin();
    recycle::BuildChunk chunk;
    for (int i = 0; i < 3 && s.next_chunk(&chunk); ++i) {  // chunks of 8 / 3 = 2 samples
      EXPECT_EQ(chunk.compute_views.size(), chunk.compute_keys.size());
      s.compute(&chunk);
      s.write_chunk(&chunk);
    }
    EXPECT_EQ(s.plan().next(), 6u);
  }  // dropped midway, as a killed build
  EXPECT_EQ(read_cache(resumed).records.size(), 18u);
  const recycle::BuildReport rest = recycle::run_build(views_options(dir, resumed));
  EXPECT_EQ(rest.computed, 60 - 18);
  const CacheContents a = read_cache(whole), b = read_cache(resumed);
  EXPECT_EQ(a.records, b.records);  // byte for byte: a view's bytes come from its key
  EXPECT_EQ(a.index, b.index);
}

TEST(ViewsBuild, APlainTestSplitBesideViewsAndTrainingReadsEachView) {
  TempDir dir;
  recycle::testing::write_pattern_images(dir.path().string(), recycle::testing::patterns(12, 0));
  write_test_split(dir, 6);
  const std::string cache = dir.file("cache");
  recycle::run_build(views_options(dir, cache, 4));
  BuildOptions test = views_options(dir, cache);
  test.data.split = "test";
  test.augment.clear();
  test.views = 0;
  EXPECT_EQ(recycle::run_build(test).computed, 6);  // the test patterns are the train's first 6
  const CacheContents c = read_cache(cache);
  EXPECT_EQ(c.manifest.splits.at("test").views, 0);
  EXPECT_TRUE(recycle::inspect_cache(cache, true).ok());

  // Index p + size * v reads view v of the sample at p.
  recycle::StoreOptions so;
  so.read_only = true;
  std::unique_ptr<recycle::ActivationStore> store;
  ASSERT_TRUE(recycle::ActivationStore::open(cache, so, &store).ok());
  recycle::CachedBatches batches(*store, c.manifest, "train", torch::kCPU);
  ASSERT_EQ(batches.size(), 12);
  std::vector<torch::Tensor> views;
  for (int64_t v = 0; v < 4; ++v) {
    recycle::Batch b;
    const int64_t index = 5 + 12 * v;
    batches.load(&index, 1, &b);
    views.push_back(b.features().clone());
    EXPECT_EQ(b.labels.item<int64_t>(), 5);
  }
  for (int64_t v = 1; v < 4; ++v) EXPECT_FALSE(torch::equal(views[0], views[v])) << v;
  recycle::Batch b;
  const int64_t plain = 5;
  batches.load(&plain, 1, &b);
  EXPECT_TRUE(torch::equal(b.features(), views[0]));
  const int64_t outside = 12 * 4;
  EXPECT_THROW(batches.load(&outside, 1, &b), std::out_of_range);

  // Training from the cache draws a view per sample per epoch and evaluates on the plain split.
  recycle::TrainOptions t;
  t.cache_dir = cache;
  t.hyper.epochs = 4;
  t.hyper.batch = 4;
  t.progress = false;
  const recycle::TrainReport r = recycle::run_train(t);
  EXPECT_EQ(r.views, 4);
  EXPECT_EQ(r.train_samples, 12);
  EXPECT_EQ(r.test_samples, 6);
  for (double loss : r.epoch_loss) EXPECT_TRUE(std::isfinite(loss));
  t.preload = true;
  EXPECT_THROW(recycle::run_train(t), std::invalid_argument);  // one record per sample
}

}  // namespace
