// Helpers shared by the libFuzzer harnesses in fuzz/ (built by scripts/fuzz.sh).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace recycle::fuzz {

// Prints `what` and aborts, so that libFuzzer records the input as a crash.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "FUZZ CHECK FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

#define FUZZ_CHECK(cond, msg)                                                             \
  do {                                                                                    \
    if (!(cond)) ::recycle::fuzz::fail(std::string(__FILE__ ":") + std::to_string(__LINE__) + \
                                       ": " #cond ": " + (msg));                          \
  } while (0)

// A per-process scratch file (readers take a path): created once under $TMPDIR or /tmp,
// rewritten for every input, removed at exit. Not thread-safe (libFuzzer runs one input at a
// time per process).
class ScratchFile {
 public:
  explicit ScratchFile(const char* tag) {
    const char* base = std::getenv("TMPDIR");
    path_ = std::string(base && *base ? base : "/tmp") + "/recycle-fuzz-" + tag + "-XXXXXX";
    fd_ = mkstemp(path_.data());
    if (fd_ < 0) fail("mkstemp failed for " + path_);
  }
  ~ScratchFile() {
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  // Replaces the file's contents with `size` bytes from `data`; returns the path.
  const std::string& write(const void* data, size_t size) {
    if (ftruncate(fd_, 0) != 0) fail("ftruncate failed");
    const char* p = static_cast<const char*>(data);
    size_t done = 0;
    while (done < size) {
      const ssize_t w = pwrite(fd_, p + done, size - done, static_cast<off_t>(done));
      if (w <= 0) fail("pwrite failed");
      done += static_cast<size_t>(w);
    }
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace recycle::fuzz
