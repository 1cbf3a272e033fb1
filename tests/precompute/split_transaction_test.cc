// SplitTransaction (engine/precompute/split_transaction.h): the one write of a split that
// recycle-build's SplitBuild and the library's CacheWriter share, on a real cache.
#include "engine/precompute/split_transaction.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "recycle/errors.h"
#include "tests/test_util.h"

namespace {

using recycle::BuildReport;
using recycle::IndexEntry;
using recycle::Key;
using recycle::KeyPlan;
using recycle::Manifest;
using recycle::SplitInfo;
using recycle::SplitRequest;
using recycle::SplitTransaction;
using recycle::StaleCacheError;
using recycle::StoredChecks;
using recycle::testing::TempDir;

Key key_of(uint64_t i) { return {0x7A57000000000000ULL + i, ~i}; }

SplitRequest request_for(const std::string& dir, int64_t views, const std::string& augment) {
  SplitRequest r;
  r.where = {dir, "train", recycle::Compression::kNone, false};
  r.wanted.model = "test";
  r.wanted.fingerprint = "00112233445566778899aabbccddeeff";
  r.wanted.split_at = "b1";
  r.wanted.keyer = "xxh3";
  r.wanted.codec = recycle::Codec::kFp32;
  r.wanted.preprocess = "none";
  r.wanted.input_shape = {3};
  r.wanted.record_shapes = {{4}};
  r.wanted.class_names = {"a", "b"};
  r.wanted.classifier = "none";
  r.views = views;
  r.augment = augment;
  r.start_over = "start over";
  r.elsewhere = "go elsewhere";
  return r;
}

// Writes a split of n distinct samples (records "r<i>", one per sample) through a transaction;
// returns its report.
BuildReport write_split(const SplitRequest& r, int64_t n) {
  SplitTransaction t(r, StoredChecks{}, SplitTransaction::Clock::now());
  std::vector<Key> keys;
  std::vector<std::string> records;
  for (int64_t i = 0; i < n; ++i) {
    keys.push_back(key_of(static_cast<uint64_t>(i)));
    records.push_back("r" + std::to_string(i));
  }
  KeyPlan plan;
  plan.set_keys(keys);
  plan.plan(t.split().take_index(), std::vector<int64_t>(n, 0), false, t.split().had_records());
  SplitInfo info;
  info.data = "test-data";
  info.samples = n;
  info.unique = n;
  t.begin(info);
  recycle::StagedWrite w = t.stage(plan, 0, plan.todo().size(), keys, &records, [&](int64_t pos) {
    return IndexEntry{keys[pos], 0};
  });
  t.writer().write(&w);
  t.finish(plan.recomputed());
  BuildReport counts;
  counts.samples = n;
  counts.unique = n;
  return t.report(counts);
}

TEST(SplitTransaction, WritesASplitAndReportsItsCounters) {
  TempDir tmp;
  const BuildReport r = write_split(request_for(tmp.file("cache"), 0, ""), 5);
  EXPECT_EQ(r.computed, 5);
  EXPECT_EQ(r.index_written, 5);
  EXPECT_EQ(r.records, 5);
  EXPECT_EQ(r.skipped, 0);
  EXPECT_EQ(r.cache_records, 5);
  EXPECT_GT(r.bytes, 0);
  EXPECT_EQ(r.shards, 0);
  // Opened again: the stored manifest is the one the writes went with, complete.
  SplitTransaction again(request_for(tmp.file("cache"), 0, ""), StoredChecks{},
                         SplitTransaction::Clock::now());
  EXPECT_TRUE(again.split().complete_for("test-data", 5));
}

// The check every writer makes (the library's CacheWriter had none before it was shared): a
// split stored with augmented views is not written on as plain samples, nor with other views.
TEST(SplitTransaction, RefusesASplitOfOtherViewsBeforeAnyWrite) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  write_split(request_for(dir, 2, "hflip"), 3);
  for (const auto& [views, augment] :
       std::vector<std::pair<int64_t, std::string>>{{0, ""}, {3, "hflip"}}) {
    try {
      SplitTransaction t(request_for(dir, views, augment), StoredChecks{},
                         SplitTransaction::Clock::now());
      FAIL() << "views " << views << " accepted";
    } catch (const StaleCacheError& e) {
      EXPECT_NE(std::string(e.what()).find("the cache has 2 views of 'hflip'"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("go elsewhere"), std::string::npos) << e.what();
    }
  }
  SplitTransaction same(request_for(dir, 2, "hflip"), StoredChecks{},
                        SplitTransaction::Clock::now());
  EXPECT_TRUE(same.split().complete_for("test-data", 3));
}

// A writer's own checks run around the identity check: `before` first, `after` on an identity
// that matched, and what `after` changes is the manifest the writes go with.
TEST(SplitTransaction, RunsTheWritersOwnChecksAroundTheIdentity) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  write_split(request_for(dir, 0, ""), 2);
  std::vector<std::string> order;
  StoredChecks own;
  own.before = [&](const Manifest&) { order.push_back("before"); };
  own.after = [&](Manifest* m) {
    order.push_back("after");
    m->class_names.push_back("c");
  };
  {
    SplitTransaction t(request_for(dir, 0, ""), own, SplitTransaction::Clock::now());
    EXPECT_EQ(order, (std::vector<std::string>{"before", "after"}));
    EXPECT_EQ(t.split().manifest().class_names, (std::vector<std::string>{"a", "b", "c"}));
  }
  SplitRequest other = request_for(dir, 0, "");
  other.wanted.split_at = "b2";
  order.clear();
  EXPECT_THROW(SplitTransaction(other, own, SplitTransaction::Clock::now()), StaleCacheError);
  EXPECT_EQ(order, (std::vector<std::string>{"before"}));
}

}  // namespace
