// Data, weights and model files must be regular files. A FIFO, a device or a directory given
// as one would block the open forever or read endless bytes, so it is refused with one line
// before anything opens it. require_regular_file checks; read_regular_file checks and reads a
// whole file into memory.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
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
// `max_bytes` (also when it grows past them while it is read). What is checked is what is read:
// the open descriptor's file.
inline std::string read_regular_file(const std::string& path, uint64_t max_bytes = UINT64_MAX) {
  require_regular_file(path);  // before the open: a FIFO's open would block
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw std::runtime_error(path + " cannot be read: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    throw std::runtime_error(path + " cannot be read: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) throw std::runtime_error(path + ": is not a regular file");
  auto too_large = [&](uint64_t bytes) {
    return std::runtime_error(path + " is " + std::to_string(bytes >> 20) + " MiB, more than the " +
                              std::to_string(max_bytes >> 20) + " MiB it may be");
  };
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    throw too_large(static_cast<uint64_t>(st.st_size));
  }
  std::string bytes;
  bytes.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(path + " cannot be read: " + std::strerror(errno));
    if (n == 0) break;
    if (bytes.size() + static_cast<uint64_t>(n) > max_bytes) throw too_large(bytes.size() + n);
    bytes.append(buf, static_cast<size_t>(n));
  }
  return bytes;
}

}  // namespace recycle
