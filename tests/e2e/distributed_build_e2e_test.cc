// recycle-build --nproc 2 with the real tools, the local launcher and c10d: the cache verifies
// and equals, record for record and byte for byte, a 1-process build of the same inputs and
// weights; a rerun computes nothing; a split that is half there gets only its missing half.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/activation_store.h"
#include "cache/cache_dir.h"
#include "tests/tool_runner.h"

namespace {

namespace fs = std::filesystem;
using recycle::testing::children_of;
using recycle::testing::describe;
using recycle::testing::have_fashion_mnist;
using recycle::testing::TempDir;
using recycle::testing::ToolRun;
using recycle::testing::worker_of_rank;

ToolRun run(const TempDir& dir, const std::string& tool, const std::string& args) {
  return recycle::testing::run_tool(dir, tool, args);
}

// A small real split: two classes of Fashion-MNIST, a width-8 ResNet-18 cut at 0.5.
std::string build_args(const std::string& cache, int limit) {
  return "--data fashion-mnist --split train --classes 0-1 --limit " + std::to_string(limit) +
         " --model resnet18 --width 8 --recycle 0.5 --batch 64 --threads 2 --json --cache " +
         cache;
}

struct Contents {
  std::string manifest;
  std::vector<recycle::IndexEntry> index;
  std::map<std::string, std::string> records;  // key hex -> record bytes
};

Contents read_cache(const std::string& cache) {
  Contents c;
  std::unique_ptr<recycle::ActivationStore> store;
  recycle::StoreOptions so;
  so.read_only = true;
  EXPECT_OK(recycle::ActivationStore::open(cache, so, &store));
  if (!store) return c;
  recycle::Manifest m;
  EXPECT_OK(store->read_manifest(&m));
  c.manifest = m.to_json_string();
  EXPECT_OK(store->read_index("train", &c.index));
  EXPECT_OK(store->for_each_record([&](const recycle::Key& k, std::string_view bytes) {
    c.records[k.to_hex()] = std::string(bytes);
    return true;
  }));
  return c;
}

void expect_same(const Contents& a, const Contents& b) {
  EXPECT_EQ(a.records.size(), b.records.size());
  EXPECT_TRUE(a.records == b.records) << "record bytes differ";
  EXPECT_TRUE(a.index == b.index) << "samples index differs";
  EXPECT_EQ(a.manifest, b.manifest);
}

void expect_verifies(const TempDir& dir, const std::string& cache, int64_t records) {
  const ToolRun v = run(dir, "recycle-inspect", "--cache " + cache + " --verify --json");
  ASSERT_EQ(v.code, 0) << describe(v);
  EXPECT_EQ(v.last.value("corrupt", -1), 0) << describe(v);
  EXPECT_EQ(v.last.value("checked", -1), records) << describe(v);
}

bool staging_is_empty(const std::string& cache) {
  const fs::path staging = fs::path(cache) / recycle::kStagingDirName;
  std::error_code ec;
  return !fs::exists(staging, ec) || fs::is_empty(staging, ec);
}

}  // namespace

TEST(DistributedBuildTools, TwoProcessesBuildTheCacheOfOne) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string one = dir.file("one"), two = dir.file("two");
  ToolRun r1 = run(dir, "recycle-build", build_args(one, 300));
  ASSERT_EQ(r1.code, 0) << describe(r1);
  ToolRun r2 = run(dir, "recycle-build", build_args(two, 300) + " --nproc 2");
  ASSERT_EQ(r2.code, 0) << describe(r2);
  for (const char* field : {"samples", "unique", "computed", "skipped", "index_written", "bytes",
                            "records"}) {
    EXPECT_EQ(r2.last.value(field, int64_t{-1}), r1.last.value(field, int64_t{-2})) << field;
  }
  EXPECT_EQ(r1.last.value("samples", 0), 300);
  EXPECT_GT(r1.last.value("computed", 0), 250);
  EXPECT_EQ(r2.last.value("ranks", 0), 2);
  expect_verifies(dir, two, r1.last.value("records", int64_t{0}));
  expect_same(read_cache(one), read_cache(two));
  EXPECT_TRUE(staging_is_empty(two));

  // A rerun computes and writes nothing.
  ToolRun again = run(dir, "recycle-build", build_args(two, 300) + " --nproc 2");
  ASSERT_EQ(again.code, 0) << describe(again);
  EXPECT_EQ(again.last.value("computed", -1), 0);
  EXPECT_EQ(again.last.value("index_written", -1), 0);
  EXPECT_EQ(again.last.value("bytes", -1), 0);
  expect_same(read_cache(one), read_cache(two));
}

TEST(DistributedBuildTools, TwoProcessesComputeOnlyTheMissingHalf) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string one = dir.file("one"), half = dir.file("half");
  ToolRun whole = run(dir, "recycle-build", build_args(one, 300));
  ASSERT_EQ(whole.code, 0) << describe(whole);
  ToolRun first = run(dir, "recycle-build", build_args(half, 150));
  ASSERT_EQ(first.code, 0) << describe(first);
  ToolRun rest = run(dir, "recycle-build", build_args(half, 300) + " --nproc 2");
  ASSERT_EQ(rest.code, 0) << describe(rest);
  const int64_t records = whole.last.value("records", int64_t{0});
  EXPECT_EQ(rest.last.value("computed", int64_t{-1}),
            records - first.last.value("records", int64_t{0}));
  EXPECT_EQ(rest.last.value("index_written", -1), 150);
  EXPECT_EQ(rest.last.value("records", int64_t{-1}), records);
  expect_verifies(dir, half, records);
  expect_same(read_cache(one), read_cache(half));
}

TEST(DistributedBuildTools, DistributedFlagsThatMakeNoJobAreRefused) {
  TempDir dir;
  const std::string base = "--data fashion-mnist --recycle 0.5 --cache " + dir.file("c");
  struct Case {
    std::string args, needle;
  } cases[] = {
      {base + " --nproc 2 --rank 0", "--nproc starts its own workers"},
      {base + " --rank 2 --world-size 2 --master 127.0.0.1:1", "--rank must be in 0..1"},
      {base + " --world-size 2", "needs --master"},
      {base + " --nproc 0", "--nproc"},
  };
  for (const Case& c : cases) {
    const ToolRun r = run(dir, "recycle-build", c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << describe(r);
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\n" << describe(r);
    EXPECT_EQ(recycle::testing::count_lines(r.err), 1) << describe(r);
  }
  EXPECT_FALSE(fs::exists(dir.file("c")));
}

// The arguments of a --nproc 2 build of `limit` samples into `cache`, as separate words.
std::vector<std::string> nproc2_args(const std::string& cache, int limit) {
  return {"--data", "fashion-mnist", "--split", "train", "--classes", "0-1",
          "--limit", std::to_string(limit), "--model", "resnet18", "--width", "8",
          "--recycle", "0.5", "--batch", "64", "--threads", "2", "--cache", cache,
          "--nproc", "2", "--timeout", "3"};
}

// Spawns a --nproc 2 build; returns the launcher's pid and sets *victim to the pid of the
// worker of rank `rank` once it runs (-1 when it never came).
pid_t spawn_build(const std::vector<std::string>& args, const std::string& err, int rank,
                  pid_t* victim) {
  const pid_t launcher = recycle::testing::spawn_tool("recycle-build", args, "/dev/null", err);
  *victim = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (*victim < 0 && std::chrono::steady_clock::now() < deadline) {
    *victim = worker_of_rank(launcher, rank);
    if (*victim < 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return launcher;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// SIGKILL of the worker of rank `victim_rank` of a --nproc 2 build at a moment drawn at random
// within the time such a build takes (measured first, by the build the result is compared
// with): the launcher ends within the timeout (non-zero, naming the rank, unless the build was
// done), whatever cache there is opens and verifies, and a rerun with --nproc 2 finishes it,
// equal to the uninterrupted build, with an empty staging area. Until rank 0's ingest the
// cache gains no records and the ingest brings them all, so the rerun computes either every
// missing record, in the same batches, or none.
void kill_and_rerun(int victim_rank) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  constexpr int kLimit = 800;
  const std::string whole = dir.file("whole"), cache = dir.file("killed");
  pid_t worker = -1;
  const pid_t first = spawn_build(nproc2_args(whole, kLimit), dir.file("whole.err"), 0, &worker);
  ASSERT_GT(worker, 0);
  const auto started = std::chrono::steady_clock::now();
  ASSERT_EQ(recycle::testing::wait_tool(first), 0)
      << recycle::testing::read_file(dir.file("whole.err"));
  const double duration = seconds_since(started);  // from the workers' start to the end
  const Contents want = read_cache(whole);
  ASSERT_FALSE(want.records.empty());

  std::mt19937 rng(std::random_device{}());
  const double at = std::uniform_real_distribution<double>(0.05, 1.0)(rng) * duration;
  const std::string err = dir.file("killed.err");
  pid_t victim = -1;
  const pid_t launcher = spawn_build(nproc2_args(cache, kLimit), err, victim_rank, &victim);
  ASSERT_GT(victim, 0) << recycle::testing::read_file(err);
  std::this_thread::sleep_for(std::chrono::duration<double>(at));
  kill(victim, SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  const int code = recycle::testing::wait_tool(launcher);
  const double to_exit = seconds_since(killed);
  const std::string text = recycle::testing::read_file(err);
  EXPECT_LT(to_exit, 3 * 3 + 10) << text;  // the timeout, the launcher's grace, slack
  EXPECT_TRUE(children_of(launcher).empty());
  if (code != 0) {
    EXPECT_NE(text.find("rank " + std::to_string(victim_rank) + " of 2"), std::string::npos)
        << text;
  }
  // Whatever is there opens and verifies: nothing half-written.
  bool has_manifest = false;
  if (fs::exists(fs::path(cache) / "CURRENT")) {
    std::unique_ptr<recycle::ActivationStore> store;
    recycle::StoreOptions so;
    so.read_only = true;
    ASSERT_OK(recycle::ActivationStore::open(cache, so, &store));
    recycle::Manifest m;
    has_manifest = store->read_manifest(&m).ok();
    store.reset();
    if (has_manifest) {
      const ToolRun v = run(dir, "recycle-inspect", "--cache " + cache + " --verify --json");
      EXPECT_EQ(v.code, 0) << describe(v);
      EXPECT_EQ(v.last.value("corrupt", -1), 0) << describe(v);
    }
  }
  // The rerun finishes it.
  const ToolRun rerun = run(dir, "recycle-build", build_args(cache, kLimit) + " --nproc 2");
  ASSERT_EQ(rerun.code, 0) << describe(rerun);
  const int64_t records = static_cast<int64_t>(want.records.size());
  EXPECT_EQ(rerun.last.value("records", int64_t{-1}), records);
  EXPECT_TRUE(rerun.last.value("computed", int64_t{-1}) == 0 ||
              rerun.last.value("computed", int64_t{-1}) == records)
      << describe(rerun);
  expect_verifies(dir, cache, records);
  expect_same(want, read_cache(cache));
  EXPECT_TRUE(staging_is_empty(cache));
  std::cout << "killed rank " << victim_rank << " " << at << " s after it started (a build takes "
            << duration << " s): launcher exit " << code << " " << to_exit << " s later; cache "
            << (fs::exists(fs::path(cache) / "CURRENT")
                    ? (has_manifest ? "with a manifest" : "without a manifest")
                    : "not there")
            << "; rerun computed " << rerun.last.value("computed", -1) << std::endl;
}

TEST(DistributedBuildTools, AKilledRank1LeavesACacheThatARerunFinishes) { kill_and_rerun(1); }

// A rank killed while the others compute ends the job as soon as its launcher sees it, not at
// the --timeout (60 s here; the ranks wait on the store, where a dead rank shows otherwise only
// by its heartbeat standing still): rank 1 is killed once the run's staging directory exists
// (every rank is past the rendezvous, and rank 0 computes or waits for rank 1's records).
TEST(DistributedBuildTools, AKilledRankEndsTheBuildWhenTheLauncherSeesIt) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string cache = dir.file("c"), err = dir.file("err");
  std::vector<std::string> args = nproc2_args(cache, 2000);
  args.back() = "60";  // --timeout
  pid_t victim = -1;
  const pid_t launcher = spawn_build(args, err, 1, &victim);
  ASSERT_GT(victim, 0) << recycle::testing::read_file(err);
  const fs::path staging = fs::path(cache) / recycle::kStagingDirName;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::error_code ec;
  while ((!fs::exists(staging, ec) || fs::is_empty(staging, ec)) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_FALSE(fs::is_empty(staging, ec)) << recycle::testing::read_file(err);
  kill(victim, SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  const int code = recycle::testing::wait_tool(launcher);
  const double to_exit = seconds_since(killed);
  const std::string text = recycle::testing::read_file(err);
  EXPECT_NE(code, 0) << text;
  EXPECT_LT(to_exit, 20) << text;  // was the 60 s timeout
  EXPECT_NE(text.find("rank 1 of 2"), std::string::npos) << text;
  EXPECT_TRUE(children_of(launcher).empty());
  std::cout << "killed rank 1: the launcher exited " << code << " " << to_exit << " s later"
            << std::endl;
}
TEST(DistributedBuildTools, AKilledRank0LeavesACacheThatARerunFinishes) { kill_and_rerun(0); }
