// KeyPlan (engine/precompute/key_plan.h): the positions a build writes and the records it computes,
// against a split's stored index and a real store.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/precompute/key_plan.h"
#include "keyers/view_key.h"
#include "tests/cache/open_store.h"
#include "tests/cache/store_test_access.h"
#include "tests/test_util.h"

namespace {

using recycle::IndexEntry;
using recycle::Key;
using recycle::KeyPlan;
using recycle::testing::open_store;
using recycle::testing::TempDir;

Key k(uint64_t i) { return {0xC0FFEE, i}; }

TEST(KeyPlan, WritesWhatDiffersAndComputesWhatNoRecordHolds) {
  TempDir tmp;
  auto store = open_store(tmp.file("cache"));
  ASSERT_NE(store, nullptr);
  {  // A record the index does not point to (left by another split): found by one MultiGet.
    recycle::ActivationStore::Batch batch(*store);
    recycle::StoreTestAccess::put_record(batch, k(7), "seven");
    ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
  }
  KeyPlan plan;
  plan.set_keys({k(1), k(2), k(2), k(7), k(3)});
  const std::vector<int64_t> labels = {0, 1, 1, 0, 1};
  // Stored: position 0 as it is, position 1 with another label.
  plan.plan({IndexEntry{k(1), 0}, IndexEntry{k(2), 0}}, labels, /*stored_complete=*/true,
            /*had_records=*/true);
  EXPECT_EQ(plan.todo(), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_FALSE(plan.unchanged());
  size_t begin = 0, end = 0;
  ASSERT_TRUE(plan.next_chunk(3, &begin, &end));
  EXPECT_EQ(begin, 0u);
  EXPECT_EQ(end, 3u);
  std::vector<int64_t> pos, views;
  std::vector<Key> keys;
  // k(2) is stored (the index points to it), k(7) is in the store: nothing to compute.
  plan.find_missing(begin, end, *store, &pos, &keys, &views);
  EXPECT_TRUE(pos.empty());
  ASSERT_TRUE(plan.next_chunk(3, &begin, &end));
  plan.find_missing(begin, end, *store, &pos, &keys, &views);
  EXPECT_EQ(pos, (std::vector<int64_t>{4}));
  EXPECT_EQ(keys, (std::vector<Key>{k(3)}));
  EXPECT_FALSE(plan.next_chunk(3, &begin, &end));
  plan.rewind();
  EXPECT_EQ(plan.next(), 0u);

  // The same index and keys, labels as stored, the split complete: unchanged.
  KeyPlan same;
  same.set_keys({k(1), k(2)});
  same.plan({IndexEntry{k(1), 0}, IndexEntry{k(2), 1}}, {0, 1}, true, true);
  EXPECT_TRUE(same.todo().empty());
  EXPECT_TRUE(same.unchanged());
  same.plan({IndexEntry{k(1), 0}, IndexEntry{k(2), 1}}, {0, 1}, /*stored_complete=*/false, true);
  EXPECT_FALSE(same.unchanged());
}

TEST(KeyPlan, ViewsAreTheRecordsAndItemsRoundTrip) {
  TempDir tmp;
  auto store = open_store(tmp.file("cache"));
  ASSERT_NE(store, nullptr);
  KeyPlan plan;
  plan.set_views("hflip", 2);
  plan.set_keys({k(1), k(1), k(2)});
  plan.plan({}, {0, 0, 1}, false, /*had_records=*/false);
  EXPECT_EQ(plan.record_keys(k(1)),
            (std::vector<Key>{recycle::view_key(k(1), "hflip", 0),
                              recycle::view_key(k(1), "hflip", 1)}));
  size_t begin = 0, end = 0;
  ASSERT_TRUE(plan.next_chunk(10, &begin, &end));
  std::vector<int64_t> pos, views;
  std::vector<Key> keys;
  plan.find_missing(begin, end, *store, &pos, &keys, &views);
  // The duplicate sample's views are computed once.
  EXPECT_EQ(pos, (std::vector<int64_t>{0, 0, 2, 2}));
  EXPECT_EQ(views, (std::vector<int64_t>{0, 1, 0, 1}));
  std::vector<int64_t> items;
  for (size_t i = 0; i < pos.size(); ++i) items.push_back(plan.compute_item(pos[i], views[i]));
  EXPECT_EQ(items, (std::vector<int64_t>{0, 1, 4, 5}));
  std::vector<int64_t> pos2, views2;
  std::vector<Key> keys2;
  plan.from_items(items, &pos2, &keys2, &views2);
  EXPECT_EQ(pos2, pos);
  EXPECT_EQ(views2, views);
  EXPECT_EQ(keys2, keys);
  // A record listed once (the caller computes it) is not listed again.
  plan.rewind();
  ASSERT_TRUE(plan.next_chunk(10, &begin, &end));
  plan.find_missing(begin, end, *store, &pos, &keys, &views);
  EXPECT_TRUE(pos.empty());
  EXPECT_THROW(plan.from_items({7}, &pos2, &keys2, &views2), std::runtime_error);
}

// A split fed chunk by chunk (CacheWriter): each chunk's positions join todo where the stored
// index differs, and each chunk computes only the keys no chunk before it listed and the store
// lacks.
TEST(KeyPlan, ChunksAddedOneByOnePlanAsTheWholeSplitDoes) {
  TempDir tmp;
  auto store = open_store(tmp.file("cache"));
  ASSERT_NE(store, nullptr);
  {
    recycle::ActivationStore::Batch batch(*store);
    recycle::StoreTestAccess::put_record(batch, k(1), "one");
    ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
  }
  KeyPlan plan;
  plan.plan({IndexEntry{k(1), 0}, IndexEntry{k(2), 0}}, {}, false, /*had_records=*/true);
  size_t begin = 0, end = 0;
  std::vector<int64_t> pos, views;
  std::vector<Key> keys;
  plan.add_chunk({k(1), k(5), k(5)}, {0, 1, 1}, &begin, &end);  // position 0 as stored
  EXPECT_EQ(std::vector<int64_t>(plan.todo().begin() + begin, plan.todo().begin() + end),
            (std::vector<int64_t>{1, 2}));
  plan.find_missing(begin, end, *store, &pos, &keys, &views);
  EXPECT_EQ(pos, (std::vector<int64_t>{1}));  // k(5) once
  EXPECT_EQ(keys, (std::vector<Key>{k(5)}));
  plan.add_chunk({k(5), k(1), k(6)}, {1, 0, 0}, &begin, &end);
  EXPECT_EQ(std::vector<int64_t>(plan.todo().begin() + begin, plan.todo().begin() + end),
            (std::vector<int64_t>{3, 4, 5}));
  plan.find_missing(begin, end, *store, &pos, &keys, &views);
  EXPECT_EQ(pos, (std::vector<int64_t>{5}));  // k(5) listed before, k(1) stored
  EXPECT_EQ(keys, (std::vector<Key>{k(6)}));
  EXPECT_EQ(plan.keys().size(), 6u);
}

// Damaged records (on the cache's list, pointed to by the stored index) are computed again:
// their positions join todo although their entries are stored, and find_missing lists them
// although the store holds them; the other records stay stored.
TEST(KeyPlan, DamagedRecordsAreComputedAgain) {
  TempDir tmp;
  auto store = open_store(tmp.file("cache"));
  ASSERT_NE(store, nullptr);
  {
    recycle::ActivationStore::Batch batch(*store);
    for (uint64_t i : {1, 2, 3}) recycle::StoreTestAccess::put_record(batch, k(i), "stored");
    ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
  }
  const std::vector<IndexEntry> stored = {{k(1), 0}, {k(2), 1}, {k(3), 0}};
  for (bool whole : {true, false}) {  // planned at once (recycle-build), chunk by chunk (CacheWriter)
    KeyPlan plan;
    plan.set_damaged({k(2)});
    size_t begin = 0, end = 0;
    if (whole) {
      plan.set_keys({k(1), k(2), k(3)});
      plan.plan(stored, {0, 1, 0}, /*stored_complete=*/true, /*had_records=*/true);
      EXPECT_FALSE(plan.unchanged());
      ASSERT_TRUE(plan.next_chunk(10, &begin, &end));
    } else {
      plan.plan(stored, {}, false, true);
      plan.add_chunk({k(1), k(2), k(3)}, {0, 1, 0}, &begin, &end);
    }
    EXPECT_EQ(plan.todo(), (std::vector<int64_t>{1})) << whole;
    std::vector<int64_t> pos, views;
    std::vector<Key> keys;
    plan.find_missing(begin, end, *store, &pos, &keys, &views);
    EXPECT_EQ(pos, (std::vector<int64_t>{1})) << whole;
    EXPECT_EQ(keys, (std::vector<Key>{k(2)})) << whole;
  }
}

}  // namespace
