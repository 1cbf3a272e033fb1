#include "engine/data/tsv_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/data/regular_file.h"

namespace recycle {
namespace {

// Integer labels name class ids directly, so a stray huge number would otherwise allocate
// millions of empty class names.
constexpr int64_t kMaxIntegerClassId = 99999;
constexpr size_t kReadChunkBytes = size_t{1} << 16;
constexpr size_t kNoError = std::string_view::npos;

}  // namespace

// Follows the well-formed byte sequences of the Unicode Standard, table 3-7.
size_t first_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // Fast path: skip eight ASCII bytes at a time.
    while (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, p + i, 8);
      if (word & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c == 0xE0) {
      len = 3, lo = 0xA0;  // below A0 is overlong
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
      len = 3;
    } else if (c == 0xED) {
      len = 3, hi = 0x9F;  // A0..BF would encode surrogates
    } else if (c == 0xF0) {
      len = 4, lo = 0x90;  // below 90 is overlong
    } else if (c >= 0xF1 && c <= 0xF3) {
      len = 4;
    } else if (c == 0xF4) {
      len = 4, hi = 0x8F;  // above 8F is beyond U+10FFFF
    } else {
      return i;  // continuation byte, C0/C1 (always overlong) or F5..FF
    }
    if (i + len > n) return i;  // truncated
    if (p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    }
    i += len;
  }
  return kNoError;
}

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// Splits a file into lines with bounded memory: a line is handed out only once it is complete,
// and a line that grows past the limit is refused before the rest of it is read.
class LineReader {
 public:
  LineReader(const std::string& path, size_t max_line_bytes)
      : path_(path), max_line_bytes_(max_line_bytes), buffer_(kReadChunkBytes) {
    require_regular_file(path);
    errno = 0;
    file_.reset(std::fopen(path.c_str(), "rb"));
    if (!file_) {
      throw std::runtime_error(path + ": cannot open: " +
                               std::string(errno != 0 ? std::strerror(errno) : "unknown error"));
    }
  }

  // Stores the next line, without its "\n" or "\r\n", in `line` and returns true; returns false
  // at end of file. line_number() is the line's 1-based number afterwards.
  bool next(std::string* line) {
    line->clear();
    ++line_number_;
    for (;;) {
      if (pos_ == end_ && !refill()) {
        if (line->empty()) return false;  // no unterminated last line
        break;
      }
      const char* start = buffer_.data() + pos_;
      const size_t avail = end_ - pos_;
      const void* nl = std::memchr(start, '\n', avail);
      const size_t take = nl ? static_cast<size_t>(static_cast<const char*>(nl) - start) : avail;
      // Allow one extra byte for a '\r' that may turn out to precede the '\n'.
      if (line->size() + take > max_line_bytes_ + 1) fail_too_long();
      line->append(start, take);
      pos_ += take;
      if (nl) {
        ++pos_;
        break;
      }
    }
    if (!line->empty() && line->back() == '\r') line->pop_back();
    if (line->size() > max_line_bytes_) fail_too_long();
    return true;
  }

  int64_t line_number() const { return line_number_; }

  [[noreturn]] void fail(const std::string& reason) const {
    throw std::runtime_error(path_ + ":" + std::to_string(line_number_) + ": " + reason);
  }

 private:
  [[noreturn]] void fail_too_long() const {
    fail("line longer than " + std::to_string(max_line_bytes_) + " bytes");
  }

  // Reads the next chunk into the buffer; false at end of file. Throws on a read error.
  bool refill() {
    const size_t r = std::fread(buffer_.data(), 1, buffer_.size(), file_.get());
    if (r == 0 && std::ferror(file_.get())) {
      fail(std::string("read error: ") + std::strerror(errno));
    }
    pos_ = 0;
    end_ = r;
    return r > 0;
  }

  std::string path_;
  size_t max_line_bytes_;
  std::unique_ptr<std::FILE, FileCloser> file_;
  std::vector<char> buffer_;
  size_t pos_ = 0;
  size_t end_ = 0;
  int64_t line_number_ = 0;
};

// Parses an all-digit label into *value; false if it exceeds kMaxIntegerClassId.
bool parse_class_id(const std::string& s, int64_t* value) {
  int64_t v = 0;
  for (char c : s) {
    v = v * 10 + (c - '0');
    if (v > kMaxIntegerClassId) return false;
  }
  *value = v;
  return true;
}

// The header line a spreadsheet writes: "label<TAB>text", in any case of ASCII letters.
bool is_header_line(const std::string& line) {
  static const char kHeader[] = "label\ttext";
  if (line.size() != sizeof(kHeader) - 1) return false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c =
        line[i] >= 'A' && line[i] <= 'Z' ? static_cast<char>(line[i] - 'A' + 'a') : line[i];
    if (c != kHeader[i]) return false;
  }
  return true;
}

}  // namespace

bool is_valid_utf8(std::string_view s) { return first_invalid_utf8(s) == kNoError; }

TsvData read_tsv_file(const std::string& path, const TsvOptions& options) {
  LineReader reader(path, options.max_line_bytes);
  TsvData out;

  // Distinct labels in order of first appearance; each sample refers to one by index until the
  // label kind (integers or names) is known at the end of the file.
  std::vector<std::string> distinct;
  std::vector<int64_t> distinct_line;
  std::unordered_map<std::string, size_t> distinct_index;
  std::vector<size_t> sample_label;
  bool all_integers = true;

  std::string line;
  bool first = true;  // no non-empty line seen yet
  while (reader.next(&line)) {
    if (reader.line_number() == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
    if (line.empty()) continue;
    if (first) {
      first = false;
      if (is_header_line(line)) continue;
    }
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) reader.fail("no tab between label and text");
    if (tab == 0) reader.fail("empty label");
    if (tab + 1 == line.size()) reader.fail("empty text");
    const std::string_view label(line.data(), tab);
    const std::string_view text(line.data() + tab + 1, line.size() - tab - 1);
    if (size_t bad = first_invalid_utf8(label); bad != kNoError) {
      reader.fail("label is not valid UTF-8 (at byte " + std::to_string(bad + 1) + ")");
    }
    if (size_t bad = first_invalid_utf8(text); bad != kNoError) {
      reader.fail("text is not valid UTF-8 (at byte " + std::to_string(tab + 2 + bad) +
                  " of the line)");
    }
    std::string label_str(label);
    auto [it, inserted] = distinct_index.try_emplace(label_str, distinct.size());
    if (inserted) {
      if (!std::all_of(label_str.begin(), label_str.end(),
                       [](char c) { return c >= '0' && c <= '9'; })) {
        all_integers = false;
      }
      distinct.push_back(std::move(label_str));
      distinct_line.push_back(reader.line_number());
    }
    sample_label.push_back(it->second);
    out.texts.emplace_back(text);
    out.line_numbers.push_back(reader.line_number());
  }
  if (out.texts.empty()) throw std::runtime_error(path + ": no samples");

  std::vector<int64_t> id_of(distinct.size());
  if (all_integers) {
    int64_t max_id = 0;
    for (size_t i = 0; i < distinct.size(); ++i) {
      if (!parse_class_id(distinct[i], &id_of[i])) {
        throw std::runtime_error(path + ":" + std::to_string(distinct_line[i]) + ": class id " +
                                 distinct[i] + " is larger than " +
                                 std::to_string(kMaxIntegerClassId));
      }
      max_id = std::max(max_id, id_of[i]);
    }
    out.class_names.reserve(static_cast<size_t>(max_id) + 1);
    for (int64_t id = 0; id <= max_id; ++id) out.class_names.push_back(std::to_string(id));
  } else {
    std::vector<size_t> order(distinct.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    // std::string compares through char_traits<char>, which orders bytes as unsigned char.
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return distinct[a] < distinct[b]; });
    out.class_names.reserve(order.size());
    for (size_t rank = 0; rank < order.size(); ++rank) {
      id_of[order[rank]] = static_cast<int64_t>(rank);
      out.class_names.push_back(distinct[order[rank]]);
    }
  }
  out.labels.reserve(sample_label.size());
  for (size_t index : sample_label) out.labels.push_back(id_of[index]);
  return out;
}

}  // namespace recycle
