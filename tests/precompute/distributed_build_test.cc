// The distributed build (engine/precompute/distributed_build.cc) with its ranks as threads of this
// process, talking through a BuildGroup in memory, on a small synthetic IDX set with a width-4
// ResNet-18: equal to a 1-process build, several record files per rank, reruns, a split that
// is half there, ranks that disagree, fail or never come. The real processes and c10d are in
// tests/e2e/distributed_build_e2e_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cache/activation_store.h"
#include "cache/cache_dir.h"
#include "cache/shard_rule.h"
#include "engine/models/encoder_registry.h"
#include "engine/models/weights_io.h"
#include "engine/precompute/build_group.h"
#include "engine/precompute/build_pipeline.h"
#include "engine/precompute/rank_board.h"  // report_from_json
#include "tests/precompute/cache_contents.h"
#include "tests/precompute/pattern_images.h"
#include "tests/tool_runner.h"

namespace {

using recycle::testing::CacheContents;
using recycle::testing::read_cache;

namespace fs = std::filesystem;
using recycle::ActivationStore;
using recycle::BuildOptions;
using recycle::BuildReport;
using recycle::IndexEntry;
using recycle::Manifest;
using recycle::testing::TempDir;

using recycle::testing::patterns;
using recycle::testing::write_pattern_images;

// A width-4 ResNet-18's weights (initialised with `seed`), saved once into the data
// directory: ranks that are threads of one process would otherwise initialise their models at
// once from LibTorch's one global generator (separate processes each seed their own). Call it
// before the ranks' threads start (it is not safe to call from two threads).
std::string weights_in(const std::string& data_dir, uint64_t seed = 3) {
  const std::string path = data_dir + "/weights-" + std::to_string(seed) + ".pt";
  if (!fs::exists(path)) {
    torch::manual_seed(seed);
    recycle::BlockModel model = recycle::make_encoder("resnet18:width=4,in_channels=1", 10);
    model.class_names = recycle::fashion_mnist_class_names();  // no new classifier
    recycle::save_block_model(model, path + ".tmp");
    fs::rename(path + ".tmp", path);  // whole or not there
  }
  return path;
}

BuildOptions options_for(const std::string& data_dir, const std::string& cache, int64_t limit = 0) {
  BuildOptions o;
  o.data.spec = "fashion-mnist:" + data_dir;
  o.data.limit = limit;
  o.model.weights = weights_in(data_dir);
  o.recycle = 0.25;
  o.cache_dir = cache;
  o.batch = 8;
  o.threads = 1;
  o.progress = false;
  o.stage_file_bytes = 20000;  // a record is 4x28x28 fp16 (~6 KB): a few records per file
  return o;
}

// The group's board in memory, shared by the ranks' threads.
struct Board {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, std::string> values;
  std::string failure;
};

class MemoryGroup : public recycle::BuildGroup {
 public:
  MemoryGroup(std::shared_ptr<Board> board, int rank, int world, double timeout_seconds)
      : board_(std::move(board)), rank_(rank), world_(world), timeout_(timeout_seconds) {}
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  void set(const std::string& key, const std::string& value) override {
    std::lock_guard<std::mutex> lock(board_->mutex);
    board_->values[key] = value;
    board_->changed.notify_all();
  }
  std::string wait(const std::string& key, int from) override {
    std::unique_lock<std::mutex> lock(board_->mutex);
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
    board_->changed.wait_until(lock, deadline, [&] {
      return board_->values.count(key) || !board_->failure.empty();
    });
    if (!board_->failure.empty()) throw std::runtime_error(board_->failure);
    if (!board_->values.count(key)) {
      throw std::runtime_error("lost rank " + std::to_string(from) + ": no sign of life");
    }
    return board_->values[key];
  }
  void fail(const std::string& line) noexcept override {
    std::lock_guard<std::mutex> lock(board_->mutex);
    if (board_->failure.empty()) board_->failure = line;
    board_->changed.notify_all();
  }

 private:
  std::shared_ptr<Board> board_;
  int rank_, world_;
  double timeout_;
};

struct RankResult {
  BuildReport report;
  std::string error;  // what the rank threw, "" when it returned
};

using BuildFn = BuildReport (*)(const BuildOptions&, recycle::BuildGroup&);

// Runs world ranks as threads of `build` (a distributed build, or a sharded one); options_of(rank)
// gives each rank its options.
std::vector<RankResult> run_ranks(int world, const std::function<BuildOptions(int)>& options_of,
                                  double timeout_seconds = 60, int ranks_started = -1,
                                  BuildFn build = recycle::run_distributed_build) {
  auto board = std::make_shared<Board>();
  std::vector<RankResult> results(world);
  std::vector<std::thread> threads;
  const int started = ranks_started < 0 ? world : ranks_started;
  for (int r = 0; r < started; ++r) {
    threads.emplace_back([&, r] {
      MemoryGroup group(board, r, world, timeout_seconds);
      try {
        results[r].report = build(options_of(r), group);
      } catch (const std::exception& e) {
        results[r].error = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

std::vector<RankResult> run_ranks(int world, const BuildOptions& o) {
  return run_ranks(world, [&](int) { return o; });
}

void expect_same_cache(const std::string& a_dir, const std::string& b_dir) {
  const CacheContents a = read_cache(a_dir), b = read_cache(b_dir);
  EXPECT_EQ(a.records.size(), b.records.size());
  int differ = 0;
  for (const auto& [key, bytes] : a.records) {
    const auto it = b.records.find(key);
    differ += it == b.records.end() || it->second != bytes;
  }
  EXPECT_EQ(differ, 0) << "records of other bytes (of " << a.records.size() << ")";
  ASSERT_EQ(a.index.size(), b.index.size());
  for (size_t i = 0; i < a.index.size(); ++i) EXPECT_EQ(a.index[i], b.index[i]) << i;
  EXPECT_EQ(a.manifest.to_json_string(), b.manifest.to_json_string());
}

bool staging_is_empty(const std::string& cache) {
  const fs::path staging = fs::path(cache) / recycle::kStagingDirName;
  std::error_code ec;
  return !fs::exists(staging, ec) || fs::is_empty(staging, ec);
}

void expect_counts(const BuildReport& r, int64_t computed, int64_t index_written,
                   int64_t records) {
  EXPECT_EQ(r.computed, computed);
  EXPECT_EQ(r.index_written, index_written);
  EXPECT_EQ(r.records, records);
}

}  // namespace

TEST(DistributedBuild, TwoAndThreeRanksGiveTheCacheOfOneProcess) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(50, 12));  // 62 samples, 50 distinct
  const std::string data = dir.path().string();
  const BuildReport one = recycle::run_build(options_for(data, dir.file("one")));
  expect_counts(one, 50, 62, 50);
  for (int world : {2, 3}) {
    SCOPED_TRACE("world " + std::to_string(world));
    const std::string cache = dir.file("w" + std::to_string(world));
    const auto results = run_ranks(world, options_for(data, cache));
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(results[r].error, "") << "rank " << r;
      // Every rank reports the whole build.
      expect_counts(results[r].report, 50, 62, 50);
      EXPECT_EQ(results[r].report.samples, 62);
      EXPECT_EQ(results[r].report.unique, 50);
      EXPECT_EQ(results[r].report.skipped, 12);
      EXPECT_EQ(results[r].report.bytes, one.bytes);
      EXPECT_EQ(results[r].report.ranks, world);
    }
    expect_same_cache(dir.file("one"), cache);
    EXPECT_TRUE(staging_is_empty(cache));
  }
}

TEST(DistributedBuild, RerunComputesNothingAndAHalfBuiltSplitOnlyItsMissingHalf) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(40, 8));
  const std::string data = dir.path().string();
  const std::string cache = dir.file("cache"), one = dir.file("one");
  // Half there: the first 24 samples built by one process.
  expect_counts(recycle::run_build(options_for(data, cache, 24)), 24, 24, 24);
  auto results = run_ranks(2, options_for(data, cache));
  ASSERT_EQ(results[0].error, "");
  ASSERT_EQ(results[1].error, "");
  expect_counts(results[0].report, 16, 24, 40);
  EXPECT_EQ(results[0].report.skipped, 48 - 16);
  recycle::run_build(options_for(data, one, 24));  // one process the same way
  recycle::run_build(options_for(data, one));
  expect_same_cache(one, cache);

  // A rerun: nothing computed, nothing written.
  const CacheContents before = read_cache(cache);
  results = run_ranks(2, options_for(data, cache));
  ASSERT_EQ(results[0].error, "");
  ASSERT_EQ(results[1].error, "");
  expect_counts(results[0].report, 0, 0, 40);
  expect_counts(results[1].report, 0, 0, 40);
  EXPECT_EQ(results[0].report.bytes, 0);
  const CacheContents after = read_cache(cache);
  EXPECT_EQ(after.manifest.to_json_string(), before.manifest.to_json_string());
  EXPECT_TRUE(after.records == before.records);
}

TEST(DistributedBuild, RanksThatWouldBuildSomethingElseStopTheJobWithOneLine) {
  TempDir dir;
  // A long path: data descriptions of more than 80 characters that differ at their end.
  const std::string data = dir.file(std::string(70, 'd')), cache = dir.file("cache");
  fs::create_directories(data);
  write_pattern_images(data, patterns(20, 0));
  struct Case {
    std::function<void(BuildOptions*)> change;
    std::string field;
  } cases[] = {
      // Shown where the descriptions differ, however long the data's path.
      {[](BuildOptions* o) { o->data.limit = 10; }, "data differs"},
      {[](BuildOptions* o) { o->data.limit = 12; }, " limit=12)"},
      {[&](BuildOptions* o) { o->model.weights = weights_in(data, 4); }, "fingerprint differs"},
      {[](BuildOptions* o) { o->codec = recycle::Codec::kFp32; }, "codec differs"},
      // fp32, which the manifest leaves unsaid, is named, not "null".
      {[](BuildOptions* o) { o->precision = recycle::Precision::kBf16; },
       "prefix_precision differs (rank 0: fp32; rank 1: bf16)"},
  };
  weights_in(data);  // both files made here, not by the ranks' threads
  weights_in(data, 4);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    const auto results = run_ranks(2, [&](int r) {
      BuildOptions o = options_for(data, cache);
      if (r == 1) c.change(&o);
      return o;
    });
    ASSERT_NE(results[0].error, "");
    EXPECT_NE(results[0].error.find(c.field[0] == ' ' ? c.field
                                    : "rank 1 would build something else than rank 0: " + c.field),
              std::string::npos)
        << results[0].error;
    EXPECT_EQ(results[0].error.find('\n'), std::string::npos);
    EXPECT_NE(results[1].error.find("rank 0: rank 1 would build something else"),
              std::string::npos)
        << results[1].error;
  }
  EXPECT_FALSE(fs::exists(cache));  // refused before the cache was opened
}

TEST(DistributedBuild, AFailingRankFailsEveryRankAndLosesNothing) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(30, 0));
  const std::string data = dir.path().string(), cache = dir.file("cache");
  recycle::run_build(options_for(data, cache, 12));
  const CacheContents before = read_cache(cache);

  // Rank 1 fails while loading its inputs (its data directory is not there).
  auto results = run_ranks(2, [&](int r) {
    BuildOptions o = options_for(data, cache);
    if (r == 1) o.data.spec = "fashion-mnist:" + dir.file("nowhere");
    return o;
  });
  ASSERT_NE(results[1].error, "");
  EXPECT_EQ(results[0].error, "rank 1: " + results[1].error);

  // Rank 1 fails after rank 0 opened the cache and planned: its staging directory vanishes
  // while it computes (another machine without the shared file system would see the same).
  results = run_ranks(2, [&](int r) {
    BuildOptions o = options_for(data, cache);
    if (r == 1) o.cache_dir = dir.file("elsewhere");
    return o;
  });
  ASSERT_NE(results[1].error, "");
  EXPECT_NE(results[1].error.find("does not see rank 0's staging directory"), std::string::npos)
      << results[1].error;
  EXPECT_NE(results[0].error.find("rank 1: rank 1 does not see"), std::string::npos)
      << results[0].error;
  EXPECT_TRUE(staging_is_empty(cache));
  const CacheContents after = read_cache(cache);
  EXPECT_TRUE(after.records == before.records);
  EXPECT_EQ(after.manifest.records, before.manifest.records);
  EXPECT_FALSE(after.manifest.splits.at("train").complete);  // the rerun's job

  // The rerun, by two ranks, finishes the split as one process would have.
  results = run_ranks(2, options_for(data, cache));
  ASSERT_EQ(results[0].error, "");
  expect_counts(results[0].report, 18, 18, 30);
  recycle::run_build(options_for(data, dir.file("one"), 12));
  recycle::run_build(options_for(data, dir.file("one")));
  expect_same_cache(dir.file("one"), cache);
}

TEST(DistributedBuild, ARankThatNeverComesEndsTheJobWithinTheTimeout) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(10, 0));
  const auto start = std::chrono::steady_clock::now();
  const auto results =
      run_ranks(2, [&](int) { return options_for(dir.path().string(), dir.file("cache")); },
                /*timeout_seconds=*/2, /*ranks_started=*/1);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(results[0].error.find("lost rank 1"), std::string::npos) << results[0].error;
  EXPECT_LT(seconds, 30);
}

// ---- the sharded build (engine/precompute/sharded_build.cc) ------------------------------------

namespace {

// A sharded build of `world` ranks as threads, rank r into cache_of(r).
std::vector<RankResult> run_shards(int world, const std::function<BuildOptions(int)>& options_of) {
  return run_ranks(world, options_of, 60, -1, recycle::run_sharded_build);
}

std::string shard_dir(const TempDir& dir, int world, int rank) {
  return dir.file("w" + std::to_string(world) + "-shard" + std::to_string(rank));
}

}  // namespace

TEST(ShardedBuild, EachRankHoldsItsShardOfTheCacheOfOneProcessInItsOwnCache) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(50, 12));  // 62 samples, 50 distinct
  const std::string data = dir.path().string();
  const BuildReport one = recycle::run_build(options_for(data, dir.file("one")));
  const CacheContents whole = read_cache(dir.file("one"));
  for (int world : {2, 3}) {
    SCOPED_TRACE("world " + std::to_string(world));
    const auto results =
        run_shards(world, [&](int r) { return options_for(data, shard_dir(dir, world, r)); });
    size_t records = 0;
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(results[r].error, "") << "rank " << r;
      EXPECT_EQ(results[r].report.shards, world);
      EXPECT_EQ(results[r].report.shard_index, r);
      const CacheContents shard = read_cache(shard_dir(dir, world, r));
      // The shard's index: the samples of the whole index whose key the rule puts here, in
      // order; its records: theirs, byte for byte.
      std::vector<IndexEntry> mine;
      for (const IndexEntry& e : whole.index) {
        if (recycle::shard_of(e.key, world) == r) mine.push_back(e);
      }
      EXPECT_TRUE(shard.index == mine) << "rank " << r;
      for (const auto& [key, bytes] : shard.records) {
        const auto it = whole.records.find(key);
        EXPECT_TRUE(it != whole.records.end() && it->second == bytes) << key;
      }
      records += shard.records.size();
      EXPECT_TRUE(shard.manifest.identity_differences(whole.manifest).empty());
      const recycle::SplitInfo& info = shard.manifest.splits.at("train");
      EXPECT_TRUE(info.complete);
      EXPECT_EQ(info.samples, static_cast<int64_t>(mine.size()));
      EXPECT_EQ(info.shard.index, r);
      EXPECT_EQ(info.shard.count, world);
      EXPECT_EQ(info.shard.rule, recycle::kShardRule);
      EXPECT_EQ(info.shard.split_samples, 62);
      EXPECT_TRUE(shard.index.size() > 0) << "an empty shard says little";
    }
    EXPECT_EQ(records, whole.records.size());  // a key's records are in one shard only
    // Rank 0 reports the whole job, and each shard's own report.
    const BuildReport& job = results[0].report;
    EXPECT_EQ(job.samples, 62);
    EXPECT_EQ(job.unique, 50);
    EXPECT_EQ(job.computed, 50);
    EXPECT_EQ(job.bytes, one.bytes);
    EXPECT_EQ(job.records, 50);
    EXPECT_EQ(job.ranks, world);
    ASSERT_EQ(job.per_shard.size(), static_cast<size_t>(world));
    EXPECT_EQ(job.per_shard[1].cache_dir, shard_dir(dir, world, 1));
    const BuildReport back = recycle::report_from_json(job.to_json(), "the report");
    EXPECT_EQ(back.to_json(), job.to_json());
  }
}

TEST(ShardedBuild, ARerunComputesNothingAndAnotherShardCountIsRefused) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(30, 0));
  const std::string data = dir.path().string();
  weights_in(data);  // made here, not by the ranks' threads
  auto options_of = [&](int r) { return options_for(data, shard_dir(dir, 2, r)); };
  auto results = run_shards(2, options_of);
  ASSERT_EQ(results[0].error, "");
  const CacheContents before0 = read_cache(shard_dir(dir, 2, 0));
  results = run_shards(2, options_of);
  ASSERT_EQ(results[0].error, "");
  ASSERT_EQ(results[1].error, "");
  EXPECT_EQ(results[0].report.computed, 0);
  EXPECT_EQ(results[0].report.bytes, 0);
  EXPECT_EQ(results[0].report.index_written, 0);
  EXPECT_EQ(results[0].report.samples, 30);
  const CacheContents after0 = read_cache(shard_dir(dir, 2, 0));
  EXPECT_EQ(after0.manifest.to_json_string(), before0.manifest.to_json_string());
  EXPECT_TRUE(after0.records == before0.records);

  // Three ranks over the shards of two: the two old shards refuse, nothing is written there.
  results = run_shards(3, options_of);
  for (int r = 0; r < 3; ++r) EXPECT_NE(results[r].error, "") << r;
  const std::string said = results[0].error + " | " + results[1].error;
  EXPECT_NE(said.find("split train: the cache has shard 0 of 2, this run asks for shard 0 of 3"),
            std::string::npos)
      << said;
  const CacheContents refused0 = read_cache(shard_dir(dir, 2, 0));
  EXPECT_EQ(refused0.manifest.to_json_string(), before0.manifest.to_json_string());
}

TEST(ShardedBuild, RanksThatWouldBuildSomethingElseOpenNoCache) {
  TempDir dir;
  write_pattern_images(dir.path().string(), patterns(20, 0));
  const std::string data = dir.path().string();
  weights_in(data);
  weights_in(data, 4);
  const auto results = run_shards(2, [&](int r) {
    BuildOptions o = options_for(data, shard_dir(dir, 2, r));
    if (r == 1) o.model.weights = weights_in(data, 4);
    return o;
  });
  EXPECT_NE(results[0].error.find("rank 1 would build something else than rank 0: fingerprint"),
            std::string::npos)
      << results[0].error;
  EXPECT_NE(results[1].error, "");
  EXPECT_FALSE(fs::exists(shard_dir(dir, 2, 0)));
  EXPECT_FALSE(fs::exists(shard_dir(dir, 2, 1)));
}

TEST(ShardedBuild, RanksKeyAPartOfAFolderEachAndShareTheFilesLeftOut) {
  TempDir dir;
  const std::string png = dir.file("png");
  recycle::testing::write_pattern_png_folder(png, patterns(27, 3));  // 30 files, 27 distinct
  recycle::testing::write_file(png + "/c3/00003.png", "broken");
  auto options_of = [&](const std::string& cache) {
    BuildOptions o = options_for(dir.path().string(), cache);
    o.data.spec = "imagefolder:" + png;
    o.data.on_bad_file = recycle::BadFilePolicy::kSkip;
    return o;
  };
  ::testing::internal::CaptureStderr();
  recycle::run_build(options_of(dir.file("one")));
  const CacheContents whole = read_cache(dir.file("one"));
  const auto results = run_shards(3, [&](int r) { return options_of(shard_dir(dir, 3, r)); });
  const std::string err = ::testing::internal::GetCapturedStderr();
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(results[r].error, "") << "rank " << r;
    // The broken file is in rank 0's part (position 3 % 3): every rank leaves it out.
    EXPECT_EQ(results[r].report.files_left_out, 1) << "rank " << r;
    std::vector<IndexEntry> mine;
    for (const IndexEntry& e : whole.index) {
      if (recycle::shard_of(e.key, 3) == r) mine.push_back(e);
    }
    EXPECT_TRUE(read_cache(shard_dir(dir, 3, r)).index == mine) << "rank " << r;
    EXPECT_EQ(read_cache(shard_dir(dir, 3, r)).manifest.splits.at("train").shard.split_samples,
              29);
  }
  EXPECT_EQ(results[0].report.samples, 29);
  EXPECT_NE(err.find("c3/00003.png"), std::string::npos) << err;
}

// What a rank keys (recycle-build --sharded's and recycle.build's, through _native): its part
// whole, and at most 64 of the others' spread over the split; every rank's together are every
// sample, and a split of many samples is read about 1/parts a rank.
TEST(ShardedBuild, ARankKeysItsPartAndAtMost64SpotChecksOfTheOthers) {
  for (const int64_t samples : {0, 1, 5, 63, 64, 65, 1000, 100003}) {
    for (const int parts : {1, 2, 3, 8}) {
      std::vector<int> seen(static_cast<size_t>(samples), 0);
      for (int part = 0; part < parts; ++part) {
        const std::vector<int64_t> read = recycle::sharded_key_positions(samples, part, parts);
        ASSERT_TRUE(std::is_sorted(read.begin(), read.end()));
        int64_t own = 0;
        for (int64_t p : read) {
          ASSERT_GE(p, 0);
          ASSERT_LT(p, samples);
          ++seen[static_cast<size_t>(p)];
          if (p % parts == part) ++own;
        }
        EXPECT_EQ(own, (samples + parts - 1 - part) / parts) << samples << " " << part;
        EXPECT_LE(static_cast<int64_t>(read.size()) - own, 64) << samples << " " << part;
      }
      for (int64_t p = 0; p < samples; ++p) ASSERT_GE(seen[static_cast<size_t>(p)], 1);
    }
  }
  EXPECT_THROW(recycle::sharded_key_positions(10, 2, 2), std::invalid_argument);
}

TEST(ShardedBuild, RanksWhoseFilesOrCountsDifferAreRefusedBeforeAnyCacheIsOpened) {
  TempDir dir;
  for (const std::string name : {"a", "b"}) {
    recycle::testing::write_pattern_png_folder(dir.file(name), patterns(20, 0));
  }
  // Sample 0 (in rank 0's part, and one of rank 1's spot checks) differs in rank 1's folder.
  recycle::testing::write_gray_png(dir.file("b") + "/c0/00000.png", 28, 28,
                                   recycle::testing::pattern_pixels(7));
  auto options_of = [&](int r, int64_t limit) {
    BuildOptions o = options_for(dir.path().string(), shard_dir(dir, 2, r));
    o.data.spec = "imagefolder:" + dir.file(r == 0 ? "a" : "b");
    o.data.limit = limit;
    return o;
  };
  weights_in(dir.path().string());  // made here, not by the ranks' threads
  auto results = run_shards(2, [&](int r) { return options_of(r, 0); });
  EXPECT_NE(results[1].error.find("is not the same on rank 0 as here (its content key differs)"),
            std::string::npos)
      << results[1].error;
  EXPECT_NE(results[0].error, "");
  results = run_shards(2, [&](int r) { return options_of(r, r == 0 ? 0 : 19); });
  const std::string said = results[0].error + " | " + results[1].error;
  EXPECT_NE(said.find("rank 0 lists 20 samples, rank 1 19"), std::string::npos) << said;
  EXPECT_FALSE(fs::exists(shard_dir(dir, 2, 0)));
  EXPECT_FALSE(fs::exists(shard_dir(dir, 2, 1)));
}
