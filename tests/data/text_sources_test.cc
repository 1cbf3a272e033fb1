// jsonl:PATH and csv:PATH (engine/data/source_jsonl.cc, source_csv.cc, text_labels.h).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "tests/test_util.h"

namespace recycle {
namespace {

using testing::error_of;
using testing::TempDir;
using testing::write_file;

Dataset load(const std::string& spec, const std::string& text_field = "text",
             const std::string& label_field = "label") {
  DatasetOptions o;
  o.spec = spec;
  o.text_field = text_field;
  o.label_field = label_field;
  return load_dataset(o);
}

TEST(Jsonl, StringLabelsMapToSortedIdsAndIntegersStayIds) {
  TempDir dir;
  write_file(dir.file("a.jsonl"),
             "{\"text\": \"good film\", \"label\": \"pos\"}\n"
             "\n"
             "{\"label\": \"neg\", \"text\": \"bad \\u00e9\", \"extra\": 1}\r\n"
             "{\"text\": \"ok\", \"label\": \"mid\"}");
  Dataset d = load("jsonl:" + dir.file("a.jsonl"));
  EXPECT_TRUE(d.is_text);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"mid", "neg", "pos"}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(d.texts[1], "bad \xc3\xa9");
  EXPECT_EQ(d.ids, (std::vector<std::string>{"line/1", "line/3", "line/4"}));
  write_file(dir.file("b.jsonl"), "{\"body\": \"x\", \"y\": 3}\n{\"body\": \"z\", \"y\": 0}\n");
  d = load("jsonl:" + dir.file("b.jsonl"), "body", "y");
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"0", "1", "2", "3"}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{3, 0}));
  EXPECT_NE(d.description.find("text-field=body label-field=y"), std::string::npos);
}

TEST(Jsonl, BadLinesAreNamedByFileAndLine) {
  TempDir dir;
  const std::string f = dir.file("bad.jsonl");
  auto expect_error = [&](const std::string& content, const std::string& part) {
    write_file(f, content);
    const std::string e = error_of([&] { load("jsonl:" + f); });
    EXPECT_NE(e.find(part), std::string::npos) << e;
  };
  expect_error("{\"text\": \"a\", \"label\": 1}\n{\"text\": \"a\",\n", f + ":2: not JSON");
  expect_error("[1, 2]\n", f + ":1: not a JSON object");
  expect_error("{\"label\": 1}\n", f + ":1: no string field 'text' (--text-field)");
  expect_error("{\"text\": \"a\"}\n", f + ":1: no field 'label'");
  expect_error("{\"text\": \"a\", \"label\": -1}\n", "neither a non-negative integer");
  expect_error("{\"text\": \"a\", \"label\": 1.5}\n", "neither a non-negative integer");
  expect_error("{\"text\": \"\", \"label\": 1}\n", f + ":1: empty text");
  expect_error("\n\n", f + ": has no samples");
  // Latin-1 bytes: named as an encoding problem, the bytes not echoed.
  write_file(f, "{\"text\": \"caf\xe9\", \"label\": 1}\n");
  const std::string e = error_of([&] { load("jsonl:" + f); });
  EXPECT_NE(e.find(f + ":1: not valid UTF-8 (at byte 14;"), std::string::npos) << e;
  EXPECT_EQ(e.find('\xe9'), std::string::npos) << e;
}

TEST(Csv, QuotedFieldsEmbeddedNewlinesAndHeaderColumns) {
  TempDir dir;
  write_file(dir.file("train.csv"),
             "\xEF\xBB\xBFid,label,text\r\n"
             "1,spam,\"buy now, \"\"cheap\"\"\"\r\n"
             "\r\n"
             "2,ham,\"line one\nline two\"\n"
             "3,spam,plain\n");
  DatasetOptions o;
  o.spec = "csv:" + dir.path().string();  // a folder: split train reads train.csv
  const Dataset d = load_dataset(o);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"ham", "spam"}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(d.texts[0], "buy now, \"cheap\"");
  EXPECT_EQ(d.texts[1], "line one\nline two");
  EXPECT_EQ(d.ids, (std::vector<std::string>{"line/2", "line/4", "line/6"}));
}

TEST(Csv, MalformedFilesAreNamedByFileAndLine) {
  TempDir dir;
  const std::string f = dir.file("bad.csv");
  auto expect_error = [&](const std::string& content, const std::string& part,
                          const std::string& text_field = "text") {
    write_file(f, content);
    const std::string e = error_of([&] { load("csv:" + f, text_field); });
    EXPECT_NE(e.find(part), std::string::npos) << e;
  };
  expect_error("label,text\n1,\"never\nends\n",
               f + ":2: a quoted field that starts here never ends");
  expect_error("label,text\n1,\"a\"b\n", f + ":2: text after a quoted field's closing quote");
  expect_error("label,text\n1,a\"b\n", f + ":2: a quote inside an unquoted field");
  expect_error("label,text\n1,a,extra\n", f + ":2: 3 fields, the header has 2");
  expect_error("label,body\n1,a\n",
               f + ":1: no column 'text' (--text-field; the columns: label, body)");
  expect_error("label,text\n1,\n", f + ":2: empty text");
  expect_error("", f + ": is empty");
  expect_error("label,text\n", f + ": has no samples");
  expect_error("label,text,text\n1,a,b\n",
               f + ":1: the header names column 'text' twice (columns 2 and 3)");
  expect_error("label,text\n1,a\nlabel,text\n0,b\n", f + ":3: repeats the header row");
}

}  // namespace
}  // namespace recycle
