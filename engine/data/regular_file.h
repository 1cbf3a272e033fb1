// require_regular_file: data and weights files must be regular files. A FIFO, a device or a
// directory given as one would block the open forever or read endless bytes, so it is refused
// with one line before anything opens it. A missing path passes (the open reports it).
#pragma once

#include <sys/stat.h>

#include <stdexcept>
#include <string>

namespace recycle {

inline void require_regular_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    const char* what = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "a device";
    throw std::runtime_error(path + ": is " + std::string(what) + ", not a regular file");
  }
}

}  // namespace recycle
