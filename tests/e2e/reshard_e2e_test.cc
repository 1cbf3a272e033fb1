// recycle-reshard with the real tools: shards of 2 (recycle-build --sharded --nproc 2) moved to
// shards of 3 and back, rank to rank over c10d, each rank a process of its own on 127.0.0.1
// with its own directories ({rank}). Every moved shard holds exactly the samples the rule gives
// it, its records byte for byte the old ones, and verifies clean; training runs on the new
// count with nothing computed; bad runs are refused before anything is written.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cache/activation_store.h"
#include "cache/shard_rule.h"
#include "tests/tool_runner.h"

namespace {

namespace fs = std::filesystem;
using recycle::testing::have_fashion_mnist;
using recycle::testing::run_tool;
using recycle::testing::TempDir;

struct Shard {
  recycle::Manifest manifest;
  std::map<std::string, std::vector<recycle::IndexEntry>> index;
  std::map<recycle::Key, std::string> records;
};

Shard read_shard(const std::string& dir) {
  Shard s;
  std::unique_ptr<recycle::ActivationStore> store;
  recycle::StoreOptions so;
  so.read_only = true;
  EXPECT_OK(recycle::ActivationStore::open(dir, so, &store));
  if (!store) return s;
  EXPECT_OK(store->read_manifest(&s.manifest));
  for (const auto& [name, info] : s.manifest.splits)
    EXPECT_OK(store->read_index(name, &s.index[name]));
  EXPECT_OK(store->for_each_record([&](const recycle::Key& k, std::string_view v) {
    s.records[k] = std::string(v);
    return true;
  }));
  EXPECT_OK(store->verify_files());
  return s;
}

std::string rank_path(const std::string& pattern, int r) {
  std::string p = pattern;
  p.replace(p.find("{rank}"), 6, std::to_string(r));
  return p;
}

// The shards at `pattern` ({rank}) hold, between them, exactly the entries and records of `old`
// (per split, as multisets), each entry in the shard the rule gives it, `count` shards.
void expect_same_data(const std::vector<Shard>& old, const std::string& pattern, int count) {
  std::map<std::string, std::multiset<std::pair<recycle::Key, int64_t>>> want, got;
  std::map<recycle::Key, std::string> want_records, got_records;
  for (const Shard& s : old) {
    for (const auto& [name, entries] : s.index)
      for (const auto& e : entries) want[name].insert({e.key, e.label});
    want_records.insert(s.records.begin(), s.records.end());
  }
  for (int r = 0; r < count; ++r) {
    const Shard s = read_shard(rank_path(pattern, r));
    for (const auto& [name, info] : s.manifest.splits) {
      EXPECT_TRUE(info.complete) << name << " of shard " << r;
      EXPECT_EQ(info.shard.index, r);
      EXPECT_EQ(info.shard.count, count);
      EXPECT_EQ(info.samples, static_cast<int64_t>(s.index.at(name).size()));
    }
    for (const auto& [name, entries] : s.index) {
      for (const auto& e : entries) {
        EXPECT_EQ(recycle::shard_of(e.key, count), r) << "a sample of another shard";
        got[name].insert({e.key, e.label});
      }
    }
    EXPECT_EQ(s.manifest.records, static_cast<int64_t>(s.records.size())) << "shard " << r;
    got_records.insert(s.records.begin(), s.records.end());
  }
  EXPECT_EQ(got, want);
  EXPECT_TRUE(got_records == want_records) << "records differ";
}

}  // namespace

TEST(ReshardTools, ShardsOfTwoMoveToThreeTrainAndComeBackByteForByte) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string two = dir.file("two-{rank}"), three = dir.file("three-{rank}"),
                    back = dir.file("back-{rank}");
  for (const std::string split : {"train", "test"}) {
    const auto b = run_tool(dir, "recycle-build",
                            "--data fashion-mnist --split " + split +
                                " --classes 0-1 --limit 300 --model resnet18 --width 8 "
                                "--recycle 0.5 --batch 64 --nproc 2 --sharded --cache " +
                                two);
    ASSERT_EQ(b.code, 0) << recycle::testing::describe(b);
  }
  const std::vector<Shard> old = {read_shard(rank_path(two, 0)), read_shard(rank_path(two, 1))};

  // Refused before anything is written: too few ranks, then a --to that holds files.
  auto r = run_tool(dir, "recycle-reshard",
                    "--cache " + two + " --to " + three + " --shards 3 --nproc 2");
  EXPECT_EQ(r.code, 1) << recycle::testing::describe(r);
  EXPECT_NE(r.err.find("shards of 2 to 3 need 3 ranks, not 2"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(rank_path(three, 0)));
  fs::create_directories(rank_path(three, 2));
  recycle::testing::write_file(rank_path(three, 2) + "/notes.txt", "mine");
  r = run_tool(dir, "recycle-reshard",
               "--cache " + two + " --to " + three + " --shards 3 --nproc 3");
  EXPECT_EQ(r.code, 1) << recycle::testing::describe(r);
  EXPECT_NE(r.err.find("holds files already"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(rank_path(three, 0)));
  EXPECT_TRUE(fs::exists(rank_path(three, 2) + "/notes.txt"));
  fs::remove_all(rank_path(three, 2));
  // A --to inside the old shards (another name for them) is refused, --rebuild or not.
  r = run_tool(dir, "recycle-reshard",
               "--cache " + two + " --to " + two + "/../" + fs::path(two).filename().string() +
                   " --shards 3 --nproc 3 --rebuild");
  EXPECT_EQ(r.code, 1) << recycle::testing::describe(r);
  EXPECT_NE(r.err.find("old shard or inside it"), std::string::npos) << r.err;
  EXPECT_TRUE(read_shard(rank_path(two, 0)).records == old[0].records);

  r = run_tool(dir, "recycle-reshard",
               "--cache " + two + " --to " + three + " --shards 3 --nproc 3 --json");
  ASSERT_EQ(r.code, 0) << recycle::testing::describe(r);
  EXPECT_EQ(r.last.value("computed", -1), 0);
  ASSERT_EQ(r.last["per_rank"].size(), 3u) << r.out;
  int64_t received = 0, samples = 0;
  for (const auto& p : r.last["per_rank"]) {
    received += p.value("records_received", int64_t{0});
    samples += p.value("samples", int64_t{0});
  }
  EXPECT_GT(received, 0);
  EXPECT_EQ(samples, 600);  // train and test
  expect_same_data(old, three, 3);
  for (int k = 0; k < 3; ++k) {
    const auto v = run_tool(dir, "recycle-inspect", "--verify --cache " + rank_path(three, k));
    EXPECT_EQ(v.code, 0) << recycle::testing::describe(v);
  }

  const auto t = run_tool(dir, "recycle-train",
                          "--cache " + three + " --sharded --nproc 3 --epochs 3 --batch 16 --json");
  ASSERT_EQ(t.code, 0) << recycle::testing::describe(t);
  EXPECT_EQ(t.last.value("train_samples", -1), 300) << t.out;
  EXPECT_GT(t.last.value("test_acc", 0.0), 0.8) << t.out;  // two distinct classes

  r = run_tool(dir, "recycle-reshard",
               "--cache " + three + " --to " + back + " --shards 2 --nproc 3");
  ASSERT_EQ(r.code, 0) << recycle::testing::describe(r);
  EXPECT_FALSE(fs::exists(rank_path(back, 2)));
  expect_same_data(old, back, 2);
  for (int k = 0; k < 2; ++k) {  // each rank's shard as it was built, entry for entry
    const Shard s = read_shard(rank_path(back, k));
    for (const auto& [name, entries] : old[static_cast<size_t>(k)].index) {
      std::multiset<std::pair<recycle::Key, int64_t>> a, b;
      for (const auto& e : entries) a.insert({e.key, e.label});
      for (const auto& e : s.index.at(name)) b.insert({e.key, e.label});
      EXPECT_EQ(a, b) << name << " of shard " << k;
    }
  }
}
