// Tests for record files (cache/activation_store.h: RecordFileWriter, ingest_records,
// staging_dir): files of records made outside the writer and ingested in one step, the
// manifest's counts across an ingest that failed or was cut short, and the staging area.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cache/activation_store.h"
#include "cache/cache_dir.h"
#include "cache/manifest.h"
#include "recycle/key.h"
#include "recycle/options.h"  // parse_compression
#include "tests/cache/open_store.h"
#include "tests/cache/store_test_access.h"
#include "tests/test_util.h"

namespace {

using recycle::testing::open_store;

namespace fs = std::filesystem;
using recycle::ActivationStore;
using recycle::Key;
using recycle::Manifest;
using recycle::RecordFileWriter;
using recycle::testing::TempDir;

// Keys spread over the whole key space, so that files and the store's own records overlap.
Key key_of(uint64_t i) { return {i * 0x9E3779B97F4A7C15ULL, ~i}; }
std::string record_of(uint64_t i) {
  return "rec" + std::to_string(i) + std::string(static_cast<size_t>(40 + i % 50), 'x');
}

Manifest manifest_with(int64_t records, int64_t bytes) {
  Manifest m;
  m.model = "resnet18:width=4,in_channels=1";
  m.fingerprint = "00112233445566778899aabbccddeeff";
  m.split_at = "layer1.1";
  m.prefix_blocks = 2;
  m.total_blocks = 8;
  m.keyer = "xxh3";
  m.codec = recycle::Codec::kFp16;
  m.preprocess = "none";
  m.record_shapes = {{4, 7, 7}};
  m.records = records;
  m.record_bytes = bytes;
  return m;
}

// A store holding records 0..n-1 (written in a batch) and a manifest that counts them.
Manifest write_records(ActivationStore* store, int n) {
  ActivationStore::Batch batch(*store);
  for (int i = 0; i < n; ++i) recycle::StoreTestAccess::put_record(batch, key_of(i), record_of(i));
  Manifest m = manifest_with(n, static_cast<int64_t>(batch.record_bytes()));
  recycle::StoreTestAccess::put_manifest(batch, m);
  EXPECT_OK(recycle::StoreTestAccess::write(*store, &batch));
  return m;
}

// Writes records of `ids` into a file at path (sorted by key first); returns their bytes.
int64_t write_file_of(const std::string& path, std::vector<uint64_t> ids) {
  std::sort(ids.begin(), ids.end(), [](uint64_t a, uint64_t b) { return key_of(a) < key_of(b); });
  std::unique_ptr<RecordFileWriter> w;
  EXPECT_OK(RecordFileWriter::open(path, recycle::StoreOptions(), &w));
  if (!w) return 0;
  int64_t bytes = 0;
  for (uint64_t i : ids) {
    EXPECT_OK(w->add(key_of(i), record_of(i)));
    bytes += static_cast<int64_t>(record_of(i).size());
  }
  EXPECT_EQ(w->records(), static_cast<int64_t>(ids.size()));
  EXPECT_EQ(w->record_bytes(), bytes);
  EXPECT_OK(w->finish());
  return bytes;
}

std::map<std::string, std::string> all_records(const ActivationStore& store) {
  std::map<std::string, std::string> out;
  EXPECT_OK(store.for_each_record([&](const Key& k, std::string_view v) {
    out[k.to_hex()] = std::string(v);
    return true;
  }));
  return out;
}

std::vector<uint64_t> range(uint64_t from, uint64_t to, uint64_t step = 1) {
  std::vector<uint64_t> v;
  for (uint64_t i = from; i < to; i += step) v.push_back(i);
  return v;
}

}  // namespace

TEST(RecordFiles, IngestedFilesJoinTheStoreAndTheManifestCountsThem) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  auto store = open_store(dir);
  ASSERT_NE(store, nullptr);
  Manifest m = write_records(store.get(), 100);
  const int64_t before_bytes = m.record_bytes;

  // Two files from two "ranks": interleaved ids, so their key ranges overlap each other and
  // the stored records'.
  const fs::path staging = store->staging_dir();
  EXPECT_EQ(staging, fs::path(dir) / recycle::kStagingDirName);
  fs::create_directories(staging / "run");
  const std::string f0 = (staging / "run" / "r0.sst").string();
  const std::string f1 = (staging / "run" / "r1.sst").string();
  const int64_t b0 = write_file_of(f0, range(100, 400, 2));
  const int64_t b1 = write_file_of(f1, range(101, 400, 2));
  ASSERT_OK(store->ingest_records({f0, f1}, &m));
  EXPECT_EQ(m.records, 400);
  EXPECT_EQ(m.record_bytes, before_bytes + b0 + b1);
  EXPECT_FALSE(fs::exists(f0));  // moved into the cache
  EXPECT_FALSE(fs::exists(f1));

  Manifest stored;
  ASSERT_OK(store->read_manifest(&stored));
  EXPECT_EQ(stored.records, 400);
  EXPECT_EQ(stored.record_bytes, m.record_bytes);
  for (uint64_t i : {0u, 99u, 100u, 101u, 255u, 399u}) {
    std::string got;
    ASSERT_OK(store->get_record(key_of(i), &got));
    EXPECT_EQ(got, record_of(i)) << i;
  }
  ASSERT_OK(store->verify_files());
  store.reset();

  // After reopening, read-only and as a writer, with everything in key order.
  auto reader = open_store(dir, /*read_only=*/true);
  ASSERT_NE(reader, nullptr);
  const auto recs = all_records(*reader);
  ASSERT_EQ(recs.size(), 400u);
  for (uint64_t i = 0; i < 400; ++i) EXPECT_EQ(recs.at(key_of(i).to_hex()), record_of(i)) << i;
  ASSERT_OK(reader->verify_files());
  reader.reset();
  auto writer = open_store(dir);
  ASSERT_NE(writer, nullptr);
  ASSERT_OK(writer->compact_records());
  EXPECT_EQ(all_records(*writer).size(), 400u);
}

TEST(RecordFiles, FilesUseTheStoresCompression) {
  TempDir tmp;
  // Very compressible records: an LZ4 file is much smaller than the bytes; "none" is not.
  auto size_with = [&](const std::string& compression) {
    const std::string path = tmp.file("f-" + compression + ".sst");
    recycle::StoreOptions o;
    o.compression = recycle::parse_compression(compression);
    std::unique_ptr<RecordFileWriter> w;
    EXPECT_OK(RecordFileWriter::open(path, o, &w));
    for (uint64_t i = 0; i < 200; ++i) EXPECT_OK(w->add(Key{0, i}, std::string(4000, 'a')));
    EXPECT_OK(w->finish());
    return fs::file_size(path);
  };
  EXPECT_LT(size_with("lz4") * 10, size_with("none"));
}

TEST(RecordFiles, KeysOutOfOrderAndEmptyFilesAreRefused) {
  TempDir tmp;
  const std::string path = tmp.file("a.sst");
  {
    std::unique_ptr<RecordFileWriter> w;
    ASSERT_OK(RecordFileWriter::open(path, recycle::StoreOptions(), &w));
    ASSERT_OK(w->add(Key{0, 5}, "five"));
    EXPECT_TRUE(w->add(Key{0, 5}, "again").is_invalid_argument());
    EXPECT_TRUE(w->add(Key{0, 4}, "four").is_invalid_argument());
    ASSERT_OK(w->add(Key{1, 0}, "next"));
    EXPECT_EQ(w->records(), 2);
    EXPECT_TRUE(fs::exists(path));
  }  // not finished: the file goes
  EXPECT_FALSE(fs::exists(path));
  std::unique_ptr<RecordFileWriter> w;
  ASSERT_OK(RecordFileWriter::open(path, recycle::StoreOptions(), &w));
  EXPECT_TRUE(w->finish().is_invalid_argument());
  std::unique_ptr<RecordFileWriter> nowhere;
  EXPECT_FALSE(
      RecordFileWriter::open(tmp.file("no/such/dir/a.sst"), recycle::StoreOptions(), &nowhere)
          .ok());
}

TEST(RecordFiles, AFailedIngestKeepsTheCountsAndTheFiles) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  auto store = open_store(dir);
  ASSERT_NE(store, nullptr);
  Manifest m = write_records(store.get(), 50);
  const Manifest before = m;
  fs::create_directories(store->staging_dir());
  const std::string good = (fs::path(store->staging_dir()) / "good.sst").string();
  const std::string bad = (fs::path(store->staging_dir()) / "bad.sst").string();
  write_file_of(good, range(50, 80));
  write_file_of(bad, range(80, 200));
  // Damage a data block of the second file (its first bytes): the checksum check refuses it.
  {
    std::string bytes = recycle::testing::read_file(bad);
    ASSERT_GT(bytes.size(), 200u);
    for (size_t i = 20; i < 120; ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0x5A);
    recycle::testing::write_file(bad, bytes);
  }
  const recycle::Status st = store->ingest_records({good, bad}, &m);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(m.records, before.records);
  Manifest stored;
  ASSERT_OK(store->read_manifest(&stored));
  EXPECT_EQ(stored.records, 50);
  EXPECT_EQ(stored.record_bytes, before.record_bytes);
  EXPECT_TRUE(fs::exists(good));
  std::string got;
  EXPECT_TRUE(store->get_record(key_of(60), &got).is_not_found());  // all or nothing
  EXPECT_EQ(all_records(*store).size(), 50u);
  // The good file alone goes in.
  ASSERT_OK(store->ingest_records({good}, &m));
  EXPECT_EQ(m.records, 80);
  ASSERT_OK(store->read_manifest(&stored));
  EXPECT_EQ(stored.records, 80);
  EXPECT_EQ(all_records(*store).size(), 80u);
}

// The state a writer killed between the manifest write and the ingest leaves (made here with
// RocksDB directly), and the one a writer killed after the ingest but before dropping its note
// leaves: the next writer's open settles both.
TEST(RecordFiles, TheNextWriterSettlesAnIngestCutShort) {
  for (const bool ingested : {false, true}) {
    SCOPED_TRACE(ingested ? "records ingested" : "records not ingested");
    TempDir tmp;
    const std::string dir = tmp.file("cache");
    {
      auto store = open_store(dir);
      ASSERT_NE(store, nullptr);
      write_records(store.get(), ingested ? 20 : 10);  // 10..19 stand for the ingested ones
    }
    {
      rocksdb::DB* raw = nullptr;
      std::vector<rocksdb::ColumnFamilyHandle*> handles;
      std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
          {rocksdb::kDefaultColumnFamilyName, {}}, {"records", {}}, {"samples", {}}};
      ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), dir, cfs, &handles, &raw).ok());
      Manifest ahead = manifest_with(20, 999);
      ASSERT_TRUE(raw->Put({}, handles[0], "manifest", ahead.to_json_string()).ok());
      const std::string note =
          "{\"records\":10,\"record_bytes\":300,\"probe\":\"" + key_of(15).to_hex() + "\"}";
      ASSERT_TRUE(raw->Put({}, handles[0], "pending-ingest", note).ok());
      for (auto* h : handles) raw->DestroyColumnFamilyHandle(h);
      delete raw;
    }
    // Leftovers of a dead build in the staging area.
    fs::create_directories(fs::path(dir) / recycle::kStagingDirName / "old-run");
    recycle::testing::write_file(
        (fs::path(dir) / recycle::kStagingDirName / "old-run" / "r1-0.sst").string(), "junk");

    auto reader = open_store(dir, /*read_only=*/true);  // readers change nothing...
    ASSERT_NE(reader, nullptr);
    Manifest seen;
    ASSERT_OK(reader->read_manifest(&seen));  // ...but see the counts the records allow
    EXPECT_EQ(seen.records, ingested ? 20 : 10);
    EXPECT_EQ(seen.record_bytes, ingested ? 999 : 699);
    reader.reset();
    EXPECT_TRUE(fs::exists(fs::path(dir) / recycle::kStagingDirName / "old-run"));

    auto store = open_store(dir);
    ASSERT_NE(store, nullptr);
    Manifest m;
    ASSERT_OK(store->read_manifest(&m));
    EXPECT_EQ(m.records, ingested ? 20 : 10);
    EXPECT_EQ(m.record_bytes, ingested ? 999 : 699);
    EXPECT_FALSE(fs::exists(fs::path(dir) / recycle::kStagingDirName));
    store.reset();
    // Settled once: a second open changes nothing.
    store = open_store(dir);
    ASSERT_NE(store, nullptr);
    ASSERT_OK(store->read_manifest(&m));
    EXPECT_EQ(m.records, ingested ? 20 : 10);
  }
}

TEST(RecordFiles, DestroyRemovesTheStagingArea) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  {
    auto store = open_store(dir);
    ASSERT_NE(store, nullptr);
    write_records(store.get(), 5);
    fs::create_directories(fs::path(store->staging_dir()) / "run");
    write_file_of((fs::path(store->staging_dir()) / "run" / "a.sst").string(), range(5, 9));
  }
  ASSERT_OK(ActivationStore::destroy(dir));
  EXPECT_FALSE(fs::exists(dir));
}
