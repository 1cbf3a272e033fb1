// Tests for the dataset file readers: IDX (plain and gzip) and label<TAB>text TSV.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/data/idx_reader.h"
#include "engine/data/image_stream.h"
#include "engine/data/tsv_reader.h"
#include "tests/test_util.h"
#include "tests/tool_runner.h"

namespace recycle {
namespace {

using ::recycle::testing::TempDir;
using ::recycle::testing::write_file;

// Runs `fn` and returns the message of the std::runtime_error it throws, or "<no exception>".
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "<no exception>";
}

// Succeeds when `text` contains `part`; the failure message shows both.
::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

// Builds IDX bytes: 0, 0, type, ndim, big-endian dims, then `data`.
std::string make_idx(uint8_t type, const std::vector<uint32_t>& dims, const std::string& data) {
  std::string out = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    out += static_cast<char>(d >> 24);
    out += static_cast<char>(d >> 16);
    out += static_cast<char>(d >> 8);
    out += static_cast<char>(d);
  }
  return out + data;
}

// Bytes 0, 1, 2, ... (mod 256), `n` of them.
std::string counting_bytes(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 + 3);
  return s;
}

void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

// ---------------------------------------------------------------------------------------------
// IDX

TEST(IdxReader, ReadsPlainImages) {
  TempDir dir;
  const std::string path = dir.file("images.idx");
  const std::string data = counting_bytes(2 * 3 * 4);
  write_file(path, make_idx(0x08, {2, 3, 4}, data));
  const IdxArray a = read_idx_file(path, 3);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{2, 3, 4}));
  ASSERT_EQ(a.data.size(), 24u);
  EXPECT_EQ(std::string(a.data.begin(), a.data.end()), data);
  EXPECT_EQ(a.data[5], static_cast<uint8_t>(5 * 7 + 3));
}

TEST(IdxReader, ReadsGzipImagesAndLabels) {
  TempDir dir;
  const std::string images = dir.file("images.gz");
  const std::string labels = dir.file("labels.gz");
  const std::string image_data = counting_bytes(5 * 7 * 3);
  write_gzip(images, make_idx(0x08, {5, 7, 3}, image_data));
  write_gzip(labels, make_idx(0x08, {5}, std::string("\x09\x00\x03\x07\x01", 5)));

  const IdxArray a = read_idx_file(images, 3);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{5, 7, 3}));
  EXPECT_EQ(std::string(a.data.begin(), a.data.end()), image_data);

  const IdxArray l = read_idx_file(labels, 1);
  EXPECT_EQ(l.dims, (std::vector<int64_t>{5}));
  EXPECT_EQ(l.data, (std::vector<uint8_t>{9, 0, 3, 7, 1}));
}

TEST(IdxReader, ReadsLargeGzipFile) {
  // Larger than the reader's chunk and zlib's buffer, so several reads are stitched together.
  TempDir dir;
  const std::string path = dir.file("big.gz");
  const std::string data = counting_bytes(3000 * 28 * 28);
  write_gzip(path, make_idx(0x08, {3000, 28, 28}, data));
  const IdxArray a = read_idx_file(path, 3);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{3000, 28, 28}));
  EXPECT_TRUE(std::string(a.data.begin(), a.data.end()) == data);
}

TEST(IdxReader, RejectsWrongMagic) {
  TempDir dir;
  const std::string path = dir.file("bad.idx");
  std::string bytes = make_idx(0x08, {2}, "ab");
  bytes[1] = 0x01;
  write_file(path, bytes);
  const std::string msg = error_of([&] { read_idx_file(path, 1); });
  EXPECT_TRUE(contains(msg, path + ": "));
  EXPECT_TRUE(contains(msg, "wrong magic"));
  EXPECT_TRUE(contains(msg, "0x00 0x01"));
}

TEST(IdxReader, RejectsWrongTypeCode) {
  TempDir dir;
  const std::string path = dir.file("float.idx");
  write_file(path, make_idx(0x0D, {1}, "abcd"));
  const std::string msg = error_of([&] { read_idx_file(path, 1); });
  EXPECT_TRUE(contains(msg, path));
  EXPECT_TRUE(contains(msg, "type code 0x0D"));
}

TEST(IdxReader, RejectsWrongNdim) {
  TempDir dir;
  const std::string path = dir.file("labels.idx");
  write_file(path, make_idx(0x08, {3}, "abc"));
  const std::string msg = error_of([&] { read_idx_file(path, 3); });
  EXPECT_TRUE(contains(msg, path));
  EXPECT_TRUE(contains(msg, "has 1 dimensions, expected 3"));
}

TEST(IdxReader, RejectsZeroDimension) {
  TempDir dir;
  const std::string path = dir.file("zero.idx");
  write_file(path, make_idx(0x08, {4, 0, 2}, ""));
  EXPECT_TRUE(contains(error_of([&] { read_idx_file(path, 3); }), "dimension 1 is 0"));
}

TEST(IdxReader, RejectsAbsurdSize) {
  TempDir dir;
  const std::string path = dir.file("huge.idx");
  write_file(path, make_idx(0x08, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, "x"));
  EXPECT_TRUE(contains(error_of([&] { read_idx_file(path, 3); }), "exceed 2^34 bytes"));
  write_file(path, make_idx(0x08, {1u << 12, 1u << 12, (1u << 10) + 1}, "x"));
  EXPECT_TRUE(contains(error_of([&] { read_idx_file(path, 3); }), "exceed 2^34 bytes"));
}

TEST(IdxReader, RejectsTruncatedHeader) {
  TempDir dir;
  const std::string path = dir.file("short.idx");
  write_file(path, std::string("\0\0", 2));
  EXPECT_TRUE(contains(error_of([&] { read_idx_file(path, 1); }), "too short for an IDX header"));
  write_file(path, make_idx(0x08, {2, 3, 4}, "").substr(0, 10));
  EXPECT_TRUE(contains(error_of([&] { read_idx_file(path, 3); }), "truncated header"));
}

TEST(IdxReader, RejectsShortData) {
  TempDir dir;
  const std::string path = dir.file("short.idx");
  write_file(path, make_idx(0x08, {2, 3, 4}, "12345"));
  const std::string msg = error_of([&] { read_idx_file(path, 3); });
  EXPECT_TRUE(contains(msg, path));
  EXPECT_TRUE(contains(msg, "has 5 bytes of data, header says 24"));

  const std::string gz = dir.file("short.gz");
  write_gzip(gz, make_idx(0x08, {10}, "123"));
  EXPECT_TRUE(contains(error_of([&] { read_idx_file(gz, 1); }),
                       "has 3 bytes of data, header says 10"));
}

TEST(IdxReader, RejectsTrailingBytes) {
  TempDir dir;
  const std::string path = dir.file("long.idx");
  write_file(path, make_idx(0x08, {3}, "abcde"));
  const std::string msg = error_of([&] { read_idx_file(path, 1); });
  EXPECT_TRUE(contains(msg, path));
  EXPECT_TRUE(contains(msg, "has 2 trailing bytes after the 3 bytes of data"));

  const std::string gz = dir.file("long.gz");
  write_gzip(gz, make_idx(0x08, {3}, "abcd"));
  EXPECT_TRUE(contains(error_of([&] { read_idx_file(gz, 1); }), "has 1 trailing bytes"));
}

TEST(IdxReader, RejectsGarbageThatIsNotGzip) {
  // Without the gzip signature zlib reads the file as plain bytes, so the magic check catches it.
  TempDir dir;
  const std::string path = dir.file("garbage.gz");
  write_file(path, "this is not an IDX file, and not gzip either\n");
  const std::string msg = error_of([&] { read_idx_file(path, 3); });
  EXPECT_TRUE(contains(msg, path));
  EXPECT_TRUE(contains(msg, "wrong magic"));
}

TEST(IdxReader, RejectsCorruptGzip) {
  // The gzip signature followed by junk: zlib must report it, not hand back bytes.
  TempDir dir;
  const std::string path = dir.file("corrupt.gz");
  write_file(path, std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage garbage", 25));
  const std::string msg = error_of([&] { read_idx_file(path, 1); });
  EXPECT_TRUE(contains(msg, path + ": gzip error: "));
}

TEST(IdxReader, RejectsTruncatedGzip) {
  TempDir dir;
  const std::string full = dir.file("full.gz");
  write_gzip(full, make_idx(0x08, {100, 28, 28}, counting_bytes(100 * 28 * 28)));
  const std::string bytes = recycle::testing::read_file(full);
  ASSERT_GT(bytes.size(), 100u);
  for (size_t keep : {bytes.size() / 2, bytes.size() - 4}) {
    const std::string path = dir.file("cut.gz");
    write_file(path, bytes.substr(0, keep));
    const std::string msg = error_of([&] { read_idx_file(path, 3); });
    EXPECT_TRUE(contains(msg, path + ": gzip error: unexpected end of file")) << keep;
    // zlib's own copy of the path is dropped: it appears exactly once.
    EXPECT_EQ(msg.find(path, 1), std::string::npos) << msg;
  }
}

TEST(IdxReader, RejectsMissingFile) {
  TempDir dir;
  const std::string path = dir.file("nope.gz");
  const std::string msg = error_of([&] { read_idx_file(path, 3); });
  EXPECT_EQ(msg, path + ": cannot open: No such file or directory");
}

TEST(IdxReader, RejectsBadExpectedNdim) {
  EXPECT_THROW(read_idx_file("/nonexistent", 0), std::invalid_argument);
  EXPECT_THROW(read_idx_file("/nonexistent", 256), std::invalid_argument);
}

// The real dataset, as Debian's dataset-fashion-mnist installs it.
constexpr char kFashionDir[] = "/usr/share/datasets/fashion-mnist/";

bool fashion_present() {
  return std::filesystem::exists(std::string(kFashionDir) + "train-images-idx3-ubyte.gz") &&
         std::filesystem::exists(std::string(kFashionDir) + "train-labels-idx1-ubyte.gz") &&
         std::filesystem::exists(std::string(kFashionDir) + "t10k-images-idx3-ubyte.gz") &&
         std::filesystem::exists(std::string(kFashionDir) + "t10k-labels-idx1-ubyte.gz");
}

void check_fashion_split(const std::string& prefix, int64_t n,
                         const std::vector<uint8_t>& first_labels) {
  const auto start = std::chrono::steady_clock::now();
  const IdxArray images = read_idx_file(kFashionDir + prefix + "-images-idx3-ubyte.gz", 3);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << prefix << " images: " << images.data.size() << " bytes in " << seconds << " s\n";
  EXPECT_EQ(images.dims, (std::vector<int64_t>{n, 28, 28}));
  EXPECT_EQ(static_cast<int64_t>(images.data.size()), n * 28 * 28);

  const IdxArray labels = read_idx_file(kFashionDir + prefix + "-labels-idx1-ubyte.gz", 1);
  EXPECT_EQ(labels.dims, (std::vector<int64_t>{n}));
  ASSERT_EQ(static_cast<int64_t>(labels.data.size()), n);
  std::array<int64_t, 10> per_class{};
  for (uint8_t l : labels.data) {
    ASSERT_LT(l, 10);
    ++per_class[l];
  }
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], n / 10) << "class " << c;  // balanced
  EXPECT_EQ(std::vector<uint8_t>(labels.data.begin(), labels.data.begin() + 10), first_labels);
}

TEST(IdxReader, FashionMnistTrain) {
  if (!fashion_present()) GTEST_SKIP() << "Fashion-MNIST not installed at " << kFashionDir;
  check_fashion_split("train", 60000, {9, 0, 0, 3, 0, 2, 7, 2, 5, 5});
}

TEST(IdxReader, FashionMnistTest) {
  if (!fashion_present()) GTEST_SKIP() << "Fashion-MNIST not installed at " << kFashionDir;
  check_fashion_split("t10k", 10000, {9, 2, 1, 1, 6, 1, 4, 6, 5, 7});
}

// ---------------------------------------------------------------------------------------------
// TSV

TsvData read_tsv_string(const TempDir& dir, const std::string& contents,
                        const TsvOptions& options = {}) {
  const std::string path = dir.file("data.tsv");
  write_file(path, contents);
  return read_tsv_file(path, options);
}

// Writes `contents` to data.tsv and returns the error read_tsv_file throws for it.
std::string tsv_error(const TempDir& dir, const std::string& contents,
                      const TsvOptions& options = {}) {
  return error_of([&] { read_tsv_string(dir, contents, options); });
}

TEST(TsvReader, IntegerLabels) {
  TempDir dir;
  const TsvData d = read_tsv_string(dir, "2\thello\n0\tworld\n3\tfoo bar\tbaz\n2\t  spaced  \n");
  EXPECT_EQ(d.texts, (std::vector<std::string>{"hello", "world", "foo bar\tbaz", "  spaced  "}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{2, 0, 3, 2}));
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"0", "1", "2", "3"}));
  EXPECT_EQ(d.line_numbers, (std::vector<int64_t>{1, 2, 3, 4}));
}

TEST(TsvReader, IntegerLabelsWithLeadingZeros) {
  TempDir dir;
  const TsvData d = read_tsv_string(dir, "01\ta\n1\tb\n0\tc\n");
  EXPECT_EQ(d.labels, (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"0", "1"}));
}

TEST(TsvReader, RejectsHugeIntegerLabel) {
  TempDir dir;
  const std::string path = dir.file("data.tsv");
  const std::string msg = tsv_error(dir, "0\ta\n99999999999999999999999\tb\n");
  EXPECT_EQ(msg, path + ":2: class id 99999999999999999999999 is larger than 99999");
}

// The fuzzer's reference once named line 5 here, its own stale cap (fuzz/crashes/
// tsv_reader-reference-first-bad-class-id.tsv); a user gets the first.
TEST(TsvReader, ReportsTheFirstLineWithATooLargeClassId) {
  TempDir dir;
  const std::string path = dir.file("data.tsv");
  const std::string msg = tsv_error(dir, "1677721\ta\n2\tb\n3\tc\n4\td\n16777216\te\n");
  EXPECT_EQ(msg, path + ":1: class id 1677721 is larger than 99999");
}

TEST(TsvReader, NameLabelsSortedToIds) {
  TempDir dir;
  const TsvData d = read_tsv_string(dir, "pos\tgreat\nneg\tawful\nneutral\tmeh\nZed\tz\npos\tok\n");
  // Byte-wise order: uppercase before lowercase.
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"Zed", "neg", "neutral", "pos"}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{3, 1, 2, 0, 3}));
  EXPECT_EQ(d.texts, (std::vector<std::string>{"great", "awful", "meh", "z", "ok"}));
}

TEST(TsvReader, MixedLabelsAreAllNames) {
  TempDir dir;
  const TsvData d =
      read_tsv_string(dir, "10\ta\n2\tb\ncat\tc\n1\td\n-1\te\n\xc3\xa9t\xc3\xa9\tf\n");
  EXPECT_EQ(d.class_names,
            (std::vector<std::string>{"-1", "1", "10", "2", "cat", "\xc3\xa9t\xc3\xa9"}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{2, 3, 4, 1, 0, 5}));
}

TEST(TsvReader, NegativeNumberMakesLabelsNames) {
  TempDir dir;
  const TsvData d = read_tsv_string(dir, "0\ta\n-1\tb\n");
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"-1", "0"}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{1, 0}));
}

TEST(TsvReader, CrlfLineEnds) {
  TempDir dir;
  const TsvData d = read_tsv_string(dir, "a\tx\r\nb\ty z\r\n\r\nb\tin\rside\r\r\n");
  EXPECT_EQ(d.texts, (std::vector<std::string>{"x", "y z", "in\rside\r"}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(d.line_numbers, (std::vector<int64_t>{1, 2, 4}));
}

TEST(TsvReader, SkipsEmptyLinesAndKeepsLineNumbers) {
  TempDir dir;
  const TsvData d = read_tsv_string(dir, "\n\n0\ta\n\n\n1\tb");  // no final newline
  EXPECT_EQ(d.texts, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(d.line_numbers, (std::vector<int64_t>{3, 6}));
}

TEST(TsvReader, IgnoresByteOrderMark) {
  TempDir dir;
  const TsvData d = read_tsv_string(dir, "\xEF\xBB\xBFpos\tyes\nneg\tno\n");
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"neg", "pos"}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{1, 0}));
}

// A spreadsheet's header line "label<TAB>text" is skipped, in any case and after a byte-order
// mark or empty lines; the same words on a later line are a sample.
TEST(TsvReader, SkipsAHeaderLine) {
  TempDir dir;
  TsvData d = read_tsv_string(dir, "label\ttext\nspam\tbuy\nham\thi\n");
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"ham", "spam"}));
  EXPECT_EQ(d.texts, (std::vector<std::string>{"buy", "hi"}));
  EXPECT_EQ(d.line_numbers, (std::vector<int64_t>{2, 3}));
  d = read_tsv_string(dir, "\xEF\xBB\xBF\r\nLabel\tText\r\n1\tbuy\n0\thi\n");
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{1, 0}));
  d = read_tsv_string(dir, "spam\tbuy\nlabel\ttext\n");
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"label", "spam"}));
  EXPECT_EQ(tsv_error(dir, "label\ttext\n"), dir.file("data.tsv") + ": no samples");
}

// A split's labels take the training split's classes by name; it may hold fewer, not others.
TEST(Dataset, AdoptClassNamesMapsLabelsByName) {
  recycle::Dataset d;
  d.class_names = {"ant", "cat"};
  d.labels = {1, 0, 1};
  recycle::adopt_class_names(&d, {"ant", "bee", "cat"}, "test", "split train");
  EXPECT_EQ(d.labels, (std::vector<int64_t>{2, 0, 2}));
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"ant", "bee", "cat"}));
  d.class_names = {"ant", "dog"};
  d.labels = {0, 1};
  EXPECT_EQ(error_of([&] {
              recycle::adopt_class_names(&d, {"ant", "bee"}, "test", "split train");
            }),
            "split test holds class 'dog' that split train does not (classes come from the "
            "training split and --classes: another split may hold fewer, not others)");
}

TEST(TsvReader, KeepsUtf8TextExactly) {
  TempDir dir;
  const std::string text = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf";
  const TsvData d = read_tsv_string(dir, "0\t" + text + "\n");
  ASSERT_EQ(d.texts.size(), 1u);
  EXPECT_EQ(d.texts[0], text);
}

TEST(TsvReader, LinesSpanningReadChunks) {
  // Lines that straddle the reader's 64 KiB buffer boundary come out whole.
  TempDir dir;
  std::string contents;
  std::vector<std::string> expected;
  for (int i = 0; i < 300; ++i) {
    expected.push_back(std::string(1000 + i, static_cast<char>('a' + i % 26)));
    contents += std::to_string(i % 3) + "\t" + expected.back() + "\r\n";
  }
  const TsvData d = read_tsv_string(dir, contents);
  EXPECT_EQ(d.texts, expected);
  EXPECT_EQ(d.line_numbers.back(), 300);
  EXPECT_EQ(d.labels[299], 299 % 3);
}

TEST(TsvReader, RejectsLineWithoutTab) {
  TempDir dir;
  const std::string path = dir.file("data.tsv");
  EXPECT_EQ(tsv_error(dir, "0\tok\n1 no tab here\n"), path + ":2: no tab between label and text");
}

TEST(TsvReader, RejectsEmptyLabel) {
  TempDir dir;
  const std::string path = dir.file("data.tsv");
  EXPECT_EQ(tsv_error(dir, "0\tok\n\n\tno label\n"), path + ":3: empty label");
}

TEST(TsvReader, RejectsEmptyText) {
  TempDir dir;
  const std::string path = dir.file("data.tsv");
  EXPECT_EQ(tsv_error(dir, "0\tok\n1\t\n"), path + ":2: empty text");
  EXPECT_EQ(tsv_error(dir, "0\t\r\n"), path + ":1: empty text");
}

TEST(TsvReader, RejectsInvalidUtf8Text) {
  TempDir dir;
  const std::string path = dir.file("data.tsv");
  const std::vector<std::string> bad = {
      "\xff",              // never valid
      "\x80",              // stray continuation byte
      "\xc0\xaf",          // overlong '/'
      "\xc1\xbf",          // overlong
      "\xe0\x80\xaf",      // overlong 3-byte
      "\xf0\x80\x80\xaf",  // overlong 4-byte
      "\xed\xa0\x80",      // surrogate U+D800
      "\xed\xbf\xbf",      // surrogate U+DFFF
      "\xf4\x90\x80\x80",  // U+110000
      "\xf5\x80\x80\x80",  // beyond U+10FFFF
      "\xe2\x82",          // truncated euro sign
      "\xf0\x9f\x98",      // truncated 4-byte
      "\xc3",              // truncated 2-byte
      "\xe2\x28\xa1",      // bad continuation
  };
  for (const std::string& b : bad) {
    const std::string msg = tsv_error(dir, "0\tfine\n1\tabc" + b + "\n");
    EXPECT_EQ(msg, path + ":2: text is not valid UTF-8 (at byte 6 of the line)") << b;
  }
}

TEST(TsvReader, RejectsInvalidUtf8Label) {
  TempDir dir;
  const std::string path = dir.file("data.tsv");
  EXPECT_EQ(tsv_error(dir, "a\xed\xa0\x80\ttext\n"),
            path + ":1: label is not valid UTF-8 (at byte 2)");
}

TEST(TsvReader, RejectsLongLine) {
  TempDir dir;
  const std::string path = dir.file("data.tsv");
  TsvOptions options;
  options.max_line_bytes = 16;
  const std::string sixteen = "0\t" + std::string(14, 'x');
  // Exactly at the limit passes, with or without CR.
  EXPECT_EQ(read_tsv_string(dir, sixteen + "\n" + sixteen + "\r\n", options).texts.size(), 2u);
  EXPECT_EQ(tsv_error(dir, sixteen + "\n" + sixteen + "y\n", options),
            path + ":2: line longer than 16 bytes");
  EXPECT_EQ(tsv_error(dir, sixteen + "\n\n" + sixteen + "y", options),
            path + ":3: line longer than 16 bytes");
}

TEST(TsvReader, RejectsHugeLineEarly) {
  // A 64 MiB line with no newline is refused with a small limit.
  TempDir dir;
  const std::string path = dir.file("data.tsv");
  write_file(path, "0\t" + std::string(size_t{64} << 20, 'x'));
  TsvOptions options;
  options.max_line_bytes = 1024;
  EXPECT_EQ(error_of([&] { read_tsv_file(path, options); }),
            path + ":1: line longer than 1024 bytes");
}

TEST(TsvReader, RejectsEmptyFile) {
  TempDir dir;
  const std::string path = dir.file("data.tsv");
  EXPECT_EQ(tsv_error(dir, ""), path + ": no samples");
  EXPECT_EQ(tsv_error(dir, "\n\r\n\n"), path + ": no samples");
}

TEST(TsvReader, RejectsMissingFile) {
  TempDir dir;
  const std::string path = dir.file("missing.tsv");
  EXPECT_EQ(error_of([&] { read_tsv_file(path); }),
            path + ": cannot open: No such file or directory");
}

TEST(TsvReader, Utf8Validator) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ascii, long enough for the fast path"));
  EXPECT_TRUE(is_valid_utf8(std::string_view("\0", 1)));
  EXPECT_TRUE(is_valid_utf8("\xc2\x80"));          // U+0080, smallest 2-byte
  EXPECT_TRUE(is_valid_utf8("\xdf\xbf"));          // U+07FF
  EXPECT_TRUE(is_valid_utf8("\xe0\xa0\x80"));      // U+0800, smallest 3-byte
  EXPECT_TRUE(is_valid_utf8("\xed\x9f\xbf"));      // U+D7FF, just below surrogates
  EXPECT_TRUE(is_valid_utf8("\xee\x80\x80"));      // U+E000, just above surrogates
  EXPECT_TRUE(is_valid_utf8("\xef\xbf\xbf"));      // U+FFFF
  EXPECT_TRUE(is_valid_utf8("\xf0\x90\x80\x80"));  // U+10000, smallest 4-byte
  EXPECT_TRUE(is_valid_utf8("\xf4\x8f\xbf\xbf"));  // U+10FFFF, largest
  EXPECT_TRUE(is_valid_utf8("12345678\xe2\x82\xac" "abcdefgh"));

  EXPECT_FALSE(is_valid_utf8("\xc2"));
  EXPECT_FALSE(is_valid_utf8("\xc0\x80"));          // overlong NUL
  EXPECT_FALSE(is_valid_utf8("\xe0\x9f\xbf"));      // overlong U+07FF
  EXPECT_FALSE(is_valid_utf8("\xf0\x8f\xbf\xbf"));  // overlong U+FFFF
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // U+D800
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // U+110000
  EXPECT_FALSE(is_valid_utf8("\xfe"));
  EXPECT_FALSE(is_valid_utf8("abcdefgh\x80"));      // stray continuation after the fast path
  EXPECT_FALSE(is_valid_utf8("\xe2\x82\xac\x82"));  // extra continuation byte
  EXPECT_FALSE(is_valid_utf8("\xf0\x9f\x98\x41"));  // last byte not a continuation
}

// ---------------------------------------------------------------------------------------------
// IDX in pieces (IdxStream) and streamed datasets (ImageStream)

TEST(IdxStream, ReadsInPiecesWhatReadIdxFileReads) {
  TempDir dir;
  const std::string gz = dir.file("images.gz");
  const std::string data = counting_bytes(9 * 4 * 5);
  write_gzip(gz, make_idx(0x08, {9, 4, 5}, data));
  IdxStream s(gz, 3);
  EXPECT_EQ(s.dims(), (std::vector<int64_t>{9, 4, 5}));
  EXPECT_EQ(s.data_bytes(), 180u);
  std::string got(30, '\0');
  s.read(reinterpret_cast<uint8_t*>(got.data()), 30);
  EXPECT_EQ(got, data.substr(0, 30));
  s.read(nullptr, 100);  // skipped
  EXPECT_EQ(s.position(), 130u);
  got.assign(50, '\0');
  s.read(reinterpret_cast<uint8_t*>(got.data()), 50);
  EXPECT_EQ(got, data.substr(130, 50));
  s.finish();
  EXPECT_THROW(s.read(nullptr, 1), std::invalid_argument);  // past the header's size
}

TEST(IdxStream, ShortDataFailsAtTheReadAndTrailingBytesAtFinish) {
  TempDir dir;
  const std::string shortf = dir.file("short.gz");
  write_gzip(shortf, make_idx(0x08, {10}, "123"));
  IdxStream s(shortf, 1);
  uint8_t buf[10];
  s.read(buf, 2);  // what is there reads
  EXPECT_TRUE(contains(error_of([&] { s.read(buf, 5); }), "has 3 bytes of data, header says 10"));

  const std::string longf = dir.file("long.gz");
  write_gzip(longf, make_idx(0x08, {3}, "abcd"));
  IdxStream l(longf, 1);
  l.read(buf, 3);
  EXPECT_TRUE(contains(error_of([&] { l.finish(); }), "has 1 trailing bytes"));
}

// A streamed dataset is load_dataset's without the pixels, and its stream reads them.
void expect_streams_like_loaded(const DatasetOptions& o) {
  const Dataset whole = load_dataset(o);
  StreamedImages images;
  const Dataset lean = load_dataset(o, &images);
  ASSERT_TRUE(images.streamed());
  EXPECT_TRUE(lean.pixels.empty());
  EXPECT_EQ(lean.description, whole.description);
  EXPECT_EQ(lean.labels, whole.labels);
  EXPECT_EQ(lean.ids, whole.ids);
  EXPECT_EQ(lean.class_names, whole.class_names);
  EXPECT_EQ(lean.item_shape, whole.item_shape);
  ASSERT_EQ(images.rows.size(), whole.size());
  const int64_t item = whole.item_bytes();
  ImageStream stream(lean, images);
  // Every third sample, in chunks of 7, then the rest of the file checked.
  std::vector<int64_t> positions;
  for (int64_t p = 0; p < static_cast<int64_t>(whole.size()); p += 3) positions.push_back(p);
  std::vector<uint8_t> got(positions.size() * item);
  for (size_t lo = 0; lo < positions.size(); lo += 7) {
    const int64_t n = static_cast<int64_t>(std::min<size_t>(7, positions.size() - lo));
    stream.read(positions.data() + lo, n, got.data() + lo * item);
  }
  stream.finish();
  for (size_t i = 0; i < positions.size(); ++i) {
    ASSERT_TRUE(std::equal(got.begin() + i * item, got.begin() + (i + 1) * item,
                           whole.item_pixels(positions[i])))
        << "sample " << positions[i];
  }
  // Positions go forward only.
  ImageStream again(lean, images);
  const int64_t two[] = {2, 1};
  std::vector<uint8_t> buf(2 * item);
  EXPECT_THROW(again.read(two, 2, buf.data()), std::invalid_argument);
}

TEST(ImageStream, ReadsWhatLoadDatasetLoadsAfterClassesAndLimit) {
  TempDir dir;
  const int n = 50;
  std::vector<uint8_t> pixels, labels;
  for (int i = 0; i < n; ++i) {
    for (int q = 0; q < 28 * 28; ++q) {
      pixels.push_back(static_cast<uint8_t>((i * 31 + q * 7) % 253));
    }
    labels.push_back(static_cast<uint8_t>((i * 3) % 10));
  }
  testing::write_idx(dir.file("train-images-idx3-ubyte.gz"), {n, 28, 28}, pixels);
  testing::write_idx(dir.file("train-labels-idx1-ubyte.gz"), {n}, labels);
  DatasetOptions o;
  o.spec = "fashion-mnist:" + dir.path().string();
  expect_streams_like_loaded(o);
  o.classes = "1,4-6";
  expect_streams_like_loaded(o);
  o.limit = 9;
  expect_streams_like_loaded(o);
}

TEST(ImageStream, ReadsTheRealTestSplit) {
  DatasetOptions o;
  o.spec = "fashion-mnist";
  o.split = "test";
  o.classes = "5-9";
  o.limit = 700;
  expect_streams_like_loaded(o);
}

TEST(ImageStream, ShortImagesFailWhenReached) {
  TempDir dir;
  std::vector<uint8_t> pixels(3 * 28 * 28, 9);  // the header will say 5 images
  std::string bytes = {0, 0, 8, 3, 0, 0, 0, 5, 0, 0, 0, 28, 0, 0, 0, 28};
  bytes.append(pixels.begin(), pixels.end());
  write_gzip(dir.file("train-images-idx3-ubyte.gz"), bytes);
  testing::write_idx(dir.file("train-labels-idx1-ubyte.gz"), {5}, {1, 2, 3, 4, 5});
  DatasetOptions o;
  o.spec = "fashion-mnist:" + dir.path().string();
  EXPECT_THROW(load_dataset(o), std::runtime_error);
  StreamedImages images;
  const Dataset lean = load_dataset(o, &images);  // the header only: fine
  ImageStream stream(lean, images);
  std::vector<uint8_t> buf(28 * 28);
  const int64_t first = 0, last = 4;
  stream.read(&first, 1, buf.data());
  EXPECT_TRUE(contains(error_of([&] { stream.read(&last, 1, buf.data()); }),
                       "bytes of data, header says 3920"));
}

}  // namespace
}  // namespace recycle

// Found by the idx_reader fuzzer: a 16-byte file whose header claims 2 x 2 x 0x2d0a1118 bytes
// (about 3 GB) must fail on the missing data without allocating what the header claims.
TEST(IdxReader, HugeHeaderOverShortFileFailsWithoutAllocatingIt) {
  recycle::testing::TempDir dir;
  const std::string path = dir.file("huge.idx");
  recycle::testing::write_file(
      path, std::string("\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x02\x2d\x0a\x11\x18", 16));
  try {
    recycle::read_idx_file(path, 3);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("has 0 bytes of data, header says 3022537824"),
              std::string::npos)
        << e.what();
  }
}

// Found by the tsv_reader fuzzer: one large integer label made millions of class names.
TEST(TsvReader, LargeIntegerClassIdIsRefused) {
  recycle::testing::TempDir dir;
  const std::string path = dir.file("big.tsv");
  recycle::testing::write_file(path, "16554432\ttoo big\n");
  try {
    recycle::read_tsv_file(path);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), path + ":1: class id 16554432 is larger than 99999");
  }
}

// A data-parallel rank's slice (DatasetOptions::slice_*): every slice_count-th sample from
// slice_index, of the first slice_count * floor(n / slice_count), so every slice has the same
// size; the slice is part of the description (as "shard=R/W", the word caches made before the
// rename hold, and so of a cache's identity).
TEST(DatasetShards, EveryWorldthSampleFromTheRankOfEqualSizedShards) {
  recycle::testing::TempDir dir;
  const std::string path = dir.file("seven.tsv");
  recycle::testing::write_file(path, "0\ta\n1\tb\n0\tc\n1\td\n0\te\n1\tf\n0\tg\n");
  recycle::DatasetOptions o;
  o.spec = "tsv:" + path;
  const recycle::Dataset all = recycle::load_dataset(o);
  ASSERT_EQ(all.size(), 7u);
  std::vector<std::string> seen;
  for (int r = 0; r < 3; ++r) {
    o.slice_index = r;
    o.slice_count = 3;
    const recycle::Dataset d = recycle::load_dataset(o);
    ASSERT_EQ(d.size(), 2u) << r;  // the 7th sample is left out
    for (size_t i = 0; i < d.size(); ++i) {
      EXPECT_EQ(d.texts[i], all.texts[static_cast<size_t>(r) + 3 * i]);
      EXPECT_EQ(d.labels[i], all.labels[static_cast<size_t>(r) + 3 * i]);
      EXPECT_EQ(d.ids[i], all.ids[static_cast<size_t>(r) + 3 * i]);
      seen.push_back(d.texts[i]);
    }
    EXPECT_NE(d.description.find("shard=" + std::to_string(r) + "/3"), std::string::npos)
        << d.description;
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b", "c", "d", "e", "f"}));
  o.slice_index = 3;
  EXPECT_THROW(recycle::load_dataset(o), std::invalid_argument);
}
