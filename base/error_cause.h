// The line of an error message that says its cause. Header-only; pure, thread safe.
#pragma once

#include <string>

#include "base/strings.h"

namespace recycle {

// The cause of the error `what` in one line: for a TorchScript interpreter failure ("The
// following operation failed in the TorchScript interpreter." then the script's traceback), its
// last non-empty line, the exception the script raised in the user's own words
// ("builtins.ValueError: the head wants 3 tensors"); for anything else its first line (LibTorch
// appends backtraces after it).
inline std::string error_cause(const std::string& what) {
  static const std::string kInterpreter = "The following operation failed in the TorchScript";
  if (what.compare(0, kInterpreter.size(), kInterpreter) == 0) {
    size_t end = what.find_last_not_of(" \t\r\n");
    if (end != std::string::npos) {
      const size_t begin = what.rfind('\n', end);
      return what.substr(begin == std::string::npos ? 0 : begin + 1,
                         end - (begin == std::string::npos ? 0 : begin + 1) + 1);
    }
  }
  return first_line(what);
}

}  // namespace recycle
