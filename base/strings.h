// Small string helpers below everything else. Header-only; pure functions, thread safe.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace recycle {

// "a, b, c" for items {"a", "b", "c"} and separator ", "; "" for no items. For the lists of
// known names in messages and help texts.
inline std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// The first line of `text` (a library's message often carries a backtrace after it).
inline std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// `text` with its control characters written as escapes (\n, \t, \r, \xHH), so that a name
// from a user's files (a class folder, a CSV label) prints on one line of a terminal as it is.
inline std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u < 0x20 || u == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace recycle
