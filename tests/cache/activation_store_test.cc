// Tests for cache/activation_store.h: the RocksDB-backed cache of records, samples index,
// manifest and blobs.
#include "cache/activation_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "cache/manifest.h"
#include "recycle/key.h"
#include "recycle/options.h"  // parse_compression
#include "recycle/status.h"
#include "tests/cache/open_store.h"
#include "tests/cache/store_test_access.h"
#include "tests/test_util.h"

namespace {

using recycle::testing::open_store;

namespace fs = std::filesystem;
using recycle::testing::TempDir;

recycle::Key key_of(uint64_t i) { return {0xABCD000000000000ULL + i, ~i}; }

// Opaque record bytes, distinct per i (the store does not look inside records).
std::string record_of(uint64_t i) {
  return "record-" + std::to_string(i) + std::string(static_cast<size_t>(i % 7), '\0') + "!";
}

recycle::Manifest manifest_of(const std::string& model) {
  recycle::Manifest m;
  m.model = model;
  m.fingerprint = "00112233445566778899aabbccddeeff";
  m.split_at = "layer2.1";
  m.prefix_blocks = 4;
  m.total_blocks = 8;
  m.keyer = "xxh3";
  m.codec = recycle::Codec::kFp16;
  m.preprocess = "none";
  m.record_shapes = {{32, 7, 7}};
  m.class_names = {"a", "b"};
  m.classifier = "new";
  m.splits["train"] = {"fashion-mnist", 3, 2, true};
  m.records = 2;
  m.record_bytes = 100;
  return m;
}

// Writes records 0..n-1, a "train" index of n entries pointing at them (label = 10 + i),
// a manifest and a blob, in one batch.
void write_sample_cache(recycle::ActivationStore* store, int n) {
  recycle::ActivationStore::Batch batch(*store);
  for (int i = 0; i < n; ++i) {
    recycle::StoreTestAccess::put_record(batch, key_of(i), record_of(i));
    recycle::StoreTestAccess::put_index(batch, "train", i, {key_of(i), 10 + i});
  }
  recycle::StoreTestAccess::put_manifest(batch, manifest_of("resnet18"));
  recycle::StoreTestAccess::put_blob(batch, "head", std::string("\x00\x01head-weights\xff", 15));
  ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
}

std::vector<recycle::IndexEntry> entries(int from, int to, int label_base = 10) {
  std::vector<recycle::IndexEntry> out;
  for (int i = from; i < to; ++i) out.push_back({key_of(i), label_base + i});
  return out;
}

std::vector<recycle::IndexEntry> read_index(const recycle::ActivationStore& store,
                                            const std::string& split) {
  std::vector<recycle::IndexEntry> out = entries(0, 1);  // must be replaced
  const recycle::Status st = store.read_index(split, &out);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return out;
}

}  // namespace

TEST(ActivationStore, OpenCreatesACacheAndHasNoManifestYet) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  auto store = open_store(dir);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "CURRENT"));
  EXPECT_EQ(store->dir(), dir);
  EXPECT_FALSE(store->read_only());
  recycle::Manifest m;
  const recycle::Status st = store->read_manifest(&m);
  EXPECT_TRUE(st.is_not_found()) << st.to_string();
  EXPECT_TRUE(read_index(*store, "train").empty());
  std::string blob;
  EXPECT_TRUE(store->get_blob("head", &blob).is_not_found());
}

TEST(ActivationStore, OpenCreatesNestedDirectories) {
  TempDir tmp;
  const std::string dir = tmp.file("a/b/cache");
  auto store = open_store(dir);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "CURRENT"));
}

TEST(ActivationStore, EveryCompressionStoresAndReadsRecords) {
  TempDir tmp;
  recycle::StoreOptions options;
  for (const std::string& compression : recycle::compression_names()) {
    options.compression = recycle::parse_compression(compression);
    std::unique_ptr<recycle::ActivationStore> ok;
    ASSERT_OK(recycle::ActivationStore::open(tmp.file(compression), options, &ok));
    recycle::ActivationStore::Batch batch(*ok);
    recycle::StoreTestAccess::put_record(batch, key_of(1), std::string(5000, 'z'));
    ASSERT_OK(recycle::StoreTestAccess::write(*ok, &batch));
    ASSERT_OK(ok->flush());
    std::string back;
    ASSERT_OK(ok->get_record(key_of(1), &back));
    EXPECT_EQ(back, std::string(5000, 'z')) << compression;
  }
}

TEST(ActivationStore, BatchWritesAtomicallyAndReadsBack) {
  TempDir tmp;
  auto store = open_store(tmp.file("cache"));
  ASSERT_NE(store, nullptr);

  recycle::ActivationStore::Batch batch(*store);
  EXPECT_EQ(batch.count(), 0u);
  for (int i = 0; i < 5; ++i) {
    recycle::StoreTestAccess::put_record(batch, key_of(i), record_of(i));
  }
  // Index entries out of position order, and one key used at two positions.
  recycle::StoreTestAccess::put_index(batch, "train", 2, {key_of(2), 7});
  recycle::StoreTestAccess::put_index(batch, "train", 0, {key_of(0), 3});
  recycle::StoreTestAccess::put_index(batch, "train", 1, {key_of(4), -1});
  recycle::StoreTestAccess::put_index(batch, "train", 3, {key_of(0), 3});
  recycle::StoreTestAccess::put_manifest(batch, manifest_of("resnet18"));
  recycle::StoreTestAccess::put_blob(batch, "head", "weights");
  EXPECT_EQ(batch.count(), 5u + 4u + 1u + 1u);
  size_t bytes = 0;
  for (int i = 0; i < 5; ++i) bytes += record_of(i).size();
  EXPECT_EQ(batch.record_bytes(), bytes);

  // Nothing is visible before write().
  std::string value;
  EXPECT_TRUE(store->get_record(key_of(0), &value).is_not_found());
  recycle::Manifest m;
  EXPECT_TRUE(store->read_manifest(&m).is_not_found());
  EXPECT_TRUE(read_index(*store, "train").empty());

  ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch, /*sync=*/true));
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK(store->get_record(key_of(i), &value));
    EXPECT_EQ(value, record_of(i));
  }
  ASSERT_OK(store->get_blob("head", &value));
  EXPECT_EQ(value, "weights");
  ASSERT_OK(store->read_manifest(&m));
  EXPECT_EQ(m.model, "resnet18");
  EXPECT_EQ(m.splits.at("train").samples, 3);
  EXPECT_TRUE(m.identity_differences(manifest_of("resnet18")).empty());
  EXPECT_EQ(read_index(*store, "train"),
            (std::vector<recycle::IndexEntry>{
                {key_of(0), 3}, {key_of(4), -1}, {key_of(2), 7}, {key_of(0), 3}}));
  EXPECT_TRUE(read_index(*store, "test").empty());
}

TEST(ActivationStore, LaterWritesReplaceEarlierOnes) {
  TempDir tmp;
  auto store = open_store(tmp.file("cache"));
  ASSERT_NE(store, nullptr);
  write_sample_cache(store.get(), 3);
  recycle::ActivationStore::Batch batch(*store);
  recycle::StoreTestAccess::put_record(batch, key_of(1), "new");
  recycle::StoreTestAccess::put_index(batch, "train", 2, {key_of(0), 99});
  recycle::StoreTestAccess::put_manifest(batch, manifest_of("transformer"));
  recycle::StoreTestAccess::put_blob(batch, "head", "");
  ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
  std::string value;
  ASSERT_OK(store->get_record(key_of(1), &value));
  EXPECT_EQ(value, "new");
  ASSERT_OK(store->get_blob("head", &value));
  EXPECT_EQ(value, "");
  recycle::Manifest m;
  ASSERT_OK(store->read_manifest(&m));
  EXPECT_EQ(m.model, "transformer");
  EXPECT_EQ(read_index(*store, "train"),
            (std::vector<recycle::IndexEntry>{{key_of(0), 10}, {key_of(1), 11}, {key_of(0), 99}}));
}

TEST(ActivationStore, MissingRecordIsNotFoundNotIOError) {
  TempDir tmp;
  auto store = open_store(tmp.file("cache"));
  ASSERT_NE(store, nullptr);
  write_sample_cache(store.get(), 3);
  std::string value = "untouched";
  const recycle::Status st = store->get_record(key_of(3), &value);
  EXPECT_TRUE(st.is_not_found()) << st.to_string();
  EXPECT_FALSE(st.is_io_error());
  EXPECT_FALSE(st.is_corruption());
  EXPECT_TRUE(store->get_record(recycle::Key{}, &value).is_not_found());
  EXPECT_TRUE(store->get_blob("tail", &value).is_not_found());
  // After a flush too (the miss then goes through the SST files and their filters).
  ASSERT_OK(store->flush());
  EXPECT_TRUE(store->get_record(key_of(3), &value).is_not_found());
  ASSERT_OK(store->get_record(key_of(2), &value));
  EXPECT_EQ(value, record_of(2));
}

TEST(ActivationStore, MultiGetCallsBackForPresentKeysInOrder) {
  TempDir tmp;
  auto store = open_store(tmp.file("cache"));
  ASSERT_NE(store, nullptr);
  write_sample_cache(store.get(), 4);
  const std::vector<recycle::Key> keys = {key_of(2), key_of(7), key_of(0),     key_of(9),
                                          key_of(2), key_of(3), recycle::Key{}};
  std::vector<std::pair<size_t, std::string>> calls;
  std::vector<recycle::Status> statuses(2, recycle::Status::io_error("stale"));
  store->multi_get(
      keys, [&](size_t i, std::string_view bytes) { calls.emplace_back(i, std::string(bytes)); },
      &statuses);
  EXPECT_EQ(calls,
            (std::vector<std::pair<size_t, std::string>>{
                {0, record_of(2)}, {2, record_of(0)}, {4, record_of(2)}, {5, record_of(3)}}));
  ASSERT_EQ(statuses.size(), keys.size());
  for (size_t i : {0, 2, 4, 5}) EXPECT_TRUE(statuses[i].ok()) << i << statuses[i].to_string();
  for (size_t i : {1, 3, 6})
    EXPECT_TRUE(statuses[i].is_not_found()) << i << statuses[i].to_string();

  // The same after a flush, when the values come from SST files.
  ASSERT_OK(store->flush());
  calls.clear();
  store->multi_get(
      keys, [&](size_t i, std::string_view bytes) { calls.emplace_back(i, std::string(bytes)); },
      &statuses);
  EXPECT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls.back(), (std::pair<size_t, std::string>{5, record_of(3)}));
  EXPECT_TRUE(statuses[6].is_not_found());

  // No keys: no calls, no statuses.
  calls.clear();
  store->multi_get(
      {}, [&](size_t i, std::string_view) { calls.emplace_back(i, ""); }, &statuses);
  EXPECT_TRUE(calls.empty());
  EXPECT_TRUE(statuses.empty());
}

// Large records (16 KB or more) are kept in blob files; a multi_get read in parts by the
// store's read threads gives what one MultiGet on the calling thread gives, in order.
TEST(ActivationStore, MultiGetInPartsGivesWhatOneReadGives) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  {
    auto store = open_store(dir);
    ASSERT_NE(store, nullptr);
    recycle::ActivationStore::Batch batch(*store);
    for (uint64_t i = 0; i < 300; ++i) {
      // Every third record large: 20 KB of its own bytes.
      const std::string r =
          record_of(i) + (i % 3 == 0 ? std::string(20000, static_cast<char>('a' + i % 26)) : "");
      recycle::StoreTestAccess::put_record(batch, key_of(i), r);
    }
    ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
    ASSERT_OK(store->flush());
  }
  int blob_files = 0;
  for (const auto& e : fs::directory_iterator(dir)) blob_files += e.path().extension() == ".blob";
  EXPECT_GT(blob_files, 0);
  std::vector<recycle::Key> keys;
  std::mt19937 rng(3);
  size_t missing = 0;
  for (int k = 0; k < 200; ++k) {
    const uint64_t i = rng() % 330;  // 300..329 are not there
    keys.push_back(key_of(i));
    missing += i >= 300;
  }
  auto read = [&](int threads) {
    recycle::StoreOptions options;
    options.read_only = true;
    options.read_threads = threads;
    std::unique_ptr<recycle::ActivationStore> store;
    EXPECT_OK(recycle::ActivationStore::open(dir, options, &store));
    std::vector<std::pair<size_t, std::string>> calls;
    std::vector<recycle::Status> statuses;
    store->multi_get(
        keys, [&](size_t i, std::string_view b) { calls.emplace_back(i, std::string(b)); },
        &statuses);
    std::vector<std::string> found;
    for (const auto& s : statuses) found.push_back(s.ok() ? "ok" : s.is_not_found() ? "nf" : "?");
    return std::make_pair(calls, found);
  };
  const auto one = read(1), parts = read(8);
  EXPECT_EQ(parts.first, one.first);
  EXPECT_EQ(parts.second, one.second);
  EXPECT_GT(missing, 0u);
  EXPECT_EQ(one.first.size(), keys.size() - missing);
}

// multi_get leaves RocksDB's own checksums to StoreOptions::verify_read_checksums (or
// RECYCLE_VERIFY_READS): by default a byte flipped in a blob comes back as it is (every reader
// parses the record, whose XXH3 sees it); verified, the read is Corruption.
TEST(ActivationStore, MultiGetVerifiesRocksDbsChecksumsOnlyWhenAsked) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  const std::string value(40000, 'v');  // a blob of its own
  {
    auto store = open_store(dir);
    ASSERT_NE(store, nullptr);
    recycle::ActivationStore::Batch batch(*store);
    recycle::StoreTestAccess::put_record(batch, key_of(1), value);
    ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
    ASSERT_OK(store->flush());
  }
  std::string blob;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".blob") blob = e.path().string();
  }
  ASSERT_NE(blob, "");
  std::string bytes = recycle::testing::read_file(blob);
  const size_t at = bytes.find(std::string(1000, 'v')) + 500;  // inside the value
  ASSERT_LT(at, bytes.size());
  bytes[at] = 'w';
  recycle::testing::write_file(blob, bytes);
  auto read = [&](bool verify) {
    recycle::StoreOptions options;
    options.read_only = true;
    options.verify_read_checksums = verify;
    std::unique_ptr<recycle::ActivationStore> store;
    const recycle::Status open = recycle::ActivationStore::open(dir, options, &store);
    if (!open.ok()) return "open: " + open.to_string();
    std::vector<recycle::Status> statuses;
    std::string got;
    store->multi_get({key_of(1)}, [&](size_t, std::string_view b) { got = b; }, &statuses);
    if (!statuses[0].ok()) return statuses[0].to_string();
    return std::string(got == value ? "the value" : "another value");
  };
  EXPECT_EQ(read(false), "another value");
  EXPECT_NE(read(true).find("Corruption"), std::string::npos) << read(true);
  ::setenv("RECYCLE_VERIFY_READS", "1", 1);
  EXPECT_NE(read(false).find("Corruption"), std::string::npos) << read(false);
  ::setenv("RECYCLE_VERIFY_READS", "yes", 1);
  EXPECT_NE(read(false).find("RECYCLE_VERIFY_READS=yes: expected 0 or 1"), std::string::npos)
      << read(false);
  ::unsetenv("RECYCLE_VERIFY_READS");
}

TEST(ActivationStore, ReportsTheMemoryOfItsTableReadersAndOfItsBlockCache) {
  TempDir tmp;
  auto store = open_store(tmp.file("cache"));
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->table_readers_bytes(), 0u);  // no table file yet
  write_sample_cache(store.get(), 64);
  ASSERT_OK(store->flush());
  EXPECT_GT(store->table_readers_bytes(), 0u);  // each family's new file: index and filter
  const uint64_t before = store->block_cache_usage();
  std::vector<recycle::Key> keys;
  for (int i = 0; i < 64; ++i) keys.push_back(key_of(i));
  std::vector<recycle::Status> statuses;
  size_t bytes = 0;
  store->multi_get(
      keys, [&](size_t, std::string_view v) { bytes += v.size(); }, &statuses);
  EXPECT_GT(bytes, 0u);
  // The records' blocks were read through the cache and stay there.
  EXPECT_GT(store->block_cache_usage(), before + bytes);
}

TEST(ActivationStore, TruncateIndexRemovesFromAPositionOnOnlyInThatSplit) {
  TempDir tmp;
  auto store = open_store(tmp.file("cache"));
  ASSERT_NE(store, nullptr);
  {
    recycle::ActivationStore::Batch batch(*store);
    // Splits whose names share a prefix with "train", or sort right next to it.
    for (const std::string split : {"train", "train2", "trai", "train.x", "test"}) {
      for (int i = 0; i < 10; ++i)
        recycle::StoreTestAccess::put_index(batch, split, i, {key_of(i), 10 + i});
    }
    ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
  }
  {
    recycle::ActivationStore::Batch batch(*store);
    recycle::StoreTestAccess::truncate_index(batch, "train", 6);
    ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
  }
  EXPECT_EQ(read_index(*store, "train"), entries(0, 6));
  for (const std::string split : {"train2", "trai", "train.x", "test"}) {
    EXPECT_EQ(read_index(*store, split), entries(0, 10)) << split;
  }

  // Truncate and rewrite in one batch: the rewrite wins.
  {
    recycle::ActivationStore::Batch batch(*store);
    recycle::StoreTestAccess::truncate_index(batch, "train", 2);
    recycle::StoreTestAccess::put_index(batch, "train", 2, {key_of(50), 50});
    ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
  }
  std::vector<recycle::IndexEntry> want = entries(0, 2);
  want.push_back({key_of(50), 50});
  EXPECT_EQ(read_index(*store, "train"), want);

  // Past the end: nothing changes. From 0: the split is gone.
  {
    recycle::ActivationStore::Batch batch(*store);
    recycle::StoreTestAccess::truncate_index(batch, "test", 10);
    recycle::StoreTestAccess::truncate_index(batch, "train2", 0);
    ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
  }
  EXPECT_EQ(read_index(*store, "test"), entries(0, 10));
  EXPECT_TRUE(read_index(*store, "train2").empty());
  EXPECT_EQ(read_index(*store, "trai"), entries(0, 10));
  EXPECT_EQ(read_index(*store, "train.x"), entries(0, 10));
  EXPECT_EQ(read_index(*store, "train"), want);
}

TEST(ActivationStore, ReadIndexReportsAGapAsCorruption) {
  TempDir tmp;
  auto store = open_store(tmp.file("cache"));
  ASSERT_NE(store, nullptr);
  recycle::ActivationStore::Batch batch(*store);
  for (int i : {0, 1, 3}) recycle::StoreTestAccess::put_index(batch, "train", i, {key_of(i), i});
  ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
  std::vector<recycle::IndexEntry> out;
  const recycle::Status st = store->read_index("train", &out);
  EXPECT_TRUE(st.is_corruption()) << st.to_string();
  EXPECT_NE(st.message().find("position 2"), std::string::npos) << st.message();
}

TEST(ActivationStore, ReopeningAfterCloseKeepsEverything) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  for (bool flush : {false, true}) {
    SCOPED_TRACE(flush ? "flushed" : "only in the write-ahead log");
    ASSERT_OK(recycle::ActivationStore::destroy(dir));
    {
      auto store = open_store(dir);
      ASSERT_NE(store, nullptr);
      write_sample_cache(store.get(), 20);
      if (flush) ASSERT_OK(store->flush());
    }
    for (bool read_only : {false, true}) {
      auto store = open_store(dir, read_only);
      ASSERT_NE(store, nullptr);
      EXPECT_EQ(store->read_only(), read_only);
      for (int i = 0; i < 20; ++i) {
        std::string value;
        ASSERT_OK(store->get_record(key_of(i), &value));
        EXPECT_EQ(value, record_of(i));
      }
      EXPECT_EQ(read_index(*store, "train"), entries(0, 20));
      recycle::Manifest m;
      ASSERT_OK(store->read_manifest(&m));
      EXPECT_EQ(m.model, "resnet18");
      std::string blob;
      ASSERT_OK(store->get_blob("head", &blob));
      EXPECT_EQ(blob, std::string("\x00\x01head-weights\xff", 15));
    }
  }
}

TEST(ActivationStore, ReadOnlyOpenOfAMissingCacheIsNotFound) {
  TempDir tmp;
  recycle::StoreOptions options;
  options.read_only = true;
  std::unique_ptr<recycle::ActivationStore> store;
  recycle::Status st = recycle::ActivationStore::open(tmp.file("missing"), options, &store);
  EXPECT_TRUE(st.is_not_found()) << st.to_string();
  EXPECT_EQ(store, nullptr);
  EXPECT_FALSE(fs::exists(tmp.file("missing")));
  // An existing directory that holds no cache is no better.
  st = recycle::ActivationStore::open(tmp.path().string(), options, &store);
  EXPECT_TRUE(st.is_not_found()) << st.to_string();
  // Nor may a writer without create_if_missing create one.
  recycle::StoreOptions writer;
  writer.create_if_missing = false;
  st = recycle::ActivationStore::open(tmp.file("missing"), writer, &store);
  EXPECT_TRUE(st.is_not_found()) << st.to_string();
  EXPECT_FALSE(fs::exists(tmp.file("missing")));
}

// A writer lets RocksDB delete what compaction made obsolete every 64 MB it writes (under the
// exclusive open lock; when a reader is opening, at a write after), so its directory stays near
// the size of its data; readers that open and read all along meanwhile never fail and see
// whole records.
TEST(ActivationStore, AWriterReleasesObsoleteFilesWhileReadersOpen) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  auto store = open_store(dir);
  ASSERT_NE(store, nullptr);
  const std::string filler(4000, 'x');  // small records: kept in the tables, which compact
  uint64_t next = 0;
  auto write_mb = [&](int mb) {  // 256 records of about 4 KB a batch: 1 MB
    for (int b = 0; b < mb; ++b) {
      recycle::ActivationStore::Batch batch(*store);
      for (int r = 0; r < 256; ++r, ++next) {
        recycle::StoreTestAccess::put_record(batch, key_of(next), record_of(next) + filler);
      }
      ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
    }
  };
  std::atomic<bool> done{false};
  std::atomic<int> opens{0}, failures{0};
  std::thread reader([&] {
    do {  // at least once, however late this thread starts
      recycle::StoreOptions options;
      options.read_only = true;
      std::unique_ptr<recycle::ActivationStore> r;
      const recycle::Status st = recycle::ActivationStore::open(dir, options, &r);
      if (!st.ok()) {
        failures++;
        ADD_FAILURE() << st.to_string();
        continue;  // to the loop's condition
      }
      opens++;
      const recycle::Status read =
          r->for_each_record([&](const recycle::Key& k, std::string_view v) {
            if (v != record_of(k.hi - key_of(0).hi) + filler) failures++;
            return true;
          });
      if (!read.ok()) {
        failures++;
        ADD_FAILURE() << read.to_string();
      }
    } while (!done);
  });
  struct Join {  // the reader stops, also when an assertion below returns early
    std::atomic<bool>& done;
    std::thread& reader;
    ~Join() {
      done = true;
      if (reader.joinable()) reader.join();
    }
  } join{done, reader};
  write_mb(96);
  ASSERT_OK(store->flush());
  ASSERT_OK(store->compact_records());  // the tables written so far are now obsolete
  const uint64_t before = store->disk_bytes();
  write_mb(64);  // 64 MB more: a release, or tries of one while the reader is opening
  done = true;
  reader.join();
  // Writes when no reader is opening: a release within the next 64 MB (at the first of them
  // when the tries above all met a reader's open).
  int more = 0;
  auto data = [&] { return (160.0 + more) * 256 * (filler.size() + 20); };
  while (store->disk_bytes() > 1.25 * data() && more < 130) {
    write_mb(1);
    ++more;
  }
  const uint64_t after = store->disk_bytes();
  EXPECT_GT(opens.load(), 0);
  EXPECT_EQ(failures.load(), 0);
  // The 96 MB compaction replaced went (before: twice those on disk).
  EXPECT_GT(before, 1.8 * 96 * 256 * filler.size()) << before;
  EXPECT_LT(after, 1.25 * data()) << "on disk " << after << " for " << data() << " after " << more;
}

TEST(ActivationStore, ReadOnlyInstancesBesideAWriter) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  auto writer = open_store(dir);
  ASSERT_NE(writer, nullptr);
  write_sample_cache(writer.get(), 5);
  ASSERT_OK(writer->flush());

  auto reader1 = open_store(dir, /*read_only=*/true);
  auto reader2 = open_store(dir, /*read_only=*/true);
  ASSERT_NE(reader1, nullptr);
  ASSERT_NE(reader2, nullptr);
  for (const auto* reader : {reader1.get(), reader2.get()}) {
    EXPECT_TRUE(reader->read_only());
    for (int i = 0; i < 5; ++i) {
      std::string value;
      ASSERT_OK(reader->get_record(key_of(i), &value));
      EXPECT_EQ(value, record_of(i));
    }
    std::string value;
    EXPECT_TRUE(reader->get_record(key_of(5), &value).is_not_found());
    EXPECT_EQ(read_index(*reader, "train"), entries(0, 5));
    recycle::Manifest m;
    ASSERT_OK(reader->read_manifest(&m));
    EXPECT_EQ(m.model, "resnet18");
  }
  // The writer keeps writing while the readers are open.
  recycle::ActivationStore::Batch batch(*writer);
  recycle::StoreTestAccess::put_record(batch, key_of(5), record_of(5));
  ASSERT_OK(recycle::StoreTestAccess::write(*writer, &batch));
  std::string value;
  ASSERT_OK(writer->get_record(key_of(5), &value));
  EXPECT_EQ(value, record_of(5));

  // A second writer on the same directory is refused while the first holds it.
  std::unique_ptr<recycle::ActivationStore> second;
  const recycle::Status st = recycle::ActivationStore::open(dir, {}, &second);
  EXPECT_FALSE(st.ok());
  EXPECT_FALSE(st.is_not_found()) << st.to_string();
  EXPECT_EQ(second, nullptr);
}

TEST(ActivationStore, WritingThroughAReadOnlyStoreFails) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  {
    auto writer = open_store(dir);
    ASSERT_NE(writer, nullptr);
    write_sample_cache(writer.get(), 2);
  }
  auto reader = open_store(dir, /*read_only=*/true);
  ASSERT_NE(reader, nullptr);
  recycle::ActivationStore::Batch batch(*reader);
  recycle::StoreTestAccess::put_record(batch, key_of(7), "x");
  recycle::StoreTestAccess::put_index(batch, "train", 2, {key_of(7), 0});
  recycle::StoreTestAccess::truncate_index(batch, "train", 0);
  recycle::StoreTestAccess::put_manifest(batch, manifest_of("other"));
  recycle::StoreTestAccess::put_blob(batch, "head", "y");
  const recycle::Status st = recycle::StoreTestAccess::write(*reader, &batch);
  EXPECT_TRUE(st.is_invalid_argument()) << st.to_string();
  std::string value;
  EXPECT_TRUE(reader->get_record(key_of(7), &value).is_not_found());
  EXPECT_EQ(read_index(*reader, "train"), entries(0, 2));
  recycle::Manifest m;
  ASSERT_OK(reader->read_manifest(&m));
  EXPECT_EQ(m.model, "resnet18");
  reader.reset();
  auto again = open_store(dir);
  ASSERT_NE(again, nullptr);
  EXPECT_TRUE(again->get_record(key_of(7), &value).is_not_found());
}

TEST(ActivationStore, BatchOfAnotherStoreIsRefused) {
  TempDir tmp;
  auto a = open_store(tmp.file("a"));
  auto b = open_store(tmp.file("b"));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  recycle::ActivationStore::Batch batch(*a);
  recycle::StoreTestAccess::put_record(batch, key_of(1), "x");
  EXPECT_TRUE(recycle::StoreTestAccess::write(*b, &batch).is_invalid_argument());
  std::string value;
  EXPECT_TRUE(b->get_record(key_of(1), &value).is_not_found());
  EXPECT_TRUE(a->get_record(key_of(1), &value).is_not_found());
}

TEST(ActivationStore, ForEachRecordVisitsAllInKeyOrder) {
  TempDir tmp;
  auto store = open_store(tmp.file("cache"));
  ASSERT_NE(store, nullptr);
  std::mt19937_64 rng(41);
  std::vector<recycle::Key> keys;
  for (int i = 0; i < 200; ++i) {
    // Some keys share hi and differ in lo; high bits set so byte order is unsigned.
    const uint64_t hi = i % 4 == 0 ? 0xFFFFFFFFFFFFFF00ULL : rng();
    keys.push_back({hi, rng()});
  }
  // Written in two batches, one flushed, so the iterator merges SST files and memtable.
  for (int half = 0; half < 2; ++half) {
    recycle::ActivationStore::Batch batch(*store);
    for (size_t i = half; i < keys.size(); i += 2)
      recycle::StoreTestAccess::put_record(batch, keys[i], keys[i].to_hex());
    ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
    if (half == 0) ASSERT_OK(store->flush());
  }
  std::vector<recycle::Key> visited;
  ASSERT_OK(store->for_each_record([&](const recycle::Key& k, std::string_view bytes) {
    EXPECT_EQ(bytes, k.to_hex());
    visited.push_back(k);
    return true;
  }));
  std::vector<recycle::Key> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(visited, sorted);

  // Stops when fn returns false.
  visited.clear();
  ASSERT_OK(store->for_each_record([&](const recycle::Key& k, std::string_view) {
    visited.push_back(k);
    return visited.size() < 3;
  }));
  EXPECT_EQ(visited, std::vector<recycle::Key>(sorted.begin(), sorted.begin() + 3));

  // An empty cache visits nothing.
  auto empty = open_store(tmp.file("empty"));
  ASSERT_NE(empty, nullptr);
  int calls = 0;
  ASSERT_OK(empty->for_each_record([&](const recycle::Key&, std::string_view) {
    ++calls;
    return true;
  }));
  EXPECT_EQ(calls, 0);
}

TEST(ActivationStore, VerifyFilesIsOkOnAGoodCache) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  auto store = open_store(dir);
  ASSERT_NE(store, nullptr);
  EXPECT_OK(store->verify_files());
  write_sample_cache(store.get(), 50);
  ASSERT_OK(store->flush());
  EXPECT_OK(store->verify_files());
  EXPECT_GT(store->disk_bytes(), 0u);
  store.reset();
  auto reader = open_store(dir, /*read_only=*/true);
  ASSERT_NE(reader, nullptr);
  EXPECT_OK(reader->verify_files());
  EXPECT_OK(reader->flush());  // a no-op for readers
}

TEST(ActivationStore, DestroyRemovesACache) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  {
    auto store = open_store(dir);
    ASSERT_NE(store, nullptr);
    write_sample_cache(store.get(), 10);
    ASSERT_OK(store->flush());
  }
  ASSERT_OK(recycle::ActivationStore::destroy(dir));
  EXPECT_FALSE(fs::exists(dir));
  recycle::StoreOptions options;
  options.read_only = true;
  std::unique_ptr<recycle::ActivationStore> store;
  EXPECT_TRUE(recycle::ActivationStore::open(dir, options, &store).is_not_found());
  // Destroying what is not there, or an empty directory, is fine.
  EXPECT_OK(recycle::ActivationStore::destroy(dir));
  fs::create_directories(tmp.file("empty"));
  EXPECT_OK(recycle::ActivationStore::destroy(tmp.file("empty")));
  // A fresh cache in the same place starts empty.
  auto fresh = open_store(dir);
  ASSERT_NE(fresh, nullptr);
  std::string value;
  EXPECT_TRUE(fresh->get_record(key_of(0), &value).is_not_found());
  recycle::Manifest m;
  EXPECT_TRUE(fresh->read_manifest(&m).is_not_found());
}

TEST(ActivationStore, DestroyRefusesADirectoryThatIsNotACache) {
  TempDir tmp;
  const std::string dir = tmp.file("precious");
  fs::create_directories(dir);
  recycle::testing::write_file(dir + "/notes.txt", "keep me");
  const recycle::Status st = recycle::ActivationStore::destroy(dir);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(st.is_invalid_argument()) << st.to_string();
  EXPECT_EQ(recycle::testing::read_file(dir + "/notes.txt"), "keep me");
}

// check_destroy: a cache of many writer sessions, blob records and flushes may be deleted whole;
// anything else in its directory (a user's file, a file named like RocksDB's that the database
// does not list, a directory) is named, and destroy then deletes nothing.
TEST(ActivationStore, CheckDestroyNamesWhatIsNotTheCaches) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  for (int session = 0; session < 4; ++session) {
    auto store = open_store(dir);
    ASSERT_NE(store, nullptr);
    write_sample_cache(store.get(), 10);
    recycle::ActivationStore::Batch big(*store);
    for (int i = 0; i < 8; ++i) {
      recycle::StoreTestAccess::put_record(big, key_of(1000 + 10 * session + i),
                                           std::string(40 << 10, char('a' + i)));
    }
    ASSERT_OK(recycle::StoreTestAccess::write(*store, &big));
    ASSERT_OK(store->flush());
  }
  bool blobs = false;
  for (const auto& e : fs::directory_iterator(dir)) blobs = blobs || e.path().extension() == ".blob";
  ASSERT_TRUE(blobs) << "records of 40 KB go to blob files";
  EXPECT_OK(recycle::ActivationStore::check_destroy(dir));
  for (const std::string name : {"notes.txt", "000999.log", "LOG.old.42", "999999.sst"}) {
    recycle::testing::write_file(dir + "/" + name, "mine");
    const recycle::Status st = recycle::ActivationStore::check_destroy(dir);
    EXPECT_TRUE(st.is_invalid_argument()) << name << ": " << st.to_string();
    EXPECT_NE(st.message().find("also holds " + name), std::string::npos) << st.to_string();
    EXPECT_TRUE(recycle::ActivationStore::destroy(dir).is_invalid_argument());
    EXPECT_EQ(recycle::testing::read_file(dir + "/" + name), "mine");
    fs::remove(dir + "/" + name);
  }
  fs::create_directories(dir + "/000001.sst");  // a directory named like a table file
  EXPECT_TRUE(recycle::ActivationStore::check_destroy(dir).is_invalid_argument());
  fs::remove(dir + "/000001.sst");
  ASSERT_OK(recycle::ActivationStore::destroy(dir));
  EXPECT_FALSE(fs::exists(dir));
}

// A cache whose CURRENT file was emptied (a copy that lost its files' contents) is named
// damaged in the store's words, not RocksDB's; --rebuild may still delete it.
TEST(ActivationStore, AnEmptiedCurrentFileIsNamed) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  {
    auto store = open_store(dir);
    ASSERT_NE(store, nullptr);
    write_sample_cache(store.get(), 3);
  }
  recycle::testing::write_file(dir + "/CURRENT", "");
  recycle::StoreOptions options;
  options.read_only = true;
  std::unique_ptr<recycle::ActivationStore> store;
  const recycle::Status st = recycle::ActivationStore::open(dir, options, &store);
  EXPECT_TRUE(st.is_corruption()) << st.to_string();
  EXPECT_NE(st.message().find("is damaged: its CURRENT file is empty or cut"), std::string::npos)
      << st.to_string();
  EXPECT_OK(recycle::ActivationStore::destroy(dir));
  EXPECT_FALSE(fs::exists(dir));
}

// A directory holding a log of the user's ("build.log") is no cache, not a damaged one; a
// numbered write-ahead log without its CURRENT is a damaged one.
TEST(ActivationStore, AUsersLogFileIsNotADamagedCache) {
  TempDir tmp;
  const std::string dir = tmp.file("logs");
  fs::create_directories(dir);
  recycle::testing::write_file(dir + "/build.log", "mine");
  recycle::StoreOptions options;
  options.read_only = true;
  std::unique_ptr<recycle::ActivationStore> store;
  recycle::Status st = recycle::ActivationStore::open(dir, options, &store);
  EXPECT_TRUE(st.is_not_found()) << st.to_string();
  recycle::testing::write_file(dir + "/000004.log", "");
  st = recycle::ActivationStore::open(dir, options, &store);
  EXPECT_TRUE(st.is_corruption()) << st.to_string();
}

TEST(ActivationStore, CheckSplitName) {
  for (const std::string name : {"train", "test-2", "a.b_c", "A", "0", "x-y.z_W9"}) {
    EXPECT_OK(recycle::ActivationStore::check_split_name(name));
  }
  EXPECT_OK(recycle::ActivationStore::check_split_name(std::string(64, 'a')));
  for (const std::string& name :
       {std::string(), std::string("a/b"), std::string("a b"), std::string(65, 'a'),
        std::string("a\0b", 3), std::string("tr\xC3\xA4in"), std::string("a:b"),
        std::string("train\n")}) {
    const recycle::Status st = recycle::ActivationStore::check_split_name(name);
    EXPECT_TRUE(st.is_invalid_argument()) << "'" << name << "': " << st.to_string();
  }
}

TEST(ActivationStore, NegativePositionsAreRejectedOrClamped) {
  recycle::testing::TempDir tmp;
  std::unique_ptr<recycle::ActivationStore> s;
  ASSERT_OK(recycle::ActivationStore::open(tmp.file("c"), {}, &s));
  recycle::ActivationStore::Batch b(*s);
  for (int i = 0; i < 3; ++i)
    recycle::StoreTestAccess::put_index(b, "train", i, {recycle::Key{1, 2}, 0});
  EXPECT_THROW(recycle::StoreTestAccess::put_index(b, "train", -1, {recycle::Key{1, 2}, 0}),
               std::invalid_argument);
  ASSERT_OK(recycle::StoreTestAccess::write(*s, &b));
  recycle::ActivationStore::Batch t(*s);
  recycle::StoreTestAccess::truncate_index(t, "train", -1);
  ASSERT_OK(recycle::StoreTestAccess::write(*s, &t));
  std::vector<recycle::IndexEntry> out;
  ASSERT_OK(s->read_index("train", &out));
  EXPECT_EQ(out.size(), 0u);
}
