// Tests for recycle-inspect --verify's checks (inspect_cache, cache/verify.cc) on caches made
// here with ActivationStore: an fp32 or fp16 record holding an infinity or a NaN is corrupt,
// and a damaged records file is counted in `corrupt`, as many as the problems say could not be
// read.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cache/activation_store.h"
#include "cache/codec.h"
#include "cache/damaged_records.h"
#include "cache/manifest.h"
#include "cache/record.h"
#include "recycle/cache.h"
#include "recycle/key.h"
#include "tests/cache/store_test_access.h"
#include "tests/test_util.h"

namespace {

namespace fs = std::filesystem;
using recycle::ActivationStore;
using recycle::Codec;
using recycle::IndexEntry;
using recycle::Key;
using recycle::Manifest;
using recycle::testing::TempDir;

constexpr int64_t kChannels = 4, kSide = 7, kValues = kChannels * kSide * kSide;

Key key_of(uint64_t i) { return {i * 0x9E3779B97F4A7C15ULL, ~i}; }

std::vector<float> values_of(uint64_t i) {
  std::vector<float> v(kValues);
  for (int64_t j = 0; j < kValues; ++j) {
    v[j] = std::sin(0.37f * static_cast<float>(i * kValues + j));
  }
  return v;
}

std::string record_of(Codec codec, uint64_t i) {
  const std::vector<float> v = values_of(i);
  return recycle::encode_record(codec,
                                {recycle::FloatArrayRef{v.data(), {kChannels, kSide, kSide}}});
}

// The record's checksum made right again after its bytes were changed.
std::string reseal(std::string record) {
  const size_t body = record.size() - 8;
  const uint64_t sum = XXH3_64bits(record.data(), body);
  for (int i = 0; i < 8; ++i) record[body + i] = static_cast<char>((sum >> (8 * i)) & 0xFF);
  return record;
}

// A cache of n records of `codec` in split "test" (record i at position i), flushed to files;
// `patch` may change record bytes before they are written.
void make_cache(const std::string& dir, Codec codec, int n,
                const std::function<std::string(int, std::string)>& patch = nullptr) {
  std::unique_ptr<ActivationStore> store;
  ASSERT_TRUE(ActivationStore::open(dir, recycle::StoreOptions(), &store).ok());
  ActivationStore::Batch batch(*store);
  for (int i = 0; i < n; ++i) {
    std::string r = record_of(codec, i);
    if (patch) r = patch(i, std::move(r));
    recycle::StoreTestAccess::put_record(batch, key_of(i), r);
    recycle::StoreTestAccess::put_index(batch, "test", i, IndexEntry{key_of(i), i % 2});
  }
  Manifest m;
  m.model = "resnet18:width=4,in_channels=1";
  m.fingerprint = "00112233445566778899aabbccddeeff";
  m.split_at = "layer1.1";
  m.prefix_blocks = 2;
  m.total_blocks = 8;
  m.keyer = "xxh3";
  m.codec = codec;
  m.preprocess = "none";
  m.record_shapes = {{kChannels, kSide, kSide}};
  m.class_names = {"a", "b"};
  m.records = n;
  m.record_bytes = static_cast<int64_t>(batch.record_bytes());
  recycle::SplitInfo info;
  info.samples = n;
  info.unique = n;
  info.complete = true;
  info.data = "test data";
  m.splits["test"] = info;
  recycle::StoreTestAccess::put_manifest(batch, m);
  ASSERT_TRUE(recycle::StoreTestAccess::write(*store, &batch).ok());
  ASSERT_TRUE(store->flush().ok());
}

TEST(Verify, AGoodCacheVerifies) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  make_cache(dir, Codec::kFp16, 20);
  const recycle::InspectReport r = recycle::inspect_cache(dir, true);
  EXPECT_TRUE(r.ok()) << r.to_text();
  EXPECT_EQ(r.checked, 20);
  EXPECT_EQ(r.corrupt, 0);
}

// Verifies the 10-record cache `dir` that holds two bad records: the two problems, one a line.
std::string two_problems(const std::string& dir) {
  const recycle::InspectReport r = recycle::inspect_cache(dir, true);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.checked, 10);
  EXPECT_EQ(r.corrupt, 2) << r.to_text();
  if (r.problems.size() != 2u) {
    ADD_FAILURE() << "expected 2 problems: " << r.to_text();
    return "";
  }
  return r.problems[0] + "\n" + r.problems[1];
}

// fp16 records holding an infinity or a NaN (what the build wrote for values beyond 65504
// before it refused them) are corrupt: training on them gives a NaN loss.
TEST(Verify, Fp16RecordsHoldingInfinityOrNaNAreCorrupt) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  const size_t payload = 8 + 4 + 4 * 3;  // record prefix, tensor header with three dims
  make_cache(dir, Codec::kFp16, 10, [&](int i, std::string r) {
    if (i == 3) r[payload + 2 * 5 + 1] = static_cast<char>(0x7C), r[payload + 2 * 5] = 0;  // +inf
    if (i == 7) r[payload + 1] = static_cast<char>(0xFE), r[payload] = 1;                  // NaN
    return i == 3 || i == 7 ? reseal(std::move(r)) : r;
  });
  const std::string all = two_problems(dir);
  EXPECT_NE(all.find("fp16 value 5 of 196 is inf"), std::string::npos) << all;
  EXPECT_NE(all.find("fp16 value 0 of 196 is NaN"), std::string::npos) << all;
}

// fp32 records holding a NaN or an infinity (what recycle-build, recycle.build and predict's
// --write-back stored before every codec refused them: issue 54), written here straight into the
// store (the codec refuses to make them now), are corrupt, each named with what to do.
TEST(Verify, Fp32RecordsHoldingInfinityOrNaNAreCorrupt) {
  TempDir tmp;
  const std::string dir = tmp.file("cache");
  const size_t payload = 8 + 4 + 4 * 3;  // record prefix, tensor header with three dims
  auto put = [](std::string* r, size_t at, uint32_t bits) {
    for (int b = 0; b < 4; ++b) (*r)[at + b] = static_cast<char>((bits >> (8 * b)) & 0xFF);
  };
  make_cache(dir, Codec::kFp32, 10, [&](int i, std::string r) {
    if (i == 2) put(&r, payload + 4 * 10, 0x7FC00000u);             // NaN
    if (i == 6) put(&r, payload + 4 * (kValues - 1), 0xFF800000u);  // -inf, the last value
    return i == 2 || i == 6 ? reseal(std::move(r)) : r;
  });
  const std::string all = two_problems(dir);
  EXPECT_NE(all.find("record " + key_of(2).to_hex() + ": "), std::string::npos) << all;
  EXPECT_NE(all.find("record " + key_of(6).to_hex() + ": "), std::string::npos) << all;
  EXPECT_NE(all.find("fp32 value 10 of 196 is NaN"), std::string::npos) << all;
  EXPECT_NE(all.find("fp32 value 195 of 196 is -inf"), std::string::npos) << all;
  EXPECT_NE(all.find("rebuild the cache"), std::string::npos) << all;
  // The same cache without those two records verifies: the check finds nothing in finite ones.
  TempDir tmp2;
  make_cache(tmp2.file("cache"), Codec::kFp32, 10);
  EXPECT_TRUE(recycle::inspect_cache(tmp2.file("cache"), true).ok());
}

// A flipped byte in the records' table file: reading stops at the damaged block, and the
// records it could not read are counted as corrupt, so the count agrees with the problems.
TEST(Verify, AFlippedByteInARecordsFileIsCountedAsCorrupt) {
  for (Codec codec : {Codec::kInt8, Codec::kFp16}) {
    TempDir tmp;
    const std::string dir = tmp.file("cache");
    make_cache(dir, codec, 200);
    // The largest table file holds the records; flip a byte in its first half (data blocks).
    fs::path largest;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".sst" &&
          (largest.empty() || fs::file_size(e.path()) > fs::file_size(largest))) {
        largest = e.path();
      }
    }
    ASSERT_FALSE(largest.empty());
    {
      std::fstream f(largest, std::ios::in | std::ios::out | std::ios::binary);
      const std::streamoff at = static_cast<std::streamoff>(fs::file_size(largest) / 3);
      f.seekg(at);
      char c = 0;
      f.read(&c, 1);
      c = static_cast<char>(c ^ 0x55);
      f.seekp(at);
      f.write(&c, 1);
    }
    const recycle::InspectReport r = recycle::inspect_cache(dir, true);
    const std::string name = recycle::codec_name(codec);
    EXPECT_FALSE(r.ok()) << name;
    EXPECT_GT(r.corrupt, 0) << name << "\n" << r.to_text();
    // Every record is read (those after the damage one by one): the damaged block's records
    // are corrupt, the others not.
    EXPECT_EQ(r.checked, 200) << r.to_text();
    EXPECT_LT(r.corrupt, 200) << r.to_text();
    EXPECT_NE(r.to_json().find("\"corrupt\":" + std::to_string(r.corrupt)), std::string::npos);
    // The file check saw the same damage: one damaged file, counted apart from the records.
    EXPECT_EQ(r.damaged_files, 1) << r.to_text();
    EXPECT_NE(r.to_json().find("\"damaged_files\":1"), std::string::npos) << r.to_json();
  }
}

// The damaged-records list: written sorted and read back, taken off key by key, gone when empty;
// a file that is not such a list (other text, a link out of the cache) is refused in one line.
TEST(DamagedRecords, ListWrittenReadAndTakenOff) {
  TempDir tmp;
  const std::string dir = tmp.path();
  const std::string list = tmp.file(recycle::kDamagedRecordsName);
  recycle::KeySet keys;
  ASSERT_OK(recycle::read_damaged_records(dir, &keys));
  EXPECT_TRUE(keys.empty());
  ASSERT_OK(recycle::write_damaged_records(dir, {key_of(3), key_of(1), key_of(3)}));
  EXPECT_EQ(recycle::testing::read_file(list),
            "recycle damaged records 1\n" + std::min(key_of(1), key_of(3)).to_hex() + "\n" +
                std::max(key_of(1), key_of(3)).to_hex() + "\n");
  ASSERT_OK(recycle::read_damaged_records(dir, &keys));
  EXPECT_EQ(keys, (recycle::KeySet{key_of(1), key_of(3)}));
  ASSERT_OK(recycle::forget_damaged_records(dir, {key_of(3), key_of(7)}));
  ASSERT_OK(recycle::read_damaged_records(dir, &keys));
  EXPECT_EQ(keys, (recycle::KeySet{key_of(1)}));
  ASSERT_OK(recycle::forget_damaged_records(dir, {key_of(1)}));
  EXPECT_FALSE(fs::exists(list));

  recycle::testing::write_file(list, "recycle damaged records 1\nnot a key\n");
  recycle::Status st = recycle::read_damaged_records(dir, &keys);
  EXPECT_TRUE(st.is_corruption()) << st.to_string();
  EXPECT_NE(st.to_string().find("line 2 is not a record's key"), std::string::npos) << st.to_string();
  fs::remove(list);
  fs::create_symlink("/etc/passwd", list);
  st = recycle::read_damaged_records(dir, &keys);
  EXPECT_NE(st.to_string().find("a symbolic link"), std::string::npos) << st.to_string();
  fs::remove(list);
  ASSERT_EQ(::mkfifo(list.c_str(), 0600), 0);  // not waited on
  st = recycle::read_damaged_records(dir, &keys);
  EXPECT_NE(st.to_string().find("not a regular file"), std::string::npos) << st.to_string();
  fs::remove(list);
  recycle::testing::write_file(list, "");  // empty (cut by a crash): refused, saying what to do
  st = recycle::read_damaged_records(dir, &keys);
  EXPECT_NE(st.to_string().find("delete it and run recycle-inspect --verify again"),
            std::string::npos) << st.to_string();
  fs::remove(list);
  fs::create_symlink("/etc/passwd", list);
  // Written anew through no link: the link is replaced, its target untouched.
  ASSERT_OK(recycle::write_damaged_records(dir, {key_of(2)}));
  EXPECT_FALSE(fs::is_symlink(list));
  ASSERT_OK(recycle::read_damaged_records(dir, &keys));
  EXPECT_EQ(keys, (recycle::KeySet{key_of(2)}));
}

}  // namespace

// A class name (a folder, a CSV label) holding a newline or another control character prints
// escaped: the text report keeps one line per field.
TEST(Verify, ControlCharactersInNamesPrintEscaped) {
  recycle::InspectReport r;
  r.cache_dir = "c";
  r.manifest.class_names = {"cat\ndog", "b\x01z"};
  recycle::SplitInfo info;
  info.data = "imagefolder:x\ry";
  r.manifest.splits["train"] = info;
  const std::string text = r.to_text();
  EXPECT_NE(text.find("0=cat\\ndog 1=b\\x01z\n"), std::string::npos) << text;
  EXPECT_NE(text.find("(imagefolder:x\\ry)"), std::string::npos) << text;
  EXPECT_EQ(text.find("cat\ndog"), std::string::npos) << text;
}
