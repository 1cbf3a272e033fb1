// End-to-end tests for text: recycle-build, recycle-train and recycle-inspect on small TSV files
// these tests write (repeated lines, two classes told apart by their words), with a small
// transformer so each run takes about a second.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/tool_runner.h"

namespace {

using recycle::testing::count_lines;
using recycle::testing::read_file;
using recycle::testing::describe;
using recycle::testing::TempDir;
using recycle::testing::ToolRun;
using recycle::testing::write_file;

// One thread: these runs are tiny, and several threads only contend on a loaded machine.
const std::string kModel =
    "--threads 1 --model transformer:d_model=16,layers=4,heads=2,ff=32,max_tokens=48";

ToolRun run(const TempDir& dir, const std::string& tool, const std::string& args) {
  return recycle::testing::run_tool(dir, tool, args);
}

// `unique` distinct texts, each `copies` times: spam mentions money, ham a meeting; labels are
// class names.
std::string corpus(int unique, int copies, int salt) {
  std::string tsv;
  for (int c = 0; c < copies; ++c) {
    for (int i = 0; i < unique; ++i) {
      const bool spam = i % 2 == 0;
      tsv += spam
                 ? "spam\tWIN cash now, offer " + std::to_string(i * 7 + salt) + " $$$ free money\n"
                 : "ham\tmeeting notes for monday, item " + std::to_string(i * 7 + salt) + "\n";
    }
  }
  return tsv;
}

// Repeated lines share records; a rerun computes nothing; the head trains from the cache and
// is evaluated on a test split; the cache verifies; full fine-tuning runs from raw text.
TEST(TextTools, RepeatedLinesShareRecordsAndTheHeadTrains) {
  TempDir dir;
  write_file(dir.file("train.tsv"), corpus(24, 3, 0));
  write_file(dir.file("test.tsv"), corpus(10, 1, 3));
  const std::string cache = " --cache " + dir.file("cache") + " --json";
  ToolRun r = run(dir, "recycle-build",
                  "--data tsv:" + dir.file("train.tsv") + " " + kModel + " --recycle 0.5" + cache);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["samples"], 72);
  EXPECT_EQ(r.last["unique"], 24);
  EXPECT_LT(r.last["unique"].get<int64_t>(), r.last["samples"].get<int64_t>());
  EXPECT_EQ(r.last["computed"], 24);
  EXPECT_EQ(r.last["records"], 24);
  r = run(dir, "recycle-build", "--data tsv:" + dir.file("test.tsv") + " --split test " + kModel +
                                    " --recycle 0.5" + cache);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["samples"], 10);
  r = run(dir, "recycle-build",
          "--data tsv:" + dir.file("train.tsv") + " " + kModel + " --recycle 0.5" + cache);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["computed"], 0);
  EXPECT_EQ(r.last["skipped"], 72);

  r = run(dir, "recycle-inspect", "--verify" + cache);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["corrupt"], 0);
  EXPECT_EQ(r.last["keyer"], "text");
  EXPECT_EQ(r.last["records"], 24 + 10);
  ASSERT_EQ(r.last["record_layout"].size(), 2u);
  EXPECT_EQ(r.last["record_layout"][0]["name"], "hidden");
  EXPECT_EQ(r.last["record_layout"][1]["name"], "length");
  EXPECT_EQ(r.last["record_layout"][1]["dtype"], "int64");

  r = run(dir, "recycle-train",
          "--epochs 6 --optimizer adamw --lr 0.01 --batch 16 --seed 1 --threads 1" + cache);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["epochs"], 6);
  // The classes differ in every other word: a head that learnt nothing scores 0.5.
  EXPECT_GE(r.last["test_acc"].get<double>(), 0.9) << describe(r);
  // The text head in bf16 mixed precision (its attention and linear layers under autocast).
  r = run(
      dir, "recycle-train",
      "--epochs 6 --optimizer adamw --lr 0.01 --batch 16 --seed 1 --threads 1 --precision bf16" +
          cache);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["precision"], "bf16");
  EXPECT_GE(r.last["test_acc"].get<double>(), 0.8) << describe(r);

  // --preload and --alternate-preload need one record shape: refused with one line.
  for (const char* flag : {"--preload", "--alternate-preload"}) {
    r = run(dir, "recycle-train", std::string("--epochs 1 --threads 1 ") + flag + cache);
    EXPECT_NE(r.code, 0);
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(std::string(flag) + " needs records of one shape"), std::string::npos)
        << r.err;
  }

  // Full fine-tuning from raw text (the default model for text, cut to 32 tokens).
  r = run(dir, "recycle-train",
          "--data tsv:" + dir.file("train.tsv") +
              " --recycle 0 --max-tokens 32 --epochs 1 --eval-split none --threads 1 --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["mode"], "full");
  EXPECT_EQ(r.last["train_samples"], 72);
}

// The keyer's normalisation decides what counts as repeated, and it is part of the identity.
TEST(TextTools, KeyerNormalisationMergesAndIsPartOfTheIdentity) {
  TempDir dir;
  write_file(dir.file("t.tsv"),
             "a\tHello  World\n"
             "a\thello world\n"
             "b\t  Hello World \n"
             "b\tsomething else\n");
  const std::string base =
      "--data tsv:" + dir.file("t.tsv") + " " + kModel + " --recycle 0.25 --json";
  ToolRun r = run(dir, "recycle-build", base + " --cache " + dir.file("exact"));
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["unique"], 4);
  r = run(dir, "recycle-build", base + " --keyer text:space,lower --cache " + dir.file("norm"));
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["unique"], 2);
  EXPECT_EQ(r.last["records"], 2);
  // Another normalisation on the same cache is another identity: refused, nothing lost.
  r = run(dir, "recycle-build", base + " --keyer text:space --cache " + dir.file("norm"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("keyer"), std::string::npos) << r.err;
  r = run(dir, "recycle-inspect", "--verify --json --cache " + dir.file("norm"));
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["records"], 2);
  EXPECT_EQ(r.last["corrupt"], 0);
}

// Hostile input: one clear line, a non-zero exit, and the cache built before is intact.
TEST(TextTools, HostileInputIsRefusedAndNothingStoredIsLost) {
  TempDir dir;
  write_file(dir.file("good.tsv"), corpus(6, 2, 0));
  const std::string cache = " --cache " + dir.file("cache");
  const std::string flags = " " + kModel + " --recycle 0.5 --json" + cache;
  ToolRun r = run(dir, "recycle-build", "--data tsv:" + dir.file("good.tsv") + flags);
  ASSERT_EQ(r.code, 0) << describe(r);

  struct Case {
    std::string name, contents, extra, says;
  };
  const std::vector<Case> cases = {
      {"utf8.tsv", "spam\tok\nham\tbad \xff\xfe bytes\n", "", "UTF-8"},
      {"empty.tsv", "spam\tok\nham\t\n", "", "empty"},
      {"long.tsv", "spam\tok\nham\t" + std::string((1 << 20) + 10, 'x') + "\n", "", "long"},
      {"spaces.tsv", "spam\tok\nham\t \t  \n", " --keyer text:space", "normalisation"},
      // Classes other than the cache's (a label that is not one of its classes).
      {"classes.tsv", "spam\tok\neggs\tother\nham\tfine\n", "", "classes"},
  };
  for (const Case& c : cases) {
    write_file(dir.file(c.name), c.contents);
    r = run(dir, "recycle-build", "--data tsv:" + dir.file(c.name) + c.extra + flags);
    EXPECT_NE(r.code, 0) << c.name << "\n" << describe(r);
    EXPECT_EQ(count_lines(r.err), 1) << c.name << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.name << "\n" << r.err;
  }
  // An image model on text data, and a text option beside an image model.
  r = run(dir, "recycle-build", "--data tsv:" + dir.file("good.tsv") + " --model resnet18 "
                                "--recycle 0.5" + cache);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("needs image data"), std::string::npos) << r.err;

  r = run(dir, "recycle-inspect", "--verify --json" + cache);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["records"], 6);
  EXPECT_EQ(r.last["corrupt"], 0);
  EXPECT_EQ(r.last["splits"]["train"]["complete"], true);
  EXPECT_EQ(r.last["splits"]["train"]["samples"], 12);
}

// recycle-predict on a text cache: hits read the stored hidden states, misses run the prefix,
// chunks mix both and texts of different lengths, --write-back makes the misses hits, and the
// predictions are the full model's.
TEST(TextTools, PredictServesATextCacheWithHitsAndMisses) {
  TempDir dir;
  write_file(dir.file("train.tsv"), corpus(24, 3, 0));
  write_file(dir.file("test.tsv"), corpus(10, 1, 3));
  write_file(dir.file("mixed.tsv"), corpus(10, 1, 3) + corpus(10, 1, 5));  // 10 new texts
  const std::string enc = dir.file("enc.pt"), head = dir.file("head.pt");
  ToolRun r = run(dir, "recycle-train", "--data tsv:" + dir.file("train.tsv") + " " + kModel +
                                            " --recycle 0 --epochs 1 --eval-split none "
                                            "--save-model " + enc);
  ASSERT_EQ(r.code, 0) << describe(r);
  const std::string cache = " --cache " + dir.file("cache");
  const std::string built = " --weights " + enc + " --recycle 0.5 --codec fp32 --threads 1";
  for (const char* split : {"train", "test"}) {
    r = run(dir, "recycle-build", "--data tsv:" + dir.file(std::string(split) + ".tsv") +
                                      " --split " + split + built + cache);
    ASSERT_EQ(r.code, 0) << describe(r);
  }
  r = run(dir, "recycle-train",
          "--epochs 6 --optimizer adamw --lr 0.01 --batch 16 --seed 1 --threads 1 --json "
          "--save-head " + head + cache);
  ASSERT_EQ(r.code, 0) << describe(r);
  const double trained = r.last["test_acc"];
  EXPECT_GE(trained, 0.9) << describe(r);

  const std::string predict = "--head " + head + " --weights " + enc + " --threads 1 --json" +
                              cache + " --data tsv:";
  r = run(dir, "recycle-predict", predict + dir.file("test.tsv") + " --out " + dir.file("p.jsonl"));
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["hits"], 10);
  EXPECT_EQ(r.last["misses"], 0);
  EXPECT_DOUBLE_EQ(r.last["accuracy"].get<double>(), trained);
  EXPECT_EQ(count_lines(read_file(dir.file("p.jsonl"))), 10);

  // Chunks of 4: the 10 cached texts, then 10 new ones (a chunk holds both at 8..11).
  const std::string mixed = predict + dir.file("mixed.tsv") + " --batch 4 --out " +
                            dir.file("m.csv");
  r = run(dir, "recycle-predict", mixed + " --write-back --compare-full");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["hits"], 10);
  EXPECT_EQ(r.last["misses"], 10);
  EXPECT_EQ(r.last["written_back"], 10);
  EXPECT_EQ(r.last["agree"], 20);
  EXPECT_LT(r.last["max_prob_diff"].get<double>(), 1e-4);
  const double accuracy = r.last["accuracy"];
  EXPECT_GE(accuracy, 0.9) << describe(r);
  const std::string first = read_file(dir.file("m.csv"));
  EXPECT_EQ(count_lines(first), 21);

  r = run(dir, "recycle-predict", mixed);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["hits"], 20);
  EXPECT_EQ(r.last["misses"], 0);
  EXPECT_DOUBLE_EQ(r.last["accuracy"].get<double>(), accuracy);
  // Row by row, the written-back misses predict what they predicted as misses.
  auto preds = [](const std::string& csv) {  // the pred column (row,id,label,pred,...)
    std::vector<std::string> out;
    std::istringstream lines(csv);
    std::string line;
    std::getline(lines, line);  // the header
    while (std::getline(lines, line)) {
      size_t at = 0;
      for (int field = 0; field < 3; ++field) at = line.find(',', at) + 1;
      out.push_back(line.substr(at, line.find(',', at) - at));
    }
    return out;
  };
  EXPECT_EQ(preds(read_file(dir.file("m.csv"))), preds(first));
  EXPECT_EQ(preds(first).size(), 20u);

  r = run(dir, "recycle-inspect", "--verify --json" + cache);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.last["corrupt"], 0);
  EXPECT_EQ(r.last["orphans"], 10);
}

}  // namespace
