// Regression tests of the cache's safety: torn reads refused, shapes in the identity, nothing
// outside a cache deleted, symbolic links, lost output, silent surprises, messages and exit
// codes, orphan records. Each test says what it guards.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <sys/stat.h>
#include <unistd.h>
#include <torch/torch.h>
#include <xxhash.h>

#include <cstring>
#include <filesystem>

#include "cache/activation_store.h"
#include "cache/cache_dir.h"
#include "cache/record.h"
#include "engine/models/block_model.h"
#include "engine/train/batch_sources.h"
#include "engine/train/trainer.h"
#include "tests/cache/store_test_access.h"
#include "tests/tool_runner.h"

namespace {

namespace fs = std::filesystem;
using recycle::ActivationStore;
using recycle::Manifest;
using recycle::testing::count_lines;
using recycle::testing::describe;
using recycle::testing::have_fashion_mnist;
using recycle::testing::TempDir;
using recycle::testing::ToolRun;

ToolRun run(const TempDir& dir, const std::string& tool, const std::string& args) {
  return recycle::testing::run_tool(dir, tool, args);
}

// A small cache of the test split (width-4 model, so it is quick).
std::string small_build(const std::string& cache, int limit = 100,
                        const std::string& split = "test") {
  return "--data fashion-mnist --split " + split + " --limit " + std::to_string(limit) +
         " --width 4 --recycle 0.5 --cache " + cache;
}

void expect_verifies(const TempDir& dir, const std::string& cache) {
  const ToolRun v = run(dir, "recycle-inspect", "--cache " + cache + " --verify --json");
  EXPECT_EQ(v.code, 0) << describe(v);
  EXPECT_EQ(v.last.value("corrupt", -1), 0) << describe(v);
}

void expect_one_line_error(const ToolRun& r, int code, const std::string& says) {
  EXPECT_EQ(r.code, code) << describe(r);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
}

// A complete split whose index count differs from its manifest is refused by
// training and reported by --verify, never trained on in part.
TEST(CacheSafety, CompleteSplitWithMissingIndexEntriesIsRefused) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  ASSERT_EQ(run(dir, "recycle-build", small_build(cache)).code, 0);
  {
    std::unique_ptr<ActivationStore> store;
    ASSERT_OK(ActivationStore::open(cache, recycle::StoreOptions(), &store));
    ActivationStore::Batch cut(*store);
    recycle::StoreTestAccess::truncate_index(cut, "test",
                                             60);  // a torn view: 60 entries, the manifest says 100
    ASSERT_OK(recycle::StoreTestAccess::write(*store, &cut));
  }
  const ToolRun t = run(dir, "recycle-train", "--cache " + cache + " --split test --epochs 1 "
                                             "--eval-split none");
  expect_one_line_error(t, 1, "has 60 index entries, its manifest says 100");
  const ToolRun v = run(dir, "recycle-inspect", "--cache " + cache + " --verify");
  EXPECT_EQ(v.code, 1) << describe(v);
  EXPECT_NE(v.err.find("60 index entries"), std::string::npos) << v.err;
}

// Writes a 1-class IDX data set of n images of size x size into dir as the test split.
void write_images(const std::string& dir, int n, int size) {
  std::vector<uint8_t> images(static_cast<size_t>(n) * size * size), labels(n, 0);
  for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<uint8_t>(i * 31 % 253);
  fs::create_directories(dir);
  recycle::testing::write_idx(dir + "/t10k-images-idx3-ubyte.gz", {n, size, size}, images);
  recycle::testing::write_idx(dir + "/t10k-labels-idx1-ubyte.gz", {n}, labels);
}

// The input shape is part of the identity; caches made before it was stored are
// checked by their record layout (the record shapes). Nothing is written either way.
TEST(CacheSafety, AnotherInputShapeIsRefused) {
  TempDir dir;
  write_images(dir.file("d28"), 40, 28);
  write_images(dir.file("d32"), 40, 32);
  const std::string cache = dir.file("cache");
  const std::string common = " --split test --width 4 --recycle 0.5 --cache " + cache;
  ToolRun r = run(dir, "recycle-build", "--data fashion-mnist:" + dir.file("d32") + common);
  ASSERT_EQ(r.code, 0) << describe(r);
  r = run(dir, "recycle-build", "--data fashion-mnist:" + dir.file("d28") + common);
  expect_one_line_error(r, 1, "input shape: the cache has 1x32x32, this run asks for 1x28x28");
  expect_verifies(dir, cache);

  // A cache from before the input shape was stored: the record layout decides.
  {
    std::unique_ptr<ActivationStore> store;
    ASSERT_OK(ActivationStore::open(cache, recycle::StoreOptions(), &store));
    Manifest m;
    ASSERT_OK(store->read_manifest(&m));
    m.input_shape.clear();
    ActivationStore::Batch b(*store);
    recycle::StoreTestAccess::put_manifest(b, m);
    ASSERT_OK(recycle::StoreTestAccess::write(*store, &b));
  }
  r = run(dir, "recycle-build", "--data fashion-mnist:" + dir.file("d28") + common);
  expect_one_line_error(r, 1, "record layout: the cache has activation float32 8x16x16 fp16, "
                              "this run asks for activation float32 8x14x14 fp16");
  expect_verifies(dir, cache);
  // The same shape still builds on it, and the input shape is filled in.
  r = run(dir, "recycle-build", "--data fashion-mnist:" + dir.file("d32") + common + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  const ToolRun v = run(dir, "recycle-inspect", "--cache " + cache + " --json");
  EXPECT_EQ(v.code, 0) << describe(v);
}

std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir)) names.push_back(e.path().string());
  std::sort(names.begin(), names.end());
  return names;
}

// --rebuild deletes only what identifies itself as a cache.
TEST(CacheSafety, RebuildLeavesAForeignDatabaseAndUserFilesAlone) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  // Someone else's RocksDB database, full of data.
  const std::string foreign = dir.file("foreign");
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, foreign, &db).ok());
    for (int i = 0; i < 100; ++i) db->Put(rocksdb::WriteOptions(), "k" + std::to_string(i), "v");
    db->Flush(rocksdb::FlushOptions());
    delete db;
  }
  const auto before = listing(foreign);
  ToolRun r = run(dir, "recycle-build", small_build(foreign) + " --rebuild");
  expect_one_line_error(r, 2, "is not a recycle cache");
  EXPECT_EQ(listing(foreign), before);
  {
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::OpenForReadOnly(rocksdb::Options(), foreign, &db).ok());
    std::string v;
    EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), "k42", &v).ok());
    delete db;
  }
  // RocksDB-like names beside the user's own files.
  const std::string lookalike = dir.file("lookalike");
  fs::create_directories(lookalike);
  for (const char* name : {"CURRENT", "000001.sst", "MANIFEST-000001", "notes.txt"}) {
    recycle::testing::write_file(lookalike + "/" + name, "mine");
  }
  const auto mine = listing(lookalike);
  r = run(dir, "recycle-build", small_build(lookalike) + " --rebuild");
  expect_one_line_error(r, 2, "is not a recycle cache");
  EXPECT_EQ(listing(lookalike), mine);
  // A real cache is rebuilt.
  const std::string cache = dir.file("cache");
  ASSERT_EQ(run(dir, "recycle-build", small_build(cache)).code, 0);
  EXPECT_TRUE(fs::exists(cache + "/" + recycle::kCacheMarkerName));
  r = run(dir, "recycle-build", small_build(cache) + " --rebuild --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["computed"], r.last["unique"]);
}

// --rebuild checks, then deletes, then builds: a cache directory that also holds the user's files
// (or files named like RocksDB's that the cache's database does not list) is refused before
// anything is deleted, and keeps every split. Moving the file out lets the rebuild run.
TEST(CacheSafety, RebuildRefusesACacheHoldingUserFilesBeforeDeletingAnything) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  ASSERT_EQ(run(dir, "recycle-build", small_build(cache, 60, "train")).code, 0);
  ASSERT_EQ(run(dir, "recycle-build", small_build(cache, 40, "test")).code, 0);
  for (const char* name : {"notes.txt", "000999.log", "LOG.old.42"}) {
    const std::string c = dir.file(std::string("c-") + name);
    fs::copy(cache, c, fs::copy_options::recursive);
    recycle::testing::write_file(c + "/" + name, "mine");
    const auto before = listing(c);
    ToolRun r = run(dir, "recycle-build", small_build(c, 60, "train") + " --rebuild");
    expect_one_line_error(r, 2, "cache " + c + " also holds " + name);
    EXPECT_NE(r.err.find("nothing was deleted"), std::string::npos) << r.err;
    EXPECT_EQ(listing(c), before) << name;
    EXPECT_EQ(recycle::testing::read_file(c + "/" + name), "mine");
    fs::remove(c + "/" + name);
    r = run(dir, "recycle-inspect", "--cache " + c + " --verify --json");
    ASSERT_EQ(r.code, 0) << describe(r);
    EXPECT_EQ(r.last["splits"]["train"]["samples"], 60) << name;
    EXPECT_EQ(r.last["splits"]["test"]["samples"], 40) << name;
    EXPECT_EQ(r.last["corrupt"], 0);
  }
  // Without the user's file the rebuild runs: the train split alone, every record computed.
  const std::string c = dir.file("c-notes.txt");
  ToolRun r = run(dir, "recycle-build", small_build(c, 60, "train") + " --rebuild --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["computed"], r.last["unique"]);
  r = run(dir, "recycle-inspect", "--cache " + c + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_FALSE(r.last["splits"].contains("test"));
}

// A tmpfs of `megabytes` mounted at `path` for the test's life (root only: ok() is false else).
class SmallDisk {
 public:
  SmallDisk(const std::string& path, int megabytes) : path_(path) {
    fs::create_directories(path);
    ok_ = ::geteuid() == 0 &&
          std::system(("mount -t tmpfs -o size=" + std::to_string(megabytes) + "m tmpfs " + path +
                       " 2>/dev/null").c_str()) == 0;
  }
  ~SmallDisk() {
    if (ok_) (void)std::system(("umount " + path_).c_str());
  }
  bool ok() const { return ok_; }

 private:
  std::string path_;
  bool ok_ = false;
};

// The free-space stop counts what the build wrote, not space RocksDB set aside up front (a
// preallocated 72 MB write-ahead log and 4 MB manifest left a 150 MB disk with no record): the
// build stops with one line, and what it wrote is kept and reads back. A fresh file system's
// root (its lost+found beside) may be the cache directory, as docs/scale.md says.
TEST(CacheSafety, ASmallDiskKeepsWhatTheBuildWroteAndAMountPointMayBeTheCache) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  SmallDisk disk(dir.file("disk"), 150);
  if (!disk.ok()) GTEST_SKIP() << "mounting a tmpfs needs root";
  fs::create_directories(dir.file("disk/lost+found"));
  const std::string cache = dir.file("disk");
  ToolRun r = run(dir, "recycle-build",
                  "--data fashion-mnist --split train --limit 10000 --width 16 --recycle 0.25 "
                  "--codec fp32 --cache " + cache);
  expect_one_line_error(r, 1, "not enough free space for cache " + cache);
  r = run(dir, "recycle-inspect", "--cache " + cache + " --verify --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_GT(r.last["records"].get<int64_t>(), 1000) << describe(r);
  EXPECT_EQ(r.last["corrupt"], 0);
  EXPECT_TRUE(fs::is_directory(dir.file("disk/lost+found")));
}

// Flips one byte in the middle of the cache's first blob file (by name: the oldest). False when
// it has none.
bool flip_a_byte_of_the_first_blob_file(const std::string& cache) {
  std::string blob;
  for (const auto& e : fs::directory_iterator(cache)) {
    if (e.path().extension() == ".blob" && (blob.empty() || e.path().string() < blob)) {
      blob = e.path().string();
    }
  }
  if (blob.empty()) return false;
  std::string bytes = recycle::testing::read_file(blob);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x40);
  recycle::testing::write_file(blob, bytes);
  return true;
}

// One flipped byte in a blob file damages one record: --verify counts and names that record,
// not every record after it in key order, and notes it; a plain rerun of the build computes it
// again, and verify is clean after it. A noted cache is still one --rebuild deletes.
TEST(CacheSafety, AFlippedByteInABlobFileIsOneDamagedRecordARerunComputesAgain) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  // Records of 32 x 28 x 28 floats (100 KB) are kept in blob files.
  const std::string build = "--data fashion-mnist --split test --limit 60 --width 32 "
                            "--recycle 0.25 --codec fp32 --json --cache ";
  ToolRun r = run(dir, "recycle-build", build + cache);
  ASSERT_EQ(r.code, 0) << describe(r);
  ASSERT_TRUE(flip_a_byte_of_the_first_blob_file(cache)) << "no blob file";
  r = run(dir, "recycle-inspect", "--cache " + cache + " --verify --json");
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_EQ(r.last["corrupt"], 1) << describe(r);
  EXPECT_EQ(r.last["checked"], r.last["records"]) << describe(r);
  EXPECT_EQ(r.out.find("the cache holds"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("index entries point to no record"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 of them damaged"), std::string::npos) << r.out;
  EXPECT_NE(r.last["repair"].get<std::string>().find("rerun the build"), std::string::npos)
      << describe(r);
  const std::string first = r.last["problems"][0].get<std::string>();  // "... record KEY: ..."
  const std::string key = first.substr(first.find("record ") + 7, 32);
  EXPECT_EQ(recycle::testing::read_file(cache + "/recycle-damaged-records"),
            "recycle damaged records 1\n" + key + "\n");

  const std::string copy = dir.file("copy");
  fs::copy(cache, copy);
  r = run(dir, "recycle-build", build + cache);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["computed"], 1) << describe(r);
  EXPECT_EQ(r.last["cache_records"], 60) << describe(r);
  EXPECT_FALSE(fs::exists(cache + "/recycle-damaged-records"));
  r = run(dir, "recycle-inspect", "--cache " + cache + " --verify --json");
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["corrupt"], 0) << describe(r);
  EXPECT_EQ(r.last["records"], 60) << describe(r);

  r = run(dir, "recycle-build", build + copy + " --rebuild");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["computed"], 60) << describe(r);
  expect_verifies(dir, copy);
}

// A damaged record of one split, noted by verify, and a build of another split that grows: the
// other build deletes the damaged record (it is on the list) without computing it; verify then
// finds it missing and keeps it on the list, and the rerun of its own split computes it.
TEST(CacheSafety, ADamagedRecordOfAnotherSplitIsComputedByItsOwnRerun) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  const std::string build = "--width 32 --recycle 0.25 --codec fp32 --json --cache " + cache;
  const std::string train = "--data fashion-mnist --split train --limit 30 " + build;
  ASSERT_EQ(run(dir, "recycle-build", train).code, 0);
  ASSERT_EQ(run(dir, "recycle-build", "--data fashion-mnist --split test --limit 20 " + build).code, 0);
  // The first blob file holds the train split's records (written first).
  ASSERT_TRUE(flip_a_byte_of_the_first_blob_file(cache)) << "no blob file";
  ToolRun r = run(dir, "recycle-inspect", "--cache " + cache + " --verify --json");
  ASSERT_EQ(r.last["corrupt"], 1) << describe(r);

  r = run(dir, "recycle-build", "--data fashion-mnist --split test --limit 25 " + build);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["computed"], 5) << describe(r);
  r = run(dir, "recycle-inspect", "--cache " + cache + " --verify --json");
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.out.find("1 index entries point to no record"), std::string::npos) << r.out;
  EXPECT_NE(r.last["repair"].get<std::string>().find("rerun the build"), std::string::npos)
      << describe(r);

  r = run(dir, "recycle-build", train);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["computed"], 1) << describe(r);
  EXPECT_EQ(r.last["cache_records"], 55) << describe(r);
  expect_verifies(dir, cache);
}

// A sibling named like a staging directory belongs to the user and stays.
TEST(CacheSafety, CreatingACacheLeavesSiblingsAlone) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  fs::create_directories(cache + ".creating");
  recycle::testing::write_file(cache + ".creating/precious.txt", "keep me");
  ASSERT_EQ(run(dir, "recycle-build", small_build(cache)).code, 0);
  EXPECT_EQ(recycle::testing::read_file(cache + ".creating/precious.txt"), "keep me");
  // Nothing of the creation is left beside the cache.
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename().string().find("recycle-creating"), std::string::npos)
        << e.path();
  }
  expect_verifies(dir, cache);
}

// Links are followed; a dangling one is refused and left as it is.
TEST(CacheSafety, SymbolicLinksAreFollowedAndDanglingOnesRefused) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string dangling = dir.file("dangling");
  fs::create_symlink(dir.file("nowhere"), dangling);
  ToolRun r = run(dir, "recycle-build", small_build(dangling));
  expect_one_line_error(r, 2, "does not exist");
  EXPECT_TRUE(fs::is_symlink(dangling));
  EXPECT_FALSE(fs::exists(dir.file("nowhere")));

  const std::string target = dir.file("target"), link = dir.file("link");
  fs::create_directories(target);
  fs::create_symlink(target, link);
  ASSERT_EQ(run(dir, "recycle-build", small_build(link)).code, 0);
  EXPECT_TRUE(fs::exists(target + "/CURRENT"));
  r = run(dir, "recycle-build", small_build(link) + " --rebuild --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::exists(target + "/CURRENT"));
  expect_verifies(dir, link);
  expect_verifies(dir, target);
}

// Output that was lost is a failure.
TEST(CacheSafety, LostOutputExitsNonZero) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  ASSERT_EQ(run(dir, "recycle-build", small_build(cache)).code, 0);
  const std::string inspect = recycle::testing::tool_path("recycle-inspect") + " --cache " + cache;
  for (const std::string redirect : {" --json >/dev/full", " --json >&-"}) {
    const int status = std::system((inspect + redirect + " 2>" + dir.file("err")).c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << redirect << ": " << status;
    const std::string err = recycle::testing::read_file(dir.file("err"));
    EXPECT_NE(err.find("could not write the output"), std::string::npos) << err;
  }
}

// Flags that would be ignored are refused; what is chosen is said.
TEST(CacheSafety, SilentSurprisesAreRefusedOrSaid) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  ASSERT_EQ(run(dir, "recycle-build", small_build(cache, 100, "train")).code, 0);
  const std::string c = "--cache " + cache + " --epochs 1 ";
  expect_one_line_error(run(dir, "recycle-train", c + "--limit 5"), 2, "do not apply with --cache");
  expect_one_line_error(run(dir, "recycle-train", c + "--classes 1-2"), 2, "do not apply");
  expect_one_line_error(run(dir, "recycle-train", c + "--no-cache"), 2, "do not apply");
  expect_one_line_error(run(dir, "recycle-train", c + "--width 8"), 2, "--width does not apply");
  ToolRun r = run(dir, "recycle-train", c + "--seed -1");
  expect_one_line_error(r, 2, "--seed: must be a whole number");
  EXPECT_LT(r.err.size(), 200u) << r.err;
  expect_one_line_error(run(dir, "recycle-build", "--data fashion-mnist --split test --limit 10 "
                                                   "--recycle 0.3 --cache " + dir.file("c2")),
                        2, "falls between blocks");
  // No test split: training goes on, and says it does not evaluate.
  const ToolRun t = run(dir, "recycle-train", c + "--json");
  ASSERT_EQ(t.code, 0) << describe(t);
  EXPECT_TRUE(t.last["test_acc"].is_null());
  EXPECT_NE(t.err.find("note: cache " + cache + " has no split 'test'"), std::string::npos)
      << t.err;
  EXPECT_EQ(t.last["notes"].size(), 1u) << t.out;
}

TEST(CacheSafety, WidthBesideWeightsIsRefused) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string enc = dir.file("enc.pt");
  ToolRun r = run(dir, "recycle-train",
                  "--data fashion-mnist --split test --limit 100 --width 4 "
                  "--recycle 0 --epochs 1 --eval-split none --save-model " +
                      enc);
  ASSERT_EQ(r.code, 0) << describe(r);
  r = run(dir, "recycle-build", "--data fashion-mnist --split test --limit 10 --weights " + enc +
                                    " --width 8 --recycle 0.5 --cache " + dir.file("c"));
  expect_one_line_error(r, 2, "--width applies only without --weights");
  EXPECT_FALSE(fs::exists(dir.file("c")));

  // Corrupt weights (a flipped byte inside a tensor, so only the file's XXH3-128 can tell).
  std::string bytes = recycle::testing::read_file(enc);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x10);
  const std::string bad = dir.file("bad.pt");
  recycle::testing::write_file(bad, bytes);
  r = run(dir, "recycle-build", "--data fashion-mnist --split test --limit 10 --weights " + bad +
                                    " --recycle 0.5 --cache " + dir.file("c"));
  expect_one_line_error(r, 1, "fail their XXH3-128 check");
  EXPECT_FALSE(fs::exists(dir.file("c")));
}

// A source of 8 NaN inputs.
class NanBatches : public recycle::BatchSource {
 public:
  int64_t size() const override { return 8; }
  void load(const int64_t*, int64_t n, recycle::Batch* out) override {
    out->clear();
    out->set("activation", torch::full({n, 4}, std::numeric_limits<float>::quiet_NaN()));
    out->labels = torch::zeros({n}, torch::kInt64);
  }
};

// A loss that is not finite stops training with the epoch and step.
TEST(CacheSafety, NonFiniteLossStopsTraining) {
  recycle::BlockStack head;
  head->append("fc", torch::nn::AnyModule(torch::nn::Linear(4, 2)));
  NanBatches source;
  recycle::TrainHyper hyper;
  hyper.epochs = 2;
  try {
    recycle::train_module(head, source, hyper, /*progress=*/false);
    FAIL() << "trained on a NaN loss";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("at epoch 1, step 1 of 1"), std::string::npos) << what;
    // The inputs are NaN: the learning rate is not blamed (issue 54).
    EXPECT_NE(what.find(": input 'activation' holds NaN (value 0 of row 0 of the batch): sample "),
              std::string::npos)
        << what;
    EXPECT_EQ(what.find("--lr"), std::string::npos) << what;
  }
}

// What the trainer says of a loss that is not finite: the first sample whose float input is
// not (as its source explains it), else the learning rate.
TEST(CacheSafety, WhyALossIsNotFiniteNamesTheSampleOrTheLearningRate) {
  recycle::Batch batch;
  batch.set("mask", torch::ones({4, 3}, torch::kBool));
  torch::Tensor x = torch::ones({4, 3});
  batch.set("activation", x);
  batch.labels = torch::zeros({4}, torch::kInt64);
  NanBatches source;
  const int64_t indices[] = {10, 11, 12, 13};
  EXPECT_EQ(recycle::why_not_finite(batch, indices, source),
            "training diverged (try a lower --lr)");
  x[3][0] = std::numeric_limits<float>::quiet_NaN();
  x[2][1] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(recycle::why_not_finite(batch, indices, source),
            "input 'activation' holds -inf (value 1 of row 2 of the batch): sample 12");
}

// A cache holding an fp32 record of a NaN (as recycle-build stored before every codec refused
// them: issue 54; written here through the store): training stops at the step that reads it
// with one line naming the sample, the split and the record and saying to rebuild the cache,
// where it said "training diverged (try a lower --lr)"; from the cache, loaded ahead, and
// preloaded. --verify counts the record as corrupt, naming it.
TEST(CacheSafety, ARecordThatIsNotFiniteIsNamedNotBlamedOnTheLearningRate) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  ToolRun r = run(dir, "recycle-build", small_build(cache, 100) + " --codec fp32");
  ASSERT_EQ(r.code, 0) << describe(r);
  std::string key;
  {
    std::unique_ptr<ActivationStore> store;
    ASSERT_OK(ActivationStore::open(cache, recycle::StoreOptions(), &store));
    std::vector<recycle::IndexEntry> index;
    ASSERT_OK(store->read_index("test", &index));
    ASSERT_EQ(index.size(), 100u);
    std::string record;
    ASSERT_OK(store->get_record(index[37].key, &record));
    key = index[37].key.to_hex();
    // The first value of the tensor's payload (prefix 8, header 4 + 4 x 3 dims), then the
    // checksum made right again: a record as the old build wrote it.
    const uint32_t nan = 0x7FC00000u;
    std::memcpy(&record[8 + 4 + 4 * 3 + 4 * 5], &nan, 4);
    const uint64_t sum = XXH3_64bits(record.data(), record.size() - 8);
    std::memcpy(&record[record.size() - 8], &sum, 8);
    std::vector<recycle::RecordTensor> tensors;
    ASSERT_OK(recycle::parse_record(record, &tensors));
    ActivationStore::Batch batch(*store);
    recycle::StoreTestAccess::put_record(batch, index[37].key, record);
    ASSERT_OK(recycle::StoreTestAccess::write(*store, &batch));
    ASSERT_OK(store->flush());
  }
  for (const std::string how : {"", "--prefetch 0 ", "--preload "}) {
    r = run(dir, "recycle-train", "--cache " + cache + " --split test --eval-split none " +
                                      "--epochs 1 --batch 16 --threads 2 " + how);
    expect_one_line_error(r, 1, "input 'activation' holds NaN (value 5 of row ");
    EXPECT_NE(r.err.find("sample 37 of split 'test' (record " + key + ") of cache " + cache +
                         ", which holds values that are not finite"),
              std::string::npos)
        << how << r.err;
    EXPECT_NE(r.err.find("rebuild it"), std::string::npos) << how << r.err;
    EXPECT_EQ(r.err.find("--lr"), std::string::npos) << how << r.err;
  }
  r = run(dir, "recycle-inspect", "--cache " + cache + " --verify --json");
  EXPECT_NE(r.code, 0) << describe(r);
  EXPECT_EQ(r.last.value("corrupt", -1), 1) << describe(r);
  EXPECT_NE(r.out.find("record " + key + ": "), std::string::npos) << describe(r);
  EXPECT_NE(r.out.find("fp32 value 5 of "), std::string::npos) << describe(r);
}

// Messages and exit codes.
TEST(CacheSafety, MessagesAndExitCodes) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  ASSERT_EQ(run(dir, "recycle-build", small_build(cache)).code, 0);
  const std::string c = "--cache " + cache + " --epochs 1 ";
  ToolRun r = run(dir, "recycle-train", c + "--lr 0");
  expect_one_line_error(r, 2, "--lr must be above 0 and at most 10, not 0");
  EXPECT_LT(r.err.size(), 200u) << r.err;
  expect_one_line_error(run(dir, "recycle-train", c + "--lr 1e308"), 2, "--lr");
  for (const char* tool : {"recycle-build", "recycle-train", "recycle-inspect"}) {
    r = run(dir, tool, "--data fashion-mnist --recycle 0.5 --cache ''");
    if (std::string(tool) == "recycle-inspect") r = run(dir, tool, "--cache ''");
    expect_one_line_error(r, 2, "--cache");
  }
  // A cache whose CURRENT file is gone is called damaged, not missing.
  const std::string copy = dir.file("copy");
  fs::copy(cache, copy);
  fs::remove(copy + "/CURRENT");
  expect_one_line_error(run(dir, "recycle-inspect", "--cache " + copy), 1,
                        "is damaged: its CURRENT file is missing");
  // A FIFO in place of a data file is refused at once.
  const std::string fifo_dir = dir.file("fifo");
  fs::create_directories(fifo_dir);
  ASSERT_EQ(mkfifo((fifo_dir + "/t10k-images-idx3-ubyte.gz").c_str(), 0600), 0);
  fs::copy_file("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz",
                fifo_dir + "/t10k-labels-idx1-ubyte.gz");
  r = run(dir, "recycle-build", "--data fashion-mnist:" + fifo_dir +
                                    " --split test --recycle 0.5 --cache " + dir.file("c3"));
  expect_one_line_error(r, 1, "is a FIFO, not a regular file");
  // recycle-bench checks its own flags.
  expect_one_line_error(run(dir, "recycle-bench", "--ratios 0.3"), 2, "multiple of 1/8");
  expect_one_line_error(run(dir, "recycle-bench", "--samples 0"), 2, "--samples");
  expect_one_line_error(run(dir, "recycle-bench", "--threads -1"), 2, "--threads");
}

// recycle-train's mismatch message names what it offers, not recycle-build's flag.
TEST(CacheSafety, TrainMismatchSuggestsWhatWorks) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string enc = dir.file("enc.pt"), cache = dir.file("cache");
  ToolRun r = run(dir, "recycle-train",
                  "--data fashion-mnist --split test --limit 100 --width 4 "
                  "--recycle 0 --epochs 1 --eval-split none --save-model " +
                      enc);
  ASSERT_EQ(r.code, 0) << describe(r);
  ASSERT_EQ(run(dir, "recycle-build", small_build(cache)).code, 0);  // other (random) weights
  r = run(dir, "recycle-train", "--cache " + cache + " --weights " + enc + " --epochs 1");
  expect_one_line_error(r, 1, "recycle-build --rebuild");
}

// Records no index entry points to are counted and compacted away.
TEST(CacheSafety, OrphanRecordsAreCountedAndCompacted) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("cache");
  ASSERT_EQ(run(dir, "recycle-build", small_build(cache, 100)).code, 0);
  ToolRun r = run(dir, "recycle-build", small_build(cache, 60) + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  r = run(dir, "recycle-inspect", "--cache " + cache + " --json");
  EXPECT_EQ(r.last["orphans"], 40) << describe(r);
  r = run(dir, "recycle-inspect", "--cache " + cache + " --verify --json");
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["orphans"], 40) << describe(r);
  r = run(dir, "recycle-inspect", "--cache " + cache + " --compact --verify --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("40 orphan records deleted"), std::string::npos) << r.out;
  EXPECT_EQ(r.last["orphans"], 0);
  EXPECT_EQ(r.last["records"], 60);
  EXPECT_EQ(r.last["checked"], 60);
  // Training still reads every sample.
  r = run(dir, "recycle-train",
          "--cache " + cache + " --split test --eval-split none --epochs 1 --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["train_samples"], 60);
}

}  // namespace
