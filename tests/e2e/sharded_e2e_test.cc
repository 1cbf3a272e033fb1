// Sharded builds and training (--sharded) with the real tools, each rank in a mount namespace of
// its own: its own directory is bind-mounted at the one --cache path every rank is given, and a
// tmpfs hides every rank's directory (its own too) where it lies, so the same path names
// another directory on each rank and no rank can reach another's. The ranks meet over
// 127.0.0.1 through rank 0's TCPStore. A build, a rebuild that computes nothing, training and
// the evaluation summed over the shards; a rank killed mid-build and the rerun; and, to show
// that the namespaces do keep the ranks apart, a distributed build that is not sharded, which
// needs a directory every rank sees, fails there. Needs root (mount namespaces); skipped
// without.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache/activation_store.h"
#include "cache/shard_rule.h"
#include "tests/tool_runner.h"

namespace {

namespace fs = std::filesystem;
using recycle::testing::have_fashion_mnist;
using recycle::testing::read_file;
using recycle::testing::TempDir;

bool can_unshare_mounts() {
  return std::system("unshare --mount --propagation private true >/dev/null 2>&1") == 0;
}

// The job's directories: ranks/R (each rank's own, where the test reads it), cache (the path
// every rank is given: empty, a mount point in each rank's namespace).
struct Job {
  TempDir dir;
  int world;
  explicit Job(int w) : world(w) {
    for (int r = 0; r < w; ++r) fs::create_directories(rank_dir(r));
    fs::create_directories(cache());
  }
  std::string rank_dir(int r) const { return dir.file("ranks/" + std::to_string(r)); }
  std::string cache() const { return dir.file("cache"); }
  std::string out(int r) const { return dir.file("out-" + std::to_string(r)); }
  std::string err(int r) const { return dir.file("err-" + std::to_string(r)); }
};

// Starts rank r of `tool args` in its own mount namespace, its directory at job.cache();
// returns the tool's pid (the shell and unshare exec into it). `paths`: the tool's path flags
// ("" for --cache job.cache()); `world`: the job's ranks (0: job.world).
pid_t spawn_rank(const Job& job, int r, const std::string& tool, const std::string& args, int port,
                 int timeout_seconds = 60, const std::string& paths = "", int world = 0) {
  const std::string cmd = "exec unshare --mount --propagation private sh -c 'mount --bind " +
                          job.rank_dir(r) + " " + job.cache() + " && mount -t tmpfs none " +
                          job.dir.file("ranks") + " && exec " + recycle::testing::tool_path(tool) +
                          " " + args + " " + (paths.empty() ? "--cache " + job.cache() : paths) +
                          " --rank " + std::to_string(r) + " --world-size " +
                          std::to_string(world > 0 ? world : job.world) +
                          " --master 127.0.0.1:" + std::to_string(port) + " --timeout " +
                          std::to_string(timeout_seconds) + " --threads 1 --json' >" + job.out(r) +
                          " 2>" + job.err(r) + " </dev/null";
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

struct RankRun {
  int code = -1;
  std::string err;
  nlohmann::json last;
};

// Waits for the ranks `pids` (rank r's pid at r) to end: each one's exit code, stderr and last
// JSON line; *taken when a rank found its port taken.
std::vector<RankRun> finish_job(const Job& job, const std::vector<pid_t>& pids,
                                bool* taken = nullptr) {
  std::vector<RankRun> runs(pids.size());
  for (size_t r = 0; r < pids.size(); ++r) {
    runs[r].code = recycle::testing::wait_tool(pids[r]);
    runs[r].err = read_file(job.err(static_cast<int>(r)));
    const std::string out = read_file(job.out(static_cast<int>(r)));
    const size_t end = out.find_last_not_of('\n');
    const size_t begin = end == std::string::npos ? 0 : out.rfind('\n', end) + 1;
    runs[r].last = nlohmann::json::parse(
        end == std::string::npos ? "" : out.substr(begin, end + 1 - begin), nullptr, false);
    if (taken) *taken = *taken || runs[r].err.find("already in use") != std::string::npos;
  }
  return runs;
}

// Runs every rank of `tool args` to its end (a job whose port was taken meanwhile runs again).
// `world`: the job's first ranks only (0: every one).
std::vector<RankRun> run_job(const Job& job, const std::string& tool, const std::string& args,
                             const std::string& paths = "", int world = 0) {
  for (int attempt = 0;; ++attempt) {
    const int port = recycle::testing::free_tcp_port();
    std::vector<pid_t> pids;
    for (int r = 0; r < (world > 0 ? world : job.world); ++r) {
      pids.push_back(spawn_rank(job, r, tool, args, port, 60, paths, world));
    }
    bool taken = false;
    std::vector<RankRun> runs = finish_job(job, pids, &taken);
    if (!taken || attempt == 2) return runs;
  }
}

std::string said(const std::vector<RankRun>& runs) {
  std::string s;
  for (size_t r = 0; r < runs.size(); ++r) {
    s +=
        "rank " + std::to_string(r) + ": exit " + std::to_string(runs[r].code) + "\n" + runs[r].err;
  }
  return s;
}

// A small real split: two classes of Fashion-MNIST, a width-8 ResNet-18 cut at 0.5, the same
// initial weights on every rank (--seed).
std::string build_args(const std::string& split, int limit) {
  return "--data fashion-mnist --split " + split + " --classes 0-1 --limit " +
         std::to_string(limit) + " --model resnet18 --width 8 --recycle 0.5 --batch 64 --sharded";
}

// Shard r's cache, read where the test sees it: the manifest and the split's index.
struct Shard {
  recycle::Manifest manifest;
  std::vector<recycle::IndexEntry> index;
};
Shard read_shard(const Job& job, int r, const std::string& split) {
  Shard s;
  std::unique_ptr<recycle::ActivationStore> store;
  recycle::StoreOptions so;
  so.read_only = true;
  EXPECT_OK(recycle::ActivationStore::open(job.rank_dir(r), so, &store));
  if (!store) return s;
  EXPECT_OK(store->read_manifest(&s.manifest));
  if (s.manifest.splits.count(split)) EXPECT_OK(store->read_index(split, &s.index));
  EXPECT_OK(store->verify_files());
  return s;
}

// Every rank's shard of `split` complete, holding the samples the rule gives it, `samples` in
// all; the path every rank was given is still empty where the test sees it.
void expect_shards(const Job& job, const std::string& split, int64_t samples) {
  int64_t total = 0;
  for (int r = 0; r < job.world; ++r) {
    const Shard s = read_shard(job, r, split);
    const recycle::SplitInfo& info = s.manifest.splits.at(split);
    EXPECT_TRUE(info.complete) << "rank " << r;
    EXPECT_EQ(info.shard.index, r);
    EXPECT_EQ(info.shard.count, job.world);
    EXPECT_EQ(info.shard.split_samples, samples);
    for (const recycle::IndexEntry& e : s.index) {
      EXPECT_EQ(recycle::shard_of(e.key, job.world), r) << "a sample of another shard";
    }
    total += static_cast<int64_t>(s.index.size());
  }
  EXPECT_EQ(total, samples);
  EXPECT_TRUE(fs::is_empty(job.cache())) << "a rank wrote outside its own directory";
}

}  // namespace

TEST(ShardedTools, RanksInTheirOwnMountNamespacesBuildRebuildTrainAndEvaluate) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (!can_unshare_mounts()) GTEST_SKIP() << "mount namespaces need root";
  const auto token = recycle::testing::test_job_token();
  Job job(2);
  auto runs = run_job(job, "recycle-build", build_args("train", 400));
  for (int r = 0; r < 2; ++r) ASSERT_EQ(runs[r].code, 0) << said(runs);
  EXPECT_EQ(runs[0].last.value("samples", -1), 400) << said(runs);
  EXPECT_EQ(runs[0].last.value("shards", -1), 2);
  EXPECT_GT(runs[0].last.value("computed", -1), 0);
  runs = run_job(job, "recycle-build", build_args("test", 200));
  for (int r = 0; r < 2; ++r) ASSERT_EQ(runs[r].code, 0) << said(runs);
  expect_shards(job, "train", 400);
  expect_shards(job, "test", 200);
  TempDir out;
  const auto inspect =
      recycle::testing::run_tool(out, "recycle-inspect", "--cache " + job.rank_dir(1));
  EXPECT_NE(inspect.out.find(", shard 1 of 2 (400 samples in all)"), std::string::npos)
      << inspect.out;

  // A rebuild computes and writes nothing on any rank.
  runs = run_job(job, "recycle-build", build_args("train", 400));
  for (int r = 0; r < 2; ++r) ASSERT_EQ(runs[r].code, 0) << said(runs);
  EXPECT_EQ(runs[0].last.value("computed", -1), 0) << said(runs);
  EXPECT_EQ(runs[0].last.value("index_written", -1), 0);
  EXPECT_EQ(runs[0].last.value("bytes", -1), 0);

  // Training: every rank on its own shard, the evaluation of both test shards summed.
  runs = run_job(job, "recycle-train", "--sharded --epochs 2 --batch 32 --eval-every-epoch");
  for (int r = 0; r < 2; ++r) ASSERT_EQ(runs[r].code, 0) << said(runs);
  EXPECT_EQ(runs[0].last.value("test_samples", -1), 200) << said(runs);
  EXPECT_EQ(runs[0].last.value("train_samples", -1), 400);
  EXPECT_GT(runs[0].last.value("test_acc", 0.0), 0.8) << said(runs);  // two distinct classes
  EXPECT_EQ(runs[0].last["epoch_test_acc"].size(), 2u);
  expect_shards(job, "train", 400);

  // Without --sharded the job needs one cache that every rank sees: here it fails.
  runs = run_job(job, "recycle-train", "--epochs 1");
  EXPECT_NE(runs[0].code, 0) << said(runs);
  EXPECT_NE(said(runs).find("built with recycle-build --sharded"), std::string::npos) << said(runs);
  Job plain(2);
  runs = run_job(plain, "recycle-build",
                 "--data fashion-mnist --split train --classes 0-1 --limit 200 --model resnet18 "
                 "--width 8 --recycle 0.5 --batch 64");
  EXPECT_NE(runs[1].code, 0) << said(runs);
  EXPECT_NE(said(runs).find("does not see rank 0's staging directory"), std::string::npos)
      << said(runs);
}

TEST(ShardedTools, ARankKilledMidBuildLeavesAShardTheRerunFinishes) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (!can_unshare_mounts()) GTEST_SKIP() << "mount namespaces need root";
  const auto token = recycle::testing::test_job_token();
  Job job(2);
  const int kLimit = 12000;  // every training sample of the two classes: 6,000 a shard
  const int port = recycle::testing::free_tcp_port();
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    // A short --timeout: rank 0 learns of rank 1's death by its heartbeat (no launcher here).
    pids.push_back(spawn_rank(job, r, "recycle-build", build_args("train", kLimit), port, 10));
  }
  // Rank 1 is killed once its build is well under way: its RocksDB write-ahead log (*.log)
  // holds at least 256 KB.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  auto logged = [&] {
    std::error_code ec;
    uintmax_t bytes = 0;
    for (const auto& e : fs::directory_iterator(job.rank_dir(1), ec)) {
      if (e.path().extension() == ".log") bytes += fs::file_size(e.path(), ec);
    }
    return bytes;
  };
  int status = 0;
  while (logged() < (256u << 10) && std::chrono::steady_clock::now() < deadline &&
         waitpid(pids[1], &status, WNOHANG) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_GE(logged(), 256u << 10) << read_file(job.err(1));
  kill(pids[1], SIGKILL);
  EXPECT_EQ(recycle::testing::wait_tool(pids[1]), -SIGKILL);
  const int code0 = recycle::testing::wait_tool(pids[0]);
  const std::string err0 = read_file(job.err(0));
  EXPECT_NE(code0, 0) << err0;
  EXPECT_NE(err0.find("rank 1"), std::string::npos) << err0;
  // Mid-build: the split incomplete, or not begun, or (killed before the cache's first write
  // was flushed) no manifest at all.
  bool mid_build = true;
  {
    std::unique_ptr<recycle::ActivationStore> store;
    recycle::StoreOptions so;
    so.read_only = true;
    recycle::Manifest killed;
    if (recycle::ActivationStore::open(job.rank_dir(1), so, &store).ok() &&
        store->read_manifest(&killed).ok() && killed.splits.count("train")) {
      mid_build = !killed.splits.at("train").complete;
    }
  }
  EXPECT_TRUE(mid_build) << "the kill came after rank 1's build: this test checks nothing";

  // The rerun: rank 0's shard is complete (nothing computed there), rank 1's is finished.
  const auto runs = run_job(job, "recycle-build", build_args("train", kLimit));
  for (int r = 0; r < 2; ++r) ASSERT_EQ(runs[r].code, 0) << said(runs);
  const nlohmann::json& shards = runs[0].last["per_shard"];
  ASSERT_EQ(shards.size(), 2u) << said(runs);
  EXPECT_EQ(shards[0].value("computed", -1), 0);
  // The rerun computes what the killed build had not made durable (a build writes its records
  // without a log and flushes its memtables when they fill and at the end, as one process does:
  // here, a shard of 9 MB, everything).
  if (mid_build) EXPECT_GT(shards[1].value("computed", -1), 0);
  expect_shards(job, "train", kLimit);
  std::cout << "killed rank 1 " << (mid_build ? "mid-build" : "after its shard was complete")
            << "; the rerun computed " << shards[1].value("computed", -1) << " records there"
            << std::endl;
}

// A sharded --rebuild that one rank refuses (its directory also holds a user's file) ends the job
// before any rank deletes anything: every shard keeps both splits. Training checks every
// shard's data against rank 0's before the first step: shards of other classes are refused.
TEST(ShardedTools, ARebuildOneRankRefusesDeletesNothingAndTrainingComparesTheShardsData) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (!can_unshare_mounts()) GTEST_SKIP() << "mount namespaces need root";
  const auto token = recycle::testing::test_job_token();
  Job job(2);
  auto runs = run_job(job, "recycle-build", build_args("train", 200));
  for (int r = 0; r < 2; ++r) ASSERT_EQ(runs[r].code, 0) << said(runs);
  runs = run_job(job, "recycle-build", build_args("test", 100));
  for (int r = 0; r < 2; ++r) ASSERT_EQ(runs[r].code, 0) << said(runs);
  recycle::testing::write_file(job.rank_dir(1) + "/notes.txt", "mine");
  runs = run_job(job, "recycle-build", build_args("train", 200) + " --rebuild");
  EXPECT_NE(runs[0].code, 0) << said(runs);
  EXPECT_NE(runs[1].code, 0) << said(runs);
  EXPECT_NE(said(runs).find("also holds notes.txt"), std::string::npos) << said(runs);
  expect_shards(job, "train", 200);
  expect_shards(job, "test", 100);
  fs::remove(job.rank_dir(1) + "/notes.txt");

  // Shard 0 rebuilt from other classes, with the same counts and weights; shard 1 kept.
  fs::copy(job.rank_dir(1), job.dir.file("kept-1"), fs::copy_options::recursive);
  runs = run_job(job, "recycle-build",
                 "--data fashion-mnist --split train --classes 2-3 --limit 200 --model resnet18 "
                 "--width 8 --recycle 0.5 --batch 64 --sharded --rebuild");
  for (int r = 0; r < 2; ++r) ASSERT_EQ(runs[r].code, 0) << said(runs);
  fs::remove_all(job.rank_dir(1));
  fs::rename(job.dir.file("kept-1"), job.rank_dir(1));
  runs = run_job(job, "recycle-train", "--sharded --epochs 1 --eval-split none");
  EXPECT_NE(runs[0].code, 0) << said(runs);
  EXPECT_NE(runs[1].code, 0) << said(runs);
  EXPECT_NE(said(runs).find("the ranks disagree on the"), std::string::npos) << said(runs);
  EXPECT_NE(said(runs).find("classes=0-1"), std::string::npos) << said(runs);

  // Swapped shards (rank 0 holds shard 1, rank 1 shard 0) are named as such.
  fs::rename(job.rank_dir(1), job.dir.file("swap"));
  fs::rename(job.rank_dir(0), job.rank_dir(1));
  fs::rename(job.dir.file("swap"), job.rank_dir(0));
  runs = run_job(job, "recycle-train", "--sharded --epochs 1 --eval-split none");
  EXPECT_NE(runs[0].code, 0) << said(runs);
  EXPECT_NE(said(runs).find("give each rank the cache of its own shard"), std::string::npos)
      << said(runs);
}

// Two ranks of a sharded build given one directory by different paths ("{rank}" in a part that
// ".." takes away) are refused before either writes, naming what happened, not "in use".
TEST(ShardedTools, RanksGivenOneDirectoryAreRefusedInOneLine) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const auto r = recycle::testing::run_tool(
      dir, "recycle-build",
      build_args("train", 100) + " --nproc 2 --threads 1 --cache " + dir.file("x/{rank}/../c"));
  EXPECT_NE(r.code, 0) << recycle::testing::describe(r);
  EXPECT_NE(r.err.find("were given one directory"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("in use"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("x/c")));
}

namespace {

// Rank r's cache at SUB of its directory, where the test sees it: every split's (key, label)
// entries and every record, verified.
struct Held {
  std::map<std::string, std::multiset<std::pair<recycle::Key, int64_t>>> entries;
  std::map<recycle::Key, std::string> records;
  std::map<std::string, recycle::SplitShard> shards;
};
Held held(const Job& job, int r, const std::string& sub) {
  Held h;
  std::unique_ptr<recycle::ActivationStore> store;
  recycle::StoreOptions so;
  so.read_only = true;
  EXPECT_OK(recycle::ActivationStore::open(job.rank_dir(r) + "/" + sub, so, &store));
  if (!store) return h;
  recycle::Manifest m;
  EXPECT_OK(store->read_manifest(&m));
  for (const auto& [name, info] : m.splits) {
    EXPECT_TRUE(info.complete) << sub << " of rank " << r;
    h.shards[name] = info.shard;
    std::vector<recycle::IndexEntry> index;
    EXPECT_OK(store->read_index(name, &index));
    for (const auto& e : index) h.entries[name].insert({e.key, e.label});
  }
  EXPECT_OK(store->for_each_record([&](const recycle::Key& k, std::string_view v) {
    h.records[k] = std::string(v);
    return true;
  }));
  EXPECT_OK(store->verify_files());
  return h;
}

}  // namespace

// A reshard 4 -> 2 -> 4, every rank in its own mount namespace: no rank sees another's
// directories, so the records move over c10d alone; the two shards hold exactly what the four
// held, and the four made again hold, each, exactly what it was built with.
TEST(ShardedTools, AReshardAcrossMountNamespacesMovesRecordsOnlyOverC10d) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (!can_unshare_mounts()) GTEST_SKIP() << "mount namespaces need root";
  const auto token = recycle::testing::test_job_token();
  Job job(4);
  const std::string c = job.cache();
  for (const std::string split : {"train", "test"}) {
    const auto runs = run_job(job, "recycle-build", build_args(split, 200), "--cache " + c + "/a");
    for (int r = 0; r < 4; ++r) ASSERT_EQ(runs[r].code, 0) << said(runs);
  }
  auto runs = run_job(job, "recycle-reshard", "--shards 2", "--cache " + c + "/a --to " + c + "/b");
  for (int r = 0; r < 4; ++r) ASSERT_EQ(runs[r].code, 0) << said(runs);
  EXPECT_EQ(runs[0].last.value("computed", -1), 0);
  EXPECT_GT(runs[2].last.value("bytes_sent", int64_t{0}), 0) << said(runs);
  EXPECT_FALSE(fs::exists(job.rank_dir(2) + "/b")) << "rank 2 is not a shard of 2";
  std::vector<Held> four;
  Held all_four, both;
  for (int r = 0; r < 4; ++r) {
    four.push_back(held(job, r, "a"));
    for (const auto& [name, e] : four.back().entries) {
      all_four.entries[name].insert(e.begin(), e.end());
    }
    all_four.records.insert(four.back().records.begin(), four.back().records.end());
  }
  for (int r = 0; r < 2; ++r) {
    const Held h = held(job, r, "b");
    for (const auto& [name, shard] : h.shards) {
      EXPECT_EQ(shard.index, r);
      EXPECT_EQ(shard.count, 2);
      for (const auto& e : h.entries.at(name)) EXPECT_EQ(recycle::shard_of(e.first, 2), r);
    }
    for (const auto& [name, e] : h.entries) both.entries[name].insert(e.begin(), e.end());
    both.records.insert(h.records.begin(), h.records.end());
  }
  EXPECT_EQ(both.entries, all_four.entries);
  EXPECT_TRUE(both.records == all_four.records);

  runs = run_job(job, "recycle-reshard", "--shards 4", "--cache " + c + "/b --to " + c + "/c");
  for (int r = 0; r < 4; ++r) ASSERT_EQ(runs[r].code, 0) << said(runs);
  for (int r = 0; r < 4; ++r) {
    const Held h = held(job, r, "c");
    EXPECT_EQ(h.entries, four[static_cast<size_t>(r)].entries) << "rank " << r;
    EXPECT_TRUE(h.records == four[static_cast<size_t>(r)].records) << "rank " << r;
    EXPECT_EQ(h.shards, four[static_cast<size_t>(r)].shards) << "rank " << r;
  }
  EXPECT_TRUE(fs::is_empty(c)) << "a rank wrote outside its own directory";
}

// Eight ranks, each in its own mount namespace (no rank sees another's directories): a sharded
// build of 8, training on the 8 shards, a reshard 8 -> 4 that 4 ranks train on with nothing
// computed, a reshard 4 -> 8 that gives each rank back its shard byte for byte, and a training
// in which one rank is killed (SIGKILL) mid-run: the rerun resumes from rank 0's checkpoint,
// which rank 0 alone can see and sends to the others, and ends as the run that was not killed.
TEST(ShardedTools, EightRanksBuildTrainReshardAndResumeAfterARankIsKilled) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (!can_unshare_mounts()) GTEST_SKIP() << "mount namespaces need root";
  const auto token = recycle::testing::test_job_token();
  Job job(8);
  const std::string c = job.cache();
  for (const auto& [split, samples] : {std::pair<std::string, int>{"train", 400}, {"test", 200}}) {
    const auto runs =
        run_job(job, "recycle-build", build_args(split, samples), "--cache " + c + "/a");
    for (int r = 0; r < 8; ++r) ASSERT_EQ(runs[r].code, 0) << said(runs);
  }
  const std::string train = "--sharded --epochs 30 --batch 8 --seed 5 --checkpoint-every 3";
  const auto whole =
      run_job(job, "recycle-train", train, "--cache " + c + "/a --checkpoint " + c + "/whole.ckpt");
  for (int r = 0; r < 8; ++r) ASSERT_EQ(whole[r].code, 0) << said(whole);
  EXPECT_EQ(whole[0].last.value("train_samples", -1), 400) << said(whole);
  EXPECT_EQ(whole[0].last.value("test_samples", -1), 200) << said(whole);
  EXPECT_GT(whole[0].last.value("test_acc", 0.0), 0.8) << said(whole);  // two distinct classes

  auto runs = run_job(job, "recycle-reshard", "--shards 4", "--cache " + c + "/a --to " + c + "/b");
  for (int r = 0; r < 8; ++r) ASSERT_EQ(runs[r].code, 0) << said(runs);
  EXPECT_EQ(runs[0].last.value("computed", -1), 0) << said(runs);
  runs = run_job(job, "recycle-train", "--sharded --epochs 2 --batch 16", "--cache " + c + "/b",
                 /*world=*/4);
  for (int r = 0; r < 4; ++r) ASSERT_EQ(runs[r].code, 0) << said(runs);
  EXPECT_EQ(runs[0].last.value("train_samples", -1), 400) << said(runs);
  EXPECT_EQ(runs[0].last.value("test_samples", -1), 200) << said(runs);
  runs = run_job(job, "recycle-reshard", "--shards 8", "--cache " + c + "/b --to " + c + "/c");
  for (int r = 0; r < 8; ++r) ASSERT_EQ(runs[r].code, 0) << said(runs);
  for (int r = 0; r < 8; ++r) {
    const Held was = held(job, r, "a"), is = held(job, r, "c");
    EXPECT_EQ(is.entries, was.entries) << "rank " << r;
    EXPECT_TRUE(is.records == was.records) << "rank " << r;
    EXPECT_EQ(is.shards, was.shards) << "rank " << r;
  }

  // Rank 5 killed once rank 0 has written its first checkpoint; the others end within their
  // --timeout (10 s) naming it; the rerun resumes.
  const std::string killed_paths = "--cache " + c + "/c --checkpoint " + c + "/k.ckpt";
  const int port = recycle::testing::free_tcp_port();
  std::vector<pid_t> pids;
  for (int r = 0; r < 8; ++r) {
    pids.push_back(spawn_rank(job, r, "recycle-train", train, port, 10, killed_paths));
  }
  const std::string first = job.rank_dir(0) + "/k.ckpt";
  int status = 0;
  while (!fs::exists(first) && waitpid(pids[0], &status, WNOHANG) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(fs::exists(first)) << read_file(job.err(0));
  kill(pids[5], SIGKILL);
  const auto killed = finish_job(job, pids);
  EXPECT_EQ(killed[5].code, -SIGKILL);
  EXPECT_NE(killed[0].code, 0) << "the kill came after the run: this test checks nothing\n"
                               << said(killed);
  EXPECT_FALSE(fs::exists(job.rank_dir(5) + "/k.ckpt")) << "only rank 0 writes the checkpoint";
  const auto resumed = run_job(job, "recycle-train", train, killed_paths);
  for (int r = 0; r < 8; ++r) ASSERT_EQ(resumed[r].code, 0) << said(resumed);
  const int64_t epochs = resumed[0].last.value("resumed_epochs", int64_t{-1});
  const int64_t batches = resumed[0].last.value("resumed_batches", int64_t{-1});
  std::cout << "killed rank 5; resumed in epoch " << epochs + 1 << " after its batch " << batches
            << "\n";
  EXPECT_GT(epochs * 1000 + batches, 0) << said(resumed);
  EXPECT_EQ(epochs + resumed[0].last.value("epochs", int64_t{0}), 30) << said(resumed);
  // The same steps from there: the last epoch's loss and the test accuracy (Gloo's sums over
  // eight ranks on one machine come out the same; across machines the claim is "within noise").
  const std::vector<double> all = whole[0].last["epoch_loss"];
  const std::vector<double> tail = resumed[0].last["epoch_loss"];
  ASSERT_FALSE(tail.empty()) << said(resumed);
  std::cout << "last epoch's loss " << tail.back() << " (unkilled " << all.back() << "), test "
            << resumed[0].last.value("test_acc", 0.0) << " (unkilled "
            << whole[0].last.value("test_acc", 0.0) << ")\n";
  EXPECT_NEAR(tail.back(), all.back(), 1e-6 + 1e-3 * std::abs(all.back())) << said(resumed);
  EXPECT_NEAR(resumed[0].last.value("test_acc", 0.0), whole[0].last.value("test_acc", 1.0), 0.01)
      << said(resumed);
}
