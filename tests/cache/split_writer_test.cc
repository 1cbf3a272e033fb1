// Tests for cache/split_writer.h: the one write path of a split (begin, staged chunks, finish).
#include "cache/split_writer.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/activation_store.h"
#include "cache/manifest.h"
#include "recycle/key.h"
#include "tests/cache/open_store.h"
#include "tests/test_util.h"

namespace {

using recycle::testing::open_store;

using recycle::ActivationStore;
using recycle::IndexEntry;
using recycle::Key;
using recycle::Manifest;
using recycle::SplitInfo;
using recycle::SplitWriter;
using recycle::StagedWrite;
using recycle::testing::TempDir;

Key key_of(uint64_t i) { return {0x5EED000000000000ULL + i, ~i}; }

Manifest manifest_for_test() {
  Manifest m;
  m.model = "test";
  m.fingerprint = "00112233445566778899aabbccddeeff";
  m.split_at = "b1";
  m.keyer = "xxh3";
  m.codec = recycle::Codec::kFp32;
  m.preprocess = "none";
  m.record_shapes = {{4}};
  m.class_names = {"a", "b"};
  m.classifier = "none";
  return m;
}

SplitInfo info_of(int64_t samples) {
  SplitInfo info;
  info.data = "test-data";
  info.samples = samples;
  info.unique = samples;
  return info;
}

Manifest stored_manifest(const ActivationStore& store) {
  Manifest m;
  const recycle::Status st = store.read_manifest(&m);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return m;
}

std::vector<IndexEntry> stored_index(const ActivationStore& store, const std::string& split) {
  std::vector<IndexEntry> index;
  const recycle::Status st = store.read_index(split, &index);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return index;
}

// Writes a complete split of n samples, sample i with record "r<i>".
void write_split(ActivationStore* store, Manifest* m, int64_t n) {
  SplitWriter w(store, m, "train");
  w.begin(info_of(n), 0);
  StagedWrite chunk = w.stage();
  for (int64_t i = 0; i < n; ++i) {
    chunk.put_record(key_of(i), "r" + std::to_string(i));
    chunk.put_index(i, IndexEntry{key_of(i), i % 2});
  }
  w.seal(&chunk);
  w.write(&chunk);
  w.finish();
}

TEST(SplitWriter, WritesASplitWithItsCountsAndMarksItCompleteAtTheEnd) {
  TempDir dir;
  auto store = open_store(dir.file("cache"));
  Manifest m = manifest_for_test();
  SplitWriter w(store.get(), &m, "train");
  w.begin(info_of(3), 0, "weights");
  EXPECT_TRUE(w.begun());
  EXPECT_FALSE(stored_manifest(*store).splits.at("train").complete);
  std::string blob;
  ASSERT_TRUE(store->get_blob("head", &blob).ok());  // the head went with it
  EXPECT_EQ(blob, "weights");

  StagedWrite chunk = w.stage();
  chunk.put_record(key_of(0), "r0");
  chunk.put_record(key_of(1), "r1!");
  for (int64_t i = 0; i < 3; ++i) chunk.put_index(i, IndexEntry{key_of(i % 2), i});
  w.seal(&chunk);
  EXPECT_EQ(chunk.records, 2);
  EXPECT_EQ(chunk.entries, 3);
  w.write(&chunk);
  // The chunk's write holds the manifest with its counts, the split still incomplete.
  const Manifest mid = stored_manifest(*store);
  EXPECT_EQ(mid.records, 2);
  EXPECT_EQ(mid.record_bytes, static_cast<int64_t>(chunk.record_bytes()));
  EXPECT_GT(mid.record_bytes, 0);
  EXPECT_FALSE(mid.splits.at("train").complete);
  EXPECT_EQ(stored_index(*store, "train").size(), 3u);

  w.finish();
  const Manifest done = stored_manifest(*store);
  EXPECT_TRUE(done.splits.at("train").complete);
  EXPECT_EQ(done.splits.at("train").samples, 3);
  EXPECT_EQ(done.splits.at("train").data, "test-data");
  EXPECT_EQ(w.writes(), 3);  // begin, the chunk, finish
  std::string record;
  ASSERT_TRUE(store->get_record(key_of(1), &record).ok());
  EXPECT_EQ(record, "r1!");
}

// A split rewritten shorter: its first write cuts the stored index to the new length and marks
// it incomplete, whatever the stored entry said.
TEST(SplitWriter, BeginCutsALongerStoredIndexAndMarksTheSplitIncomplete) {
  TempDir dir;
  auto store = open_store(dir.file("cache"));
  Manifest m = manifest_for_test();
  write_split(store.get(), &m, 5);
  ASSERT_EQ(stored_index(*store, "train").size(), 5u);
  SplitWriter again(store.get(), &m, "train");
  again.begin(info_of(3), 5);
  EXPECT_EQ(stored_index(*store, "train").size(), 3u);
  const Manifest stored = stored_manifest(*store);
  EXPECT_FALSE(stored.splits.at("train").complete);
  EXPECT_EQ(stored.splits.at("train").samples, 3);
  EXPECT_EQ(stored.records, 5);  // records stay: other splits may point to them
}

TEST(SplitWriter, RefusesWritesOutOfOrder) {
  TempDir dir;
  auto store = open_store(dir.file("cache"));
  Manifest m = manifest_for_test();
  SplitWriter w(store.get(), &m, "train");
  w.begin(info_of(1), 0);
  EXPECT_THROW(w.begin(info_of(1), 0), std::logic_error);  // once only
  StagedWrite chunk = w.stage();
  chunk.put_record(key_of(0), "r0");
  EXPECT_THROW(w.write(&chunk), std::logic_error);  // not sealed: the counts are not in it
  w.seal(&chunk);
  EXPECT_THROW(chunk.put_index(0, IndexEntry{key_of(0), 0}), std::logic_error);  // sealed
  EXPECT_THROW(w.seal(&chunk), std::logic_error);                                // counted once
  EXPECT_EQ(m.records, 1);
  StagedWrite empty;
  EXPECT_THROW(empty.put_record(key_of(0), "r0"), std::logic_error);  // no batch
}

TEST(SplitWriter, RefusesAReadOnlyStore) {
  TempDir dir;
  {
    auto store = open_store(dir.file("cache"));
    Manifest m = manifest_for_test();
    write_split(store.get(), &m, 2);
  }
  auto reader = open_store(dir.file("cache"), /*read_only=*/true);
  Manifest m = stored_manifest(*reader);
  EXPECT_THROW(SplitWriter(reader.get(), &m, "train"), std::logic_error);
}

// With flush_seconds 0 every write is flushed: a read-only view opened after a chunk's write
// sees it (read-only instances see what is on disk, not the writer's memtables).
TEST(SplitWriter, FlushesEveryWriteWithFlushSecondsZero) {
  TempDir dir;
  auto store = open_store(dir.file("cache"));
  Manifest m = manifest_for_test();
  SplitWriter w(store.get(), &m, "train");
  w.set_flush_seconds(0);
  w.begin(info_of(2), 0);
  StagedWrite chunk = w.stage();
  chunk.put_record(key_of(0), "r0");
  chunk.put_index(0, IndexEntry{key_of(0), 1});
  w.seal(&chunk);
  w.write(&chunk);
  auto view = open_store(dir.file("cache"), /*read_only=*/true);
  EXPECT_EQ(stored_index(*view, "train").size(), 1u);
  EXPECT_EQ(stored_manifest(*view).records, 1);
}

// A written batch is kept, emptied, for the next chunk: its memory is reused (no chunk of
// hundreds of MB faulted in again), it holds nothing of the chunk before, and a staged write is
// written once.
TEST(SplitWriter, ReusesAWrittenBatchEmptiedForTheNextChunk) {
  TempDir dir;
  auto store = open_store(dir.file("cache"));
  Manifest m = manifest_for_test();
  SplitWriter w(store.get(), &m, "train");
  w.begin(info_of(2), 0);
  const std::string big(1 << 20, 'x');
  StagedWrite first = w.stage(2 << 20);
  first.put_record(key_of(0), big);
  first.put_index(0, IndexEntry{key_of(0), 1});
  w.seal(&first);
  w.write(&first);
  EXPECT_EQ(first.records, 1);                      // its counts kept
  EXPECT_THROW(w.write(&first), std::logic_error);  // written once
  StagedWrite second = w.stage(1 << 20);  // the first's batch: no record of it in this one
  second.put_record(key_of(1), "r1");
  second.put_index(1, IndexEntry{key_of(1), 0});
  w.seal(&second);
  EXPECT_EQ(second.record_bytes(), 2u);
  w.write(&second);
  w.finish();
  std::string record;
  ASSERT_TRUE(store->get_record(key_of(0), &record).ok());
  EXPECT_EQ(record, big);
  ASSERT_TRUE(store->get_record(key_of(1), &record).ok());
  EXPECT_EQ(record, "r1");
  EXPECT_EQ(stored_index(*store, "train").size(), 2u);
  EXPECT_EQ(stored_manifest(*store).records, 2);
}

}  // namespace
