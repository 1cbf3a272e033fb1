// libFuzzer harness for recycle::read_tsv_file and is_valid_utf8 (engine/data/tsv_reader.h).
//
// Every input is written to a scratch file and read with a small max_line_bytes (16) and with
// the default. Checked, beyond "no crash, no sanitizer report":
// - only std::runtime_error escapes, and its message is "PATH:LINE: reason" or "PATH: reason";
// - the result (or the failing line and reason) equals that of an independent reference
//   implementation of the documented format, written here from the header's contract;
// - is_valid_utf8 agrees with an independent decoder on the whole input.
// Integer class ids above 99999 are refused (the header's contract), so an accepted file has at
// most 100,000 class names and no input stalls the fuzzer.
#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "engine/data/tsv_reader.h"
#include "fuzz/fuzz_util.h"

namespace {

using recycle::fuzz::fail;
using recycle::fuzz::ScratchFile;
using recycle::fuzz::starts_with;

constexpr size_t kSmallMaxLine = 16;
constexpr int64_t kMaxClassId = 99999;  // "ids above 99999 are refused"
constexpr size_t kValid = static_cast<size_t>(-1);

// Decodes one code point at a time; returns the offset of the first sequence that is not a
// well-formed UTF-8 encoding of a scalar value (overlong, surrogate, > U+10FFFF, stray or
// truncated), or kValid.
size_t reference_first_invalid(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned c = p[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return kValid;
}

struct Result {
  bool ok = false;
  int64_t error_line = 0;  // 0: a file-level error
  std::string reason;      // a fragment the reason must contain
  recycle::TsvData data;
};

// The contract of read_tsv_file, implemented the simple way (whole input in memory).
Result reference(std::string_view in, size_t max_line) {
  Result r;
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < in.size();) {
    const size_t nl = in.find('\n', start);
    if (nl == std::string_view::npos) {
      lines.push_back(in.substr(start));
      break;
    }
    lines.push_back(in.substr(start, nl - start));
    start = nl + 1;
  }
  auto error = [&](int64_t line, std::string reason) {
    r.ok = false;
    r.error_line = line;
    r.reason = std::move(reason);
    return r;
  };
  std::vector<std::string> labels;  // per sample
  std::vector<std::string> first_order;
  std::map<std::string, int64_t> first_line;
  for (size_t i = 0; i < lines.size(); ++i) {
    const int64_t number = static_cast<int64_t>(i) + 1;
    std::string line(lines[i]);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.size() > max_line) return error(number, "line longer than");
    if (number == 1 && starts_with(line, "\xEF\xBB\xBF")) line.erase(0, 3);
    if (line.empty()) continue;
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) return error(number, "no tab");
    if (tab == 0) return error(number, "empty label");
    if (tab + 1 == line.size()) return error(number, "empty text");
    const std::string label = line.substr(0, tab), text = line.substr(tab + 1);
    if (size_t bad = reference_first_invalid(label); bad != kValid) {
      return error(number, "label is not valid UTF-8 (at byte " + std::to_string(bad + 1) + ")");
    }
    if (size_t bad = reference_first_invalid(text); bad != kValid) {
      return error(number, "text is not valid UTF-8 (at byte " + std::to_string(tab + 2 + bad) +
                               " of the line)");
    }
    if (first_line.emplace(label, number).second) first_order.push_back(label);
    labels.push_back(label);
    r.data.texts.push_back(text);
    r.data.line_numbers.push_back(number);
  }
  if (labels.empty()) return error(0, "no samples");
  const bool integers = std::all_of(first_order.begin(), first_order.end(), [](const std::string& s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  });
  std::map<std::string, int64_t> id;
  if (integers) {
    int64_t max_id = 0;
    for (const std::string& s : first_order) {
      // Numeric value, saturating (labels may have any number of digits).
      int64_t v = 0;
      for (char c : s) v = std::min<int64_t>(v * 10 + (c - '0'), int64_t{1} << 40);
      // first_order is in order of first appearance, so this is the first line with a bad id.
      if (v > kMaxClassId) {
        return error(first_line[s],
                     "class id " + s + " is larger than " + std::to_string(kMaxClassId));
      }
      id[s] = v;
      max_id = std::max(max_id, v);
    }
    for (int64_t k = 0; k <= max_id; ++k) r.data.class_names.push_back(std::to_string(k));
  } else {
    int64_t k = 0;
    for (const auto& [name, line] : first_line) {  // std::map: byte-wise sorted
      id[name] = k++;
      r.data.class_names.push_back(name);
    }
  }
  for (const std::string& s : labels) r.data.labels.push_back(id[s]);
  r.ok = true;
  return r;
}

Result run(const std::string& path, size_t max_line) {
  Result r;
  try {
    recycle::TsvOptions options;
    options.max_line_bytes = max_line;
    r.data = recycle::read_tsv_file(path, options);
    r.ok = true;
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    FUZZ_CHECK(starts_with(msg, path + ":"), "message does not start with the path: " + msg);
    const std::string rest = msg.substr(path.size() + 1);
    if (starts_with(rest, " ")) {
      r.error_line = 0;
      r.reason = rest.substr(1);
    } else {
      const size_t colon = rest.find(": ");
      FUZZ_CHECK(colon != std::string::npos && colon > 0 &&
                     rest.find_first_not_of("0123456789") == colon,
                 "message is not PATH:LINE: reason: " + msg);
      r.error_line = std::stoll(rest.substr(0, colon));
      r.reason = rest.substr(colon + 2);
    }
  } catch (const std::exception& e) {
    fail(std::string("read_tsv_file threw ") + typeid(e).name() + ": " + e.what());
  } catch (...) {
    fail("read_tsv_file threw a non-std exception");
  }
  return r;
}

void compare(const Result& got, const Result& want, size_t max_line) {
  const std::string where = " (max_line_bytes " + std::to_string(max_line) + ")";
  if (!want.ok) {
    FUZZ_CHECK(!got.ok, "reader accepted, reference refuses at line " +
                            std::to_string(want.error_line) + ": " + want.reason + where);
    FUZZ_CHECK(got.error_line == want.error_line,
               "reader fails at line " + std::to_string(got.error_line) + " (" + got.reason +
                   "), reference at line " + std::to_string(want.error_line) + " (" +
                   want.reason + ")" + where);
    FUZZ_CHECK(got.reason.find(want.reason) != std::string::npos,
               "reason \"" + got.reason + "\" lacks \"" + want.reason + "\"" + where);
    return;
  }
  FUZZ_CHECK(got.ok, "reader refuses at line " + std::to_string(got.error_line) + ": " +
                         got.reason + ", reference accepts" + where);
  FUZZ_CHECK(got.data.texts == want.data.texts, "texts differ" + where);
  FUZZ_CHECK(got.data.labels == want.data.labels, "labels differ" + where);
  FUZZ_CHECK(got.data.class_names == want.data.class_names, "class_names differ" + where);
  FUZZ_CHECK(got.data.line_numbers == want.data.line_numbers, "line_numbers differ" + where);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ScratchFile file("tsv");
  const std::string_view in(reinterpret_cast<const char*>(data), size);

  FUZZ_CHECK(recycle::is_valid_utf8(in) == (reference_first_invalid(in) == kValid),
             "is_valid_utf8 disagrees with the reference decoder");

  const size_t default_max = recycle::TsvOptions{}.max_line_bytes;
  const std::string& path = file.write(data, size);
  compare(run(path, kSmallMaxLine), reference(in, kSmallMaxLine), kSmallMaxLine);
  compare(run(path, default_max), reference(in, default_max), default_max);
  return 0;
}
