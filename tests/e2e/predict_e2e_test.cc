// End-to-end tests of recycle-predict with the real tools on small slices of Fashion-MNIST: a
// head trained with --eval-split test predicts the test split from the cache with the accuracy
// recycle-train printed; misses run the prefix and --write-back stores them; and bad inputs
// (a head file that is not one, a cache of another model, an output in a
// read-only directory, --write-back on a read-only cache) end with one line and lose nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/tool_runner.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using recycle::testing::count_lines;
using recycle::testing::describe;
using recycle::testing::have_fashion_mnist;
using recycle::testing::read_file;
using recycle::testing::TempDir;
using recycle::testing::ToolRun;
using recycle::testing::write_file;

ToolRun run(const TempDir& dir, const std::string& tool, const std::string& args) {
  return recycle::testing::run_tool(dir, tool, args);
}

// An encoder pretrained on classes 0-4, a cache of classes 5-9 at 50% (train 600, test 300)
// and a head trained from it, shared by the tests (made once: each tool run loads LibTorch).
class Predict : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!have_fashion_mnist()) return;
    dir_ = new TempDir;
    enc_ = dir_->file("encoder.pt");
    cache_ = dir_->file("cache");
    head_ = dir_->file("head.pt");
    ToolRun r = run(*dir_, "recycle-train",
                    "--data fashion-mnist --classes 0-4 --limit 1000 --width 8 --recycle 0 "
                    "--epochs 1 --eval-split none --save-model " + enc_);
    ASSERT_EQ(r.code, 0) << describe(r);
    for (const char* split : {"train --limit 600", "test --limit 300"}) {
      r = run(*dir_, "recycle-build",
              data() + " --weights " + enc_ + " --recycle 0.5 --codec fp32 " + "--cache " + cache_ +
                  " --json --split " + split);
      ASSERT_EQ(r.code, 0) << describe(r);
      if (build_out_.empty()) build_out_ = r.out, build_json_ = new json(r.last);
    }
    r = run(*dir_, "recycle-train",
            "--cache " + cache_ + " --epochs 2 --eval-split test --save-head " + head_ + " --json");
    ASSERT_EQ(r.code, 0) << describe(r);
    train_acc_ = r.last["test_acc"].get<double>();
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
    delete build_json_;
    build_json_ = nullptr;
  }
  void SetUp() override {
    if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    ASSERT_NE(dir_, nullptr);
    ASSERT_GE(train_acc_, 0.0) << "the shared setup failed";
  }
  static std::string data() { return "--data fashion-mnist --classes 5-9"; }
  // recycle-predict on the test split of the shared cache, with `more` flags.
  static std::string predict_args(const std::string& out, const std::string& more = "") {
    return "--cache " + cache_ + " --head " + head_ + " --weights " + enc_ + " " + data() +
           " --split test --out " + out + " --json " + more;
  }

  static TempDir* dir_;
  static std::string enc_, cache_, head_;
  static double train_acc_;
  static std::string build_out_;  // the train split's build: its stdout
  static json* build_json_;       // and its --json object
};
TempDir* Predict::dir_ = nullptr;
std::string Predict::enc_, Predict::cache_, Predict::head_, Predict::build_out_;
json* Predict::build_json_ = nullptr;
double Predict::train_acc_ = -1;

TEST_F(Predict, TestSplitFromTheCacheHasTheAccuracyTrainingPrinted) {
  TempDir work;
  const std::string out = work.file("pred.jsonl");
  const ToolRun r = run(work, "recycle-predict", predict_args(out, "--limit 300 --compare-full"));
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["samples"], 300);
  EXPECT_EQ(r.last["hits"], 300);
  EXPECT_EQ(r.last["misses"], 0);
  EXPECT_DOUBLE_EQ(r.last["accuracy"].get<double>(), train_acc_);
  EXPECT_GT(r.last["seconds"].get<double>(), 0);
  // fp32 records: the full model (no cache) predicts the same class for every sample.
  EXPECT_EQ(r.last["agree"], 300);
  EXPECT_LT(r.last["max_prob_diff"].get<double>(), 1e-3);

  // One JSON row per sample, in order, with what the report counted.
  std::istringstream rows(read_file(out));
  std::string line;
  int64_t n = 0, correct = 0;
  while (std::getline(rows, line)) {
    const json row = json::parse(line);
    EXPECT_EQ(row["row"], n);
    EXPECT_EQ(row["id"].get<std::string>().rfind("test/", 0), 0u) << line;  // its IDX position
    EXPECT_TRUE(row["hit"].get<bool>());
    ASSERT_EQ(row["probs"].size(), 5u);
    double sum = 0;
    for (const json& p : row["probs"]) sum += p.get<double>();
    EXPECT_NEAR(sum, 1.0, 1e-4);
    correct += row["pred"] == row["label"];
    ++n;
  }
  EXPECT_EQ(n, 300);
  EXPECT_DOUBLE_EQ(static_cast<double>(correct) / n, train_acc_);
}

TEST_F(Predict, MissesRunThePrefixAndWriteBackMakesThemHits) {
  TempDir work;
  fs::copy(cache_, work.file("cache"), fs::copy_options::recursive);
  const std::string cache = work.file("cache"), out = work.file("pred.csv");
  const std::string args = "--cache " + cache + " --head " + head_ + " --weights " + enc_ + " " +
                           data() + " --split test --limit 400 --top-k 2 --out " + out + " --json";
  ToolRun r = run(work, "recycle-predict", args + " --write-back --compare-full");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["hits"], 300);
  EXPECT_EQ(r.last["misses"], 100);
  EXPECT_EQ(r.last["written_back"], 100);
  EXPECT_EQ(r.last["agree"], 400);  // a miss is the full model; a hit an fp32 record of it
  const double accuracy = r.last["accuracy"];
  // CSV: a header and one row per sample; the misses are the last 100.
  const std::string csv = read_file(out);
  EXPECT_EQ(count_lines(csv), 401);
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "row,id,label,pred,class,hit,top1,p1,top2,p2");
  EXPECT_NE(csv.find("\n299,test/"), std::string::npos);
  EXPECT_NE(csv.find(",false,"), std::string::npos);

  r = run(work, "recycle-predict", args);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["hits"], 400);
  EXPECT_EQ(r.last["misses"], 0);
  EXPECT_DOUBLE_EQ(r.last["accuracy"].get<double>(), accuracy);
  EXPECT_EQ(read_file(out).find(",false,"), std::string::npos);

  // The cache is whole: the records written back are counted (as orphans no split indexes).
  r = run(work, "recycle-inspect", "--cache " + cache + " --verify --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["orphans"], 100);
  EXPECT_EQ(r.last["corrupt"], 0);
}

TEST_F(Predict, AHeadFileThatIsNotOneIsRefused) {
  TempDir work;
  const std::string out = work.file("pred.jsonl"), junk = work.file("junk.pt");
  write_file(out, "kept\n");
  write_file(junk, "not a head at all");
  for (const std::string& head : {junk, enc_, work.file("missing.pt")}) {
    const ToolRun r = run(work, "recycle-predict",
                          "--cache " + cache_ + " --head " + head + " --weights " + enc_ + " " +
                              data() + " --split test --limit 50 --out " + out);
    EXPECT_EQ(r.code, 1) << describe(r);
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(head), std::string::npos) << r.err;
    EXPECT_EQ(read_file(out), "kept\n");  // the old output is left as it was
  }
  const ToolRun r = run(work, "recycle-predict",
                        "--cache " + cache_ + " --head " + junk + " --weights " + enc_ + " " +
                            data() + " --out " + work.file("pred.txt"));
  EXPECT_EQ(r.code, 2) << describe(r);  // an output that is neither .jsonl nor .csv
  EXPECT_NE(r.err.find(".jsonl or .csv"), std::string::npos) << r.err;
}

TEST_F(Predict, AnOutputThatIsAnInputOrInsideTheCacheIsRefusedAndALinkIsWrittenThrough) {
  TempDir work;
  // The head under a .csv name, given as --head and as --out (directly, and through a link).
  const std::string head_csv = work.file("h.csv");
  fs::copy_file(head_, head_csv);
  const std::string head_bytes = read_file(head_csv);
  fs::create_symlink(head_csv, work.file("to-head.csv"));
  for (const std::string& out : {head_csv, work.file("to-head.csv")}) {
    const ToolRun r = run(work, "recycle-predict",
                          "--cache " + cache_ + " --head " + head_csv + " --weights " + enc_ + " " +
                              data() + " --split test --limit 50 --out " + out);
    EXPECT_EQ(r.code, 2) << describe(r);
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("is the --head file"), std::string::npos) << r.err;
    EXPECT_EQ(read_file(head_csv), head_bytes);
  }
  EXPECT_TRUE(fs::is_symlink(work.file("to-head.csv")));
  // Inside the cache.
  const std::string inside = cache_ + "/pred.jsonl";
  ToolRun r = run(work, "recycle-predict", predict_args(inside, "--limit 50"));
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("inside the cache"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(inside));
  // A link to an output elsewhere (relative, as ln -s makes one): the rows go to its target,
  // and the link stays a link.
  write_file(work.file("real.jsonl"), "old\n");
  fs::create_symlink("real.jsonl", work.file("out.jsonl"));
  r = run(work, "recycle-predict", predict_args(work.file("out.jsonl"), "--limit 50"));
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(fs::is_symlink(work.file("out.jsonl")));
  EXPECT_EQ(count_lines(read_file(work.file("real.jsonl"))), 50);
}

TEST_F(Predict, ACacheOfAnotherModelIsRefusedAsStale) {
  TempDir work;
  // Other weights, and a cache built from them: neither fits the head trained above.
  const std::string other = work.file("other.pt"), other_cache = work.file("other-cache");
  ToolRun r = run(work, "recycle-train",
                  "--data fashion-mnist --classes 0-4 --limit 200 --width 8 --recycle 0 "
                  "--epochs 1 --seed 7 --eval-split none --save-model " + other);
  ASSERT_EQ(r.code, 0) << describe(r);
  r = run(work, "recycle-build", data() + " --weights " + other + " --recycle 0.5 --codec fp32 " +
                                     "--cache " + other_cache + " --split test --limit 50");
  ASSERT_EQ(r.code, 0) << describe(r);
  const std::string out = work.file("pred.jsonl");
  // The head of the first cache on the other cache (with the other cache's weights).
  r = run(work, "recycle-predict", "--cache " + other_cache + " --head " + head_ + " --weights " +
                                       other + " " + data() + " --limit 50 --out " + out);
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("was trained for another cache"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("fingerprint"), std::string::npos) << r.err;
  // The first cache with weights it was not built from.
  r = run(work, "recycle-predict", "--cache " + cache_ + " --head " + head_ + " --weights " +
                                       other + " " + data() + " --limit 50 --out " + out);
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("was built for another setup"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  // A head trained at another split point of the same weights.
  const std::string r75 = work.file("r75"), head75 = work.file("head75.pt");
  r = run(work, "recycle-build", data() + " --weights " + enc_ + " --recycle 0.75 --codec fp32 " +
                                     "--cache " + r75 + " --split train --limit 100");
  ASSERT_EQ(r.code, 0) << describe(r);
  r = run(work, "recycle-train",
          "--cache " + r75 + " --epochs 1 --eval-split none --save-head " + head75);
  ASSERT_EQ(r.code, 0) << describe(r);
  r = run(work, "recycle-predict",
          "--cache " + cache_ + " --head " + head75 + " --weights " + enc_ + " " + data() +
              " --limit 50 --out " + out);
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("split point"), std::string::npos) << r.err;
}

// A directory nobody may write: a read-only tmpfs mount for root (who ignores modes), mode
// 0555 for anyone else. Holds a copy of `from` (a directory) when given.
class ReadOnlyDir {
 public:
  ReadOnlyDir(const std::string& path, const std::string& from) : path_(path) {
    fs::create_directories(path);
    if (::geteuid() == 0) {
      if (std::system(("mount -t tmpfs -o size=64m tmpfs " + path + " 2>/dev/null").c_str()) != 0) {
        return;
      }
      mounted_ = true;
      if (!from.empty()) fs::copy(from, path + "/cache", fs::copy_options::recursive);
      ok_ = std::system(("mount -o remount,ro " + path).c_str()) == 0;
    } else {
      if (!from.empty()) fs::copy(from, path + "/cache", fs::copy_options::recursive);
      ok_ = std::system(("chmod -R a-w " + path).c_str()) == 0;
    }
  }
  ~ReadOnlyDir() {
    if (mounted_) {
      (void)std::system(("umount " + path_).c_str());
    } else {
      (void)std::system(("chmod -R u+w " + path_).c_str());
    }
  }
  bool ok() const { return ok_; }

 private:
  std::string path_;
  bool mounted_ = false, ok_ = false;
};

TEST_F(Predict, AnOutputInAReadOnlyDirectoryFailsBeforeAnyWork) {
  TempDir work;
  ReadOnlyDir ro(work.file("ro"), "");
  if (!ro.ok()) GTEST_SKIP() << "cannot make a read-only directory here";
  const std::string out = work.file("ro") + "/pred.jsonl";
  const ToolRun r = run(work, "recycle-predict", predict_args(out, "--limit 50"));
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("cannot write " + out), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(Predict, WriteBackOnAReadOnlyCacheIsRefusedAndReadingStillWorks) {
  TempDir work;
  ReadOnlyDir ro(work.file("ro"), cache_);
  if (!ro.ok()) GTEST_SKIP() << "cannot make a read-only directory here";
  const std::string cache = work.file("ro") + "/cache", out = work.file("pred.jsonl");
  write_file(out, "kept\n");
  const std::string args = "--cache " + cache + " --head " + head_ + " --weights " + enc_ + " " +
                           data() + " --split test --limit 350 --out " + out + " --json";
  ToolRun r = run(work, "recycle-predict", args + " --write-back");
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--write-back"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(out), "kept\n");
  // Without --write-back the read-only cache serves: 300 hits, 50 misses.
  r = run(work, "recycle-predict", args);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["hits"], 300);
  EXPECT_EQ(r.last["misses"], 50);
}

// The cache records the weights file it was built from and its splits the --classes they were
// built with: predict needs no --classes, and gives the accuracy training printed. The weights
// file it records is named, never opened: without --weights predict asks for it in one line.
TEST_F(Predict, TheCacheSuppliesTheClassesAndNamesTheWeightsItDoesNotOpen) {
  TempDir work;
  const std::string out = work.file("pred.csv");
  const std::string enc = std::filesystem::path(enc_).lexically_normal().string();
  ToolRun r = run(work, "recycle-predict",
                  "--cache " + cache_ + " --head " + head_ +
                      " --data fashion-mnist --split test --limit 300 --out " + out + " --json");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--weights FILE is required: cache " + cache_ +
                       " records that it was built from --weights " + enc),
            std::string::npos) << r.err;
  r = run(work, "recycle-predict",
          "--cache " + cache_ + " --head " + head_ + " --weights " + enc_ +
              " --data fashion-mnist --split test --limit 300 --out " + out + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["hits"], 300);
  EXPECT_DOUBLE_EQ(r.last["accuracy"].get<double>(), train_acc_);
  r = run(work, "recycle-inspect", "--cache " + cache_ + " --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["weights_file"], enc);
  EXPECT_EQ(r.last["prefix_precision"], "fp32");  // said, though the manifest leaves fp32 out
  EXPECT_EQ(r.last["classifier"], "new");  // weights of classes 0-4, a cache of 5-9

  // A cache built without --weights records none: the flag is asked for, in one line.
  const std::string bare = work.file("bare-cache");
  r = run(work, "recycle-build",
          "--data fashion-mnist --split test --limit 50 --width 4 --recycle 0.5 "
          "--cache " +
              bare);
  ASSERT_EQ(r.code, 0) << describe(r);
  r = run(work, "recycle-predict", "--cache " + bare + " --head " + head_ +
                                       " --data fashion-mnist --limit 50 --out " + out);
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--weights FILE is required: cache " + bare + " does not record"),
            std::string::npos) << r.err;
}

// A build into a cache that records its weights file, without --weights, asks for the file: it
// does not suggest --rebuild, which would replace the records with a random prefix's.
TEST_F(Predict, ABuildWithoutTheWeightsTheCacheRecordsAsksForThemNotForRebuild) {
  TempDir work;
  ToolRun r = run(work, "recycle-build", data() + " --split test --limit 300 --recycle 0.5 "
                                         "--codec fp32 --width 8 --cache " + cache_);
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("was built from --weights " +
                       std::filesystem::path(enc_).lexically_normal().string()),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("give --weights FILE"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--rebuild"), std::string::npos) << r.err;
  r = run(work, "recycle-inspect", "--cache " + cache_ + " --verify --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["corrupt"], 0);
}

// The build measured the prefix's share of the forward on its first chunks and printed what
// the cache should buy; the speedups follow from the share.
TEST_F(Predict, TheBuildReportsThePrefixShareAndTheSpeedupItImplies) {
  ASSERT_NE(build_json_, nullptr);
  const json& j = *build_json_;
  ASSERT_TRUE(j.contains("prefix_share")) << j.dump();
  const double s = j["prefix_share"].get<double>();
  EXPECT_GT(s, 0.0);
  EXPECT_LT(s, 1.0);
  EXPECT_NEAR(j["expected_speedup_vs_full"].get<double>(), 1 / (1 - s), 1e-9);
  EXPECT_NEAR(j["expected_speedup_vs_online"].get<double>(), (s + 3 * (1 - s)) / (3 * (1 - s)),
              1e-9);
  EXPECT_NE(build_out_.find("% of the model's forward time (measured); expected epoch speedup"),
            std::string::npos) << build_out_;
  EXPECT_EQ(j["files_left_out"], 0);
}

TEST(PredictTool, HelpPrintsUsageAndMissingFlagsAreBadUsage) {
  TempDir dir;
  ToolRun r = run(dir, "recycle-predict", "--help");
  EXPECT_EQ(r.code, 0) << describe(r);
  for (const char* flag : {"--cache", "--head", "--weights", "--out", "--write-back", "--json"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
  }
  r = run(dir, "recycle-predict", "--cache c --weights w.pt --data fashion-mnist --out p.csv");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--head"), std::string::npos) << r.err;
  r = run(dir, "recycle-predict", "--cache c --head h.pt --weights w.pt --out p.csv");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("--data"), std::string::npos) << r.err;
  // A negative count names its bound in words (CLI11's own check printed a 309-digit one).
  r = run(dir, "recycle-predict",
          "--cache c --head h.pt --data fashion-mnist --out p.csv --top-k -1");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("must be a whole number, 0 or more, got -1"), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 200u) << r.err;
}

}  // namespace
