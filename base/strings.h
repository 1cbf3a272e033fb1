// Small string helpers below everything else. Header-only; pure functions, thread safe.
#pragma once

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

}  // namespace recycle
