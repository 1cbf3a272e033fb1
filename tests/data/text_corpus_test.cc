// The text corpus: one mail as one line (engine/data/mail_text.h), the SpamAssassin task's
// files (engine/data/spam_assassin.h) on a small corpus written here, tsv:DIR datasets, and
// recycle-corpus's command line.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/data/mail_text.h"
#include "engine/data/spam_assassin.h"
#include "engine/data/tsv_reader.h"
#include "tests/test_util.h"
#include "tests/tool_runner.h"

namespace recycle {
namespace {

using testing::count_lines;
using testing::describe;
using testing::read_file;
using testing::run_tool;
using testing::ToolRun;
using testing::TempDir;
using testing::write_file;
namespace fs = std::filesystem;

TEST(MailText, KeepsSubjectAndFromUnfoldedAndDropsOtherHeaders) {
  const std::string mail =
      "Received: from host (x.example [10.0.0.1])\r\n"
      "\tby relay; Thu, 22 Aug 2002\r\n"
      "Subject: Cheap\r\n"
      "  pills  now\r\n"
      "FROM: Bob <bob@example.com>\r\n"
      "Subject: a second subject is ignored\r\n"
      "X-Mailer: something\r\n"
      "\r\n"
      "Hello,\r\n\r\n  buy\tnow!\r\n";
  const MailParts parts = split_mail(mail);
  EXPECT_EQ(parts.subject, "Cheap pills now");
  EXPECT_EQ(parts.from, "Bob <bob@example.com>");
  EXPECT_EQ(parts.body, "Hello,\r\n\r\n  buy\tnow!\r\n");
  EXPECT_EQ(mail_to_text(mail, 1000),
            "subject: Cheap pills now | from: Bob <bob@example.com> | Hello, buy now!");
}

TEST(MailText, AMailWithoutBlankLineOrHeadersStillGivesALine) {
  EXPECT_EQ(mail_to_text("Subject: only headers\n", 100), "subject: only headers | from: |");
  const MailParts parts = split_mail("\nbody only");
  EXPECT_EQ(parts.subject, "");
  EXPECT_EQ(parts.body, "body only");
  // "Subjects:" is another header, not Subject.
  EXPECT_EQ(split_mail("Subjects: no\n\nx").subject, "");
}

TEST(MailText, FoldsWhitespaceAndControlBytes) {
  EXPECT_EQ(fold_whitespace("  a\t\tb\r\n\x01 c\x7f "), "a b c");
  EXPECT_EQ(fold_whitespace(""), "");
  EXPECT_EQ(fold_whitespace(" \n\t"), "");
  EXPECT_EQ(fold_whitespace("\xc3\xa9t\xc3\xa9  x"), "\xc3\xa9t\xc3\xa9 x");
}

// Property: a cut is at most max_bytes, a prefix of the text, and valid UTF-8 whenever the text
// is; it drops less than one character.
TEST(MailText, CutsOnlyOnCharacterBoundaries) {
  const std::string text = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z";  // a é € 😀 z: 1+2+3+4+1 bytes
  ASSERT_TRUE(is_valid_utf8(text));
  for (size_t max = 0; max <= text.size() + 1; ++max) {
    const std::string cut = cut_utf8(text, max);
    EXPECT_LE(cut.size(), max);
    EXPECT_EQ(text.compare(0, cut.size(), cut), 0) << max;
    EXPECT_TRUE(is_valid_utf8(cut)) << max;
    EXPECT_GT(cut.size() + 4, std::min(max, text.size())) << max;
  }
  EXPECT_EQ(cut_utf8(text, 2), "a");
  EXPECT_EQ(cut_utf8(text, 3), "a\xc3\xa9");
  EXPECT_THROW(mail_to_text("x", 0), std::invalid_argument);
}

// A small corpus in the published layout: one folder per group, one JSON file per message.
class SmallCorpus {
 public:
  SmallCorpus() {
    for (const SpamAssassinGroup& g : spam_assassin_groups()) {
      fs::create_directories(dir_.path() / "data" / g.name);
      for (int id = 1; id <= 10; ++id) {
        add(g.name, id,
            "Subject: " + g.label + " " + std::to_string(id) + "\nFrom: x\n\nbody of " + g.name);
      }
    }
  }
  void add(const std::string& group, int id, const std::string& text) {
    char name[32];
    std::snprintf(name, sizeof name, "%05d.abc.json", id);
    char number[16];
    std::snprintf(number, sizeof number, "%05d", id);
    write_file((dir_.path() / "data" / group / name).string(),
               nlohmann::json{{"id", number}, {"group", group}, {"text", text}}.dump());
  }
  std::string data() const { return (dir_.path() / "data").string(); }
  std::string out() const { return (dir_.path() / "out").string(); }
  std::string file(const std::string& rel) const { return (dir_.path() / rel).string(); }

 private:
  TempDir dir_;
};

SpamAssassinOptions small_options() {
  SpamAssassinOptions o;
  o.check_counts = false;
  return o;
}

TEST(SpamAssassin, WritesBothTasksWithAFixedTestSplitInAMixedOrder) {
  SmallCorpus corpus;
  const std::vector<TsvFileCount> counts =
      write_spam_assassin_task(corpus.data(), corpus.out(), small_options());
  ASSERT_EQ(counts.size(), 4u);
  // pretrain: 3 groups x 10 messages, ids 5 and 10 of each are test samples.
  EXPECT_EQ(counts[0].samples, 24);
  EXPECT_EQ(counts[1].samples, 6);
  EXPECT_EQ(counts[2].samples, 16);
  EXPECT_EQ(counts[3].samples, 4);
  EXPECT_EQ(counts[1].per_label, (std::vector<std::pair<std::string, int64_t>>{
                                     {"easy-ham", 2}, {"hard-ham", 2}, {"spam", 2}}));
  const TsvData test = read_tsv_file(corpus.out() + "/finetune/test.tsv");
  EXPECT_EQ(test.class_names, (std::vector<std::string>{"ham", "spam"}));
  for (const std::string& text : test.texts) {
    EXPECT_TRUE(text.find(" 5 |") != std::string::npos || text.find(" 10 |") != std::string::npos)
        << text;
  }
  // The classes are mixed, not one block after another, and a rerun writes the same bytes.
  const TsvData train = read_tsv_file(corpus.out() + "/pretrain/train.tsv");
  int changes = 0;
  for (size_t i = 1; i < train.labels.size(); ++i) {
    changes += train.labels[i] != train.labels[i - 1];
  }
  EXPECT_GT(changes, 2);
  const std::string before = read_file(corpus.out() + "/pretrain/train.tsv");
  write_spam_assassin_task(corpus.data(), corpus.out(), small_options());
  EXPECT_EQ(read_file(corpus.out() + "/pretrain/train.tsv"), before);
}

TEST(SpamAssassin, RefusesABadCorpusAndKeepsTheFilesOfAnEarlierRun) {
  SmallCorpus corpus;
  write_spam_assassin_task(corpus.data(), corpus.out(), small_options());
  const std::string before = read_file(corpus.out() + "/pretrain/train.tsv");
  const auto error = [&] {
    try {
      write_spam_assassin_task(corpus.data(), corpus.out(), small_options());
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // A file in the last group read (spam-2) fails: nothing of the first task was rewritten.
  write_file(corpus.file("data/spam-2/00011.abc.json"), "{not json");
  EXPECT_NE(error().find("00011.abc.json: not JSON"), std::string::npos) << error();
  corpus.add("spam-2", 11, "ok");
  write_file(corpus.file("data/spam-2/00012.abc.json"),
             R"({"id":"00012","group":"spam-1","text":"x"})");
  EXPECT_NE(error().find("group 'spam-1' in folder spam-2"), std::string::npos) << error();
  write_file(corpus.file("data/spam-2/00012.abc.json"),
             R"({"id":"12a","group":"spam-2","text":"x"})");
  EXPECT_NE(error().find("id '12a' is not a decimal number"), std::string::npos) << error();
  write_file(corpus.file("data/spam-2/00012.abc.json"), R"({"id":"00012","group":"spam-2"})");
  EXPECT_NE(error().find("no string field 'text'"), std::string::npos) << error();
  EXPECT_EQ(read_file(corpus.out() + "/pretrain/train.tsv"), before);
  // The published sizes are checked by default.
  fs::remove(corpus.file("data/spam-2/00012.abc.json"));
  EXPECT_THROW(write_spam_assassin_task(corpus.data(), corpus.out()), std::runtime_error);
  fs::remove_all(corpus.file("data/hard-ham-1"));
  EXPECT_NE(error().find("hard-ham-1: no such folder"), std::string::npos) << error();
}

TEST(TsvDirectory, ReadsOneFilePerSplit) {
  TempDir dir;
  write_file(dir.file("train.tsv"), "ham\ta\nspam\tb\nham\tc\n");
  write_file(dir.file("test.tsv"), "spam\td\nham\te\n");
  DatasetOptions o;
  o.spec = "tsv:" + dir.path().string();
  o.split = "train";
  EXPECT_EQ(load_dataset(o).size(), 3u);
  o.split = "test";
  const Dataset test = load_dataset(o);
  EXPECT_EQ(test.texts, (std::vector<std::string>{"d", "e"}));
  EXPECT_EQ(test.class_names, (std::vector<std::string>{"ham", "spam"}));
  o.split = "valid";
  try {
    load_dataset(o);
    FAIL() << "no error for a missing split file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("without valid.tsv"), std::string::npos) << e.what();
  }
  o.split = "../train";
  EXPECT_THROW(load_dataset(o), std::invalid_argument);
  // tsv:FILE reads the file whatever the split is called.
  o.spec = "tsv:" + dir.file("test.tsv");
  EXPECT_EQ(load_dataset(o).size(), 2u);
}

TEST(RecycleCorpus, RefusesACorpusOfOtherSizesWithOneLineAndWritesNothing) {
  SmallCorpus corpus;
  TempDir io;
  // The published sizes do not hold for this small corpus.
  ToolRun r = run_tool(io, "recycle-corpus",
                       "spam-assassin --corpus " + corpus.data() + " --out " + corpus.out());
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("10 messages, the corpus holds 2500"), std::string::npos) << describe(r);
  EXPECT_EQ(count_lines(r.err), 1) << describe(r);
  EXPECT_FALSE(fs::exists(corpus.out()));
  r = run_tool(io, "recycle-corpus", "spam-assassin --out " + corpus.out());
  EXPECT_EQ(r.code, 2) << describe(r);
  r = run_tool(io, "recycle-corpus", "");
  EXPECT_EQ(r.code, 2) << describe(r);
}

}  // namespace
}  // namespace recycle
