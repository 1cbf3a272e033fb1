// Data, weights and model files must be regular files. A FIFO, a device or a directory given
// as one would block the open forever or read endless bytes, so it is refused with one line
// before anything opens it. require_regular_file checks; read_regular_file checks and reads a
// whole file into memory.
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace recycle {

// Throws std::runtime_error ("PATH: is a FIFO, not a regular file") for anything but a regular
// file. A missing path passes (the open reports it).
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

// The bytes of regular file `path`. Throws std::runtime_error naming the path for a file that is
// not regular, cannot be opened or read (with the system's reason), or holds more than
// `max_bytes`.
inline std::string read_regular_file(const std::string& path, uint64_t max_bytes = UINT64_MAX) {
  require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + " cannot be read: " + std::strerror(errno));
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) > max_bytes) {
    throw std::runtime_error(path + " is " + std::to_string(st.st_size >> 20) +
                             " MiB, more than the " + std::to_string(max_bytes >> 20) +
                             " MiB it may be");
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error(path + " cannot be read: " + std::strerror(errno));
  return bytes;
}

}  // namespace recycle
